//! `atomio_read_version` of a garbage-collected snapshot: a clear `ATOMIO_ENOTFOUND` with
//! the reason, while the kept one still reads (collection has no C call; another client
//! collects through the Rust API, as an `atomio` tool would).

use atomio::*;
use atomio_client::{DirectData, File, Strategy};
use std::ffi::{c_char, CStr, CString};
use std::ptr::null_mut;

fn ok(rc: i32) {
    assert_eq!(
        rc,
        ATOMIO_OK,
        "{}",
        // SAFETY: atomio_last_error returns a NUL-terminated string owned by this thread.
        unsafe { CStr::from_ptr(atomio_last_error()) }.to_string_lossy()
    );
}

fn last_error() -> String {
    // SAFETY: as above.
    unsafe { CStr::from_ptr(atomio_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_collected_version_is_not_found_and_the_kept_one_reads() {
    let tmp = std::env::temp_dir().join(format!("atomio-ffi-versions-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let data = CString::new(tmp.join("data").to_str().unwrap()).unwrap();
    let path = tmp.join("user.dat");
    let cpath = CString::new(path.to_str().unwrap()).unwrap();

    let mut server = null_mut();
    ok(atomio_server_start(
        c"127.0.0.1:0".as_ptr(),
        data.as_ptr(),
        0,
        &mut server,
    ));
    let addr_ptr: *const c_char = atomio_server_address(server);
    // SAFETY: owned by the server, which outlives this use.
    let addr = unsafe { CStr::from_ptr(addr_ptr) }
        .to_str()
        .unwrap()
        .to_string();
    let mut client = null_mut();
    ok(atomio_connect(&addr_ptr, 1, &mut client));
    let mut file = null_mut();
    ok(atomio_open_direct(
        client,
        cpath.as_ptr(),
        ATOMIO_CREATE,
        &mut file,
    ));
    ok(atomio_set_atomic(file, c"versioning".as_ptr()));
    let (off, len) = (0u64, 8u64);
    for v in 1..=3u8 {
        let bytes = [b'0' + v; 8];
        ok(atomio_write_list(
            file,
            1,
            &off,
            &len,
            bytes.as_ptr().cast(),
            8,
        ));
    }

    // Another client collects every version but the newest.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(async {
        let mut c = atomio_net::ClusterClient::connect_tcp(&[addr])
            .await
            .unwrap();
        let mut f = File::direct(DirectData::open_mode(&path, false, true).unwrap());
        f.set_atomic(Some(Strategy::versioning())).unwrap();
        f.collect_versions(&mut c, 1, None).await.unwrap()
    });
    assert_eq!(report.collected, vec![1, 2]);

    let mut buf = [0u8; 8];
    for v in [1, 2] {
        let rc = atomio_read_version(file, v, 1, &off, &len, buf.as_mut_ptr().cast(), 8);
        assert_eq!(rc, ATOMIO_ENOTFOUND, "version {v}: {}", last_error());
        assert!(
            last_error().contains("garbage-collected"),
            "version {v}: {}",
            last_error()
        );
    }
    ok(atomio_read_version(
        file,
        3,
        1,
        &off,
        &len,
        buf.as_mut_ptr().cast(),
        8,
    ));
    assert_eq!(&buf, b"33333333");
    let mut latest = 0;
    ok(atomio_latest_version(file, &mut latest));
    assert_eq!(latest, 3);

    ok(atomio_close(file));
    atomio_disconnect(client);
    ok(atomio_server_stop(server));
    let _ = std::fs::remove_dir_all(&tmp);
}
