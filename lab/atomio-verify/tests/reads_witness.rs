//! Reads that each saw one whole version of a region written again and again by one writer
//! (the MPI-IO test "one writer, several readers") are trivially serializable: every write
//! in op order, each read right after the version it saw. The backward witness search can
//! interleave the reads of two versions into a dead end; the forward search must find it.

use atomio_layout::{Access, ByteRange};
use atomio_verify::*;

fn run(versions: u64, readers: u32, reads_each: u64, shuffle: bool) -> Report {
    let len = 8 * 1024u64;
    let a = Access::contiguous(ByteRange::new(4096, 4096 + len).unwrap()).unwrap();
    let writes: Vec<Write> = (0..versions).map(|k| Write::new(0, k, a.clone())).collect();
    let mut file = vec![0u8; (4096 + len) as usize];
    fill(0, versions - 1, a.ranges(), &mut file[4096..]).unwrap();
    let dir = std::env::temp_dir().join(format!("atomio-verify-rw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("f-{versions}-{readers}-{reads_each}-{shuffle}.dat"));
    std::fs::write(&path, &file).unwrap();
    let mut datas = Vec::new();
    for r in 1..=readers {
        for i in 0..reads_each {
            // Non-decreasing per reader, or (shuffle) any version in any order: still
            // serializable, since reads of one reader are not ordered for the verifier.
            let v = if shuffle {
                (i * 7 + u64::from(r) * 3) % versions
            } else {
                (i * versions / reads_each).min(versions - 1)
            };
            let mut d = vec![0u8; len as usize];
            fill(0, v, a.ranges(), &mut d).unwrap();
            datas.push((r, i, d));
        }
    }
    let reads: Vec<Read> = datas
        .iter()
        .map(|(r, i, d)| Read::new(*r, *i, a.clone(), &d[..]))
        .collect();
    let f = std::fs::File::open(&path).unwrap();
    let rep = verify(&f, &writes, &reads).unwrap();
    let _ = std::fs::remove_file(&path);
    rep
}

#[test]
fn one_writer_many_whole_version_reads_are_atomic() {
    for (versions, readers, reads_each, shuffle) in [
        (6, 3, 67, false),
        (2, 1, 50, false),
        (20, 3, 100, true),
        (300, 3, 40, false),
    ] {
        let rep = run(versions, readers, reads_each, shuffle);
        assert_eq!(rep.verdict, Verdict::Atomic, "{versions} versions: {rep}");
    }
}

#[test]
fn a_read_of_two_versions_is_still_caught() {
    let len = 8 * 1024u64;
    let a = Access::contiguous(ByteRange::new(0, len).unwrap()).unwrap();
    let writes: Vec<Write> = (0..3).map(|k| Write::new(0, k, a.clone())).collect();
    let mut file = vec![0u8; len as usize];
    fill(0, 2, a.ranges(), &mut file).unwrap();
    let dir = std::env::temp_dir().join(format!("atomio-verify-rw2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("torn.dat");
    std::fs::write(&path, &file).unwrap();
    let mut torn = vec![0u8; len as usize];
    fill(0, 0, a.ranges(), &mut torn).unwrap();
    let mut tail = vec![0u8; len as usize];
    fill(0, 1, a.ranges(), &mut tail).unwrap();
    torn[4096..].copy_from_slice(&tail[4096..]);
    let reads = vec![Read::new(1, 0, a.clone(), &torn[..])];
    let f = std::fs::File::open(&path).unwrap();
    let rep = verify(&f, &writes, &reads).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(rep.verdict, Verdict::Violated, "{rep}");
}
