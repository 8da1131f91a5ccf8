//! The versioning commands against real `atomio server` processes: a file written in
//! three versions by a client, then `atomio versions` lists them, `atomio export --version`
//! writes each snapshot exactly, `atomio gc --keep 1` frees the older ones (their export
//! then fails, the newest still exports exactly).

use atomio_client::{File, Strategy};
use atomio_layout::{Access, ByteRange};
use atomio_net::{ClusterClient, ClusterConfig, LocalServers, ServerEntry};
use std::process::Command;

fn exe() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_atomio").into()
}

fn atomio(args: &[&str]) -> (bool, String) {
    let out = Command::new(exe()).args(args).output().expect("run atomio");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_export_and_gc_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("atomio-versions-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = LocalServers::start(&exe(), 2, &dir).await.expect("servers");
    let cfg = ClusterConfig {
        servers: cluster
            .addresses
            .iter()
            .map(|a| ServerEntry { address: a.clone() })
            .collect(),
    };
    let cluster_file = dir.join("cluster.toml");
    std::fs::write(&cluster_file, cfg.to_toml()).unwrap();
    let cf = cluster_file.to_str().unwrap();

    let path = "/snapshots";
    let mut c = ClusterClient::connect_tcp(&cluster.addresses)
        .await
        .unwrap();
    let mut f = File::create(&mut c, path, 4096, 2).await.unwrap();
    f.set_atomic(Some(Strategy::versioning())).unwrap();
    // Version v writes byte value v over [v·1000, 20000): each snapshot differs.
    let mut expect = Vec::new();
    let mut model = vec![0u8; 20_000];
    for v in 1..=3u8 {
        let r = ByteRange::new(u64::from(v) * 1000, 20_000).unwrap();
        let data = vec![v; r.len() as usize];
        f.write(&mut c, &Access::contiguous(r).unwrap(), &data)
            .await
            .unwrap();
        model[r.start as usize..].fill(v);
        expect.push(model.clone());
    }

    let (ok, text) = atomio(&["versions", "--cluster", cf, path]);
    assert!(ok, "{text}");
    assert_eq!(
        text.lines().filter(|l| l.contains("Published")).count(),
        3,
        "{text}"
    );
    // Real times (they printed as 1970: the server's clock was ms since it started).
    let year: u32 = {
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 86_400;
        1970 + (days as f64 / 365.2425) as u32
    };
    for line in text.lines().filter(|l| l.contains("Published")) {
        let shown = line.split_whitespace().nth(1).unwrap_or("");
        assert!(
            shown.starts_with(&year.to_string()) || shown.starts_with(&(year - 1).to_string()),
            "not this year's time ({year}): {line}"
        );
    }
    // Without --version, a versioned file exports its newest snapshot (it wrote 0 bytes).
    let newest = dir.join("newest.bin");
    let (ok, text) = atomio(&["export", "--cluster", cf, path, newest.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("as of version 3"), "{text}");
    assert_eq!(std::fs::read(&newest).unwrap(), expect[2]);

    for v in 1..=3usize {
        let out = dir.join(format!("v{v}.bin"));
        let (ok, text) = atomio(&[
            "export",
            "--cluster",
            cf,
            path,
            out.to_str().unwrap(),
            "--version",
            &v.to_string(),
        ]);
        assert!(ok, "{text}");
        assert_eq!(std::fs::read(&out).unwrap(), expect[v - 1], "version {v}");
    }

    let (ok, text) = atomio(&["gc", "--cluster", cf, path, "--keep", "1"]);
    assert!(ok, "{text}");
    assert!(text.contains("collected 2 snapshots"), "{text}");
    let out = dir.join("after.bin");
    let o = out.to_str().unwrap();
    let (ok, _) = atomio(&["export", "--cluster", cf, path, o, "--version", "1"]);
    assert!(!ok, "a collected snapshot still exported");
    let (ok, text) = atomio(&["export", "--cluster", cf, path, o, "--version", "3"]);
    assert!(ok, "{text}");
    assert_eq!(std::fs::read(&out).unwrap(), expect[2]);
    let (ok, text) = atomio(&["versions", "--cluster", cf, path, "--json"]);
    assert!(ok && text.contains("\"Collected\""), "{text}");

    // The user's own file: snapshots over it, then `atomio materialize --direct`.
    let user = dir.join("user.dat");
    std::fs::write(&user, vec![b'.'; 5000]).unwrap();
    let mut d = File::direct(atomio_client::DirectData::open(&user, false).unwrap());
    d.set_atomic(Some(Strategy::versioning())).unwrap();
    let r = ByteRange::new(4000, 6000).unwrap();
    d.write(&mut c, &Access::contiguous(r).unwrap(), &[b'x'; 2000])
        .await
        .unwrap();
    let u = user.to_str().unwrap();
    let (ok, text) = atomio(&["versions", "--cluster", cf, "--direct", u]);
    assert!(ok && text.contains("Published"), "{text}");
    assert_eq!(std::fs::read(&user).unwrap(), vec![b'.'; 5000]);
    let (ok, text) = atomio(&["materialize", "--cluster", cf, "--direct", u]);
    assert!(ok, "{text}");
    let bytes = std::fs::read(&user).unwrap();
    assert_eq!(bytes.len(), 6000);
    assert!(bytes[..4000].iter().all(|&b| b == b'.') && bytes[4000..].iter().all(|&b| b == b'x'));
}
