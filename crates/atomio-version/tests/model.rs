//! The versioning model test: random noncontiguous writes from several writers in random
//! interleavings (every step of every writer, node puts in any order, stalled writers
//! aborted, collections between), every published snapshot compared with a per-byte model
//! that applied the writes in version order; negative controls prove the checks fail.

use atomio_version::sim::{run, Control, SimConfig};

/// Runs every seed; returns (published, aborted, collected) over the sweep.
fn sweep(cfg: &SimConfig, seeds: std::ops::Range<u64>) -> (u64, u64, u64) {
    let mut totals = (0, 0, 0);
    for seed in seeds {
        match run(seed, cfg) {
            Ok(r) => {
                totals.0 += r.published;
                totals.1 += r.aborted;
                totals.2 += r.collected;
            }
            Err(e) => {
                panic!("seed {seed}: {e} (replay: atomio sim --versioning --seed {seed} --seeds 1)")
            }
        }
    }
    totals
}

#[test]
fn every_published_snapshot_equals_the_model() {
    let (published, aborted, collected) = sweep(&SimConfig::default(), 0..400);
    // The sweep must have run the paths it claims to check.
    assert!(published > 5000 && aborted > 100 && collected > 3000);
}

#[test]
fn many_concurrent_writers_and_tiny_chunks() {
    let cfg = SimConfig {
        writers: 8,
        writes_each: 4,
        chunk: 8,
        fanout: 2,
        file_size: 700,
        max_regions: 12,
        ..SimConfig::default()
    };
    sweep(&cfg, 1000..1200);
}

#[test]
fn one_level_trees_and_no_collection() {
    let cfg = SimConfig {
        chunk: 4096,
        file_size: 3000,
        gc_keep: None,
        ..SimConfig::default()
    };
    sweep(&cfg, 2000..2100);
}

#[test]
fn collection_keeping_one_snapshot_is_safe_under_writers() {
    let cfg = SimConfig {
        gc_keep: Some(1),
        writes_each: 10,
        ..SimConfig::default()
    };
    sweep(&cfg, 3000..3200);
}

/// Counts the seeds of `seeds` on which the control is caught.
fn caught(cfg: &SimConfig, seeds: std::ops::Range<u64>) -> usize {
    seeds.filter(|s| run(*s, cfg).is_err()).count()
}

#[test]
fn publishing_out_of_order_is_caught() {
    let cfg = SimConfig {
        control: Control::PublishOutOfOrder,
        stalls: false,
        gc_keep: None,
        ..SimConfig::default()
    };
    let n = caught(&cfg, 0..100);
    assert!(
        n >= 50,
        "out-of-order publication caught on only {n} of 100 seeds"
    );
}

#[test]
fn a_collector_that_frees_shared_nodes_is_caught() {
    let cfg = SimConfig {
        control: Control::GcFreesShared,
        ..SimConfig::default()
    };
    let n = caught(&cfg, 0..100);
    assert!(
        n >= 50,
        "freeing shared nodes caught on only {n} of 100 seeds"
    );
}

/// Writes `writes` sequentially (one writer) into a file of `size`, returns nodes put.
fn nodes_for(size: u64, writes: &[(u64, u64)]) -> usize {
    use atomio_layout::{ByteRange, RangeList};
    use atomio_version::build::WritePieces;
    use atomio_version::{BuildStep, ChunkRef, FileVersions, Geometry, TreeBuilder};
    let g = Geometry::new(64, 4, size).unwrap();
    let mut m = FileVersions::new(g);
    let mut store: std::collections::HashMap<atomio_version::NodeKey, atomio_version::Node> =
        std::collections::HashMap::new();
    let mut at = 0;
    for &(start, len) in writes {
        let r = ByteRange::at(start, len).unwrap();
        let mut pieces = WritePieces::default();
        pieces.add(
            &g,
            r,
            ChunkRef {
                server: 0,
                object: 1,
                offset: at,
            },
        );
        at += len;
        let declared = RangeList::from_ranges(vec![r]);
        let a = m.assign(1, declared.clone(), 0).unwrap();
        let mut b = TreeBuilder::new(g, a.version, a.published, a.hints, pieces, &declared);
        let mut supply = Vec::new();
        loop {
            match b.advance(std::mem::take(&mut supply)).unwrap() {
                BuildStep::Fetch(keys) => {
                    supply = keys.iter().map(|k| (*k, store[k].clone())).collect();
                }
                BuildStep::Done(nodes) => {
                    store.extend(nodes);
                    break;
                }
            }
        }
        m.complete(a.version).unwrap();
    }
    store.len()
}

/// Sharing: a write adds nodes along its own paths only. The same 50 writes of 100 bytes
/// put 6.5x the nodes of the first write alone, in a 4 KiB file and in a 1 TiB one (only
/// the tree's depth, log of the size, enters), while the 1 TiB file's span is 2^28 times
/// larger.
#[test]
fn nodes_grow_with_bytes_written_not_with_the_file_size() {
    let writes: Vec<(u64, u64)> = (0..50u64).map(|i| ((i * 797) % 3900, 100)).collect();
    for size in [1u64 << 12, 1 << 40] {
        let levels = atomio_version::Geometry::new(64, 4, size).unwrap().levels as usize;
        let n = nodes_for(size, &writes);
        // Each 100-byte write touches at most 3 chunks: ≤ 3 leaves + 3 nodes per level.
        let bound = writes.len() * 3 * levels;
        assert!(n <= bound, "{size}: {n} nodes > {bound}");
        let one = nodes_for(size, &writes[..1]);
        assert!(n >= 10 * one.min(5), "{size}: {n} nodes");
    }
    let small = nodes_for(1 << 12, &writes);
    let huge = nodes_for(1 << 40, &writes);
    // Depth grows from 6 to 20 levels: nodes grow at most in that ratio, not 2^28-fold.
    assert!(huge <= small * 20 / 6 + 50, "{small} vs {huge}");
}

#[test]
fn coalescing_keeps_every_byte_and_at_most_max_ranges() {
    use atomio_layout::{ByteRange, RangeList};
    use atomio_version::build::coalesce;
    let ranges = RangeList::from_ranges(
        (0..1000u64)
            .map(|i| ByteRange::new(i * 100 + (i % 7) * 3, i * 100 + 50).unwrap())
            .collect(),
    );
    for max in [1, 2, 10, 999, 1000, 5000] {
        let c = coalesce(&ranges, max);
        assert!(c.len() <= max.max(1), "{max}: {}", c.len());
        for r in ranges.as_slice() {
            assert!(c
                .as_slice()
                .iter()
                .any(|x| x.start <= r.start && r.end <= x.end));
        }
    }
}
