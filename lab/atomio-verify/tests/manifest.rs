//! A run verified after the fact from its data file and manifest, and the manifest's
//! failure modes reported as errors.

mod common;

use atomio_layout::{Access, Pattern};
use atomio_verify::manifest::to_hex;
use atomio_verify::{
    manifest_path_for, verify_manifest, Error, Manifest, Observed, ReadId, Verdict, Write, WriteId,
};
use common::{list, observe, paint};
use std::path::PathBuf;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("atomio-verify-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a run into `dir`: three writes (two structured, one explicit list), two reads
/// sharing a dump file and one inline. Returns the manifest path.
fn make_run(dir: &std::path::Path) -> PathBuf {
    let elem = Pattern::bytes(100).unwrap();
    let vec = Pattern::hvector(50, 1, 400, &elem).unwrap();
    let writes = vec![
        Write::new(0, 1, Access::new(0, vec.clone()).unwrap()),
        Write::new(1, 1, Access::new(50, vec).unwrap()),
        Write::new(2, 1, list(&[(1000, 3000), (19_000, 20_000)])),
    ];
    let mut file = vec![0u8; 20_000];
    paint(&mut file, &writes[0]);
    let r0 = list(&[(0, 150), (400, 550)]);
    let seen0 = observe(&file, &r0);
    paint(&mut file, &writes[1]);
    let r1 = list(&[(900, 1100)]);
    let seen1 = observe(&file, &r1);
    paint(&mut file, &writes[2]);
    let r2 = list(&[(19_990, 20_000)]);
    let seen2 = observe(&file, &r2);
    std::fs::write(dir.join("out.dat"), &file).unwrap();
    let mut dump = vec![0xeeu8; 64];
    dump.extend_from_slice(&seen0);
    let off1 = dump.len() as u64;
    dump.extend_from_slice(&seen1);
    std::fs::write(dir.join("reads.bin"), &dump).unwrap();

    let mut m = Manifest::new("out.dat");
    for w in &writes {
        m.add_write(w.id, &w.ranges);
    }
    let at = |offset| Observed {
        file: Some("reads.bin".into()),
        offset,
        hex: None,
    };
    m.add_read(ReadId::new(7, 0), &r0, at(64));
    m.add_read(ReadId::new(7, 1), &r1, at(off1));
    m.add_read(
        ReadId::new(8, 0),
        &r2,
        Observed {
            file: None,
            offset: 0,
            hex: Some(to_hex(&seen2)),
        },
    );
    let path = manifest_path_for(&dir.join("out.dat"));
    m.save(&path).unwrap();
    assert_eq!(Manifest::load(&path).unwrap(), m, "JSON round trip");
    path
}

#[test]
fn a_run_verifies_from_its_manifest_and_corruption_is_found() {
    let dir = TempDir::new("manifest-ok");
    let path = make_run(&dir.0);
    assert!(path.ends_with("out.dat.atomio.json"));
    let rep = verify_manifest(&path).unwrap();
    assert!(rep.ok(), "{rep}");
    assert_eq!((rep.writes, rep.reads), (3, 3));

    // Lose a piece of write (w1,op1) in the data file.
    let data = dir.0.join("out.dat");
    let mut file = std::fs::read(&data).unwrap();
    file[460..470].fill(0);
    std::fs::write(&data, &file).unwrap();
    let rep = verify_manifest(&path).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated);
    let v = rep.violation().unwrap();
    assert_eq!(v.range().unwrap().start, 460);
    assert!(v.ops.contains(&WriteId::new(1, 1).into()), "{v}");
}

#[test]
fn manifest_problems_are_errors() {
    let dir = TempDir::new("manifest-err");
    let path = make_run(&dir.0);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut m = Manifest::load(&path).unwrap();

    // A truncated data file: the writes reach past its end.
    let data = dir.0.join("out.dat");
    let full = std::fs::read(&data).unwrap();
    std::fs::write(&data, &full[..15_000]).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::ShortFile { len: 15_000, .. })
    ));
    std::fs::write(&data, &full).unwrap();

    // Observed data shorter than the read.
    m.reads[2].data.hex = Some("00".into());
    m.save(&path).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::ObservedSize { .. })
    ));
    m.reads[2].data.hex = Some("0g".into());
    m.save(&path).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::Manifest { .. })
    ));
    m.reads[2].data.file = Some("reads.bin".into());
    m.save(&path).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::Manifest { .. })
    ));

    // No manifest at all.
    assert!(matches!(
        Manifest::load(&dir.0.join("nonexistent.json")),
        Err(Error::Io { .. })
    ));

    // A read whose dump file does not hold all of its bytes.
    let mut m3: Manifest = serde_json::from_str(&text).unwrap();
    m3.reads[1].data.offset = 10_000;
    m3.save(&path).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::ObservedSize { .. })
    ));

    // Duplicate write ids, a missing data file, malformed JSON.
    let mut m4: Manifest = serde_json::from_str(&text).unwrap();
    m4.writes[1].writer = 0;
    m4.save(&path).unwrap();
    assert!(matches!(
        verify_manifest(&path),
        Err(Error::Duplicate { .. })
    ));
    let mut m5: Manifest = serde_json::from_str(&text).unwrap();
    m5.file = "missing.dat".into();
    m5.save(&path).unwrap();
    assert!(matches!(verify_manifest(&path), Err(Error::Io { .. })));
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    assert!(matches!(verify_manifest(&path), Err(Error::Json { .. })));
}
