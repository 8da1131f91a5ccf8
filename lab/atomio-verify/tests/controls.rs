//! Negative and positive controls: each known failure is reported with the right kind,
//! operations and offsets, and each legal outcome verifies.

mod common;

use atomio_layout::ByteRange;
use atomio_verify::{
    verify, EdgeReason, Error, OpId, Read, ReadId, Verdict, ViolationKind, WriteId,
};
use common::{list, observe, paint, paint_range, write};

fn r(s: u64, e: u64) -> ByteRange {
    ByteRange::new(s, e).unwrap()
}

fn w(writer: u32, op: u64) -> OpId {
    OpId::Write(WriteId::new(writer, op))
}

#[test]
fn serial_writes_verify_with_a_witness_order() {
    let a = write(1, 1, &[(0, 100), (200, 300)]);
    let b = write(2, 1, &[(50, 250)]);
    let mut file = vec![0u8; 400];
    paint(&mut file, &b);
    paint(&mut file, &a);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    assert!(rep.ok(), "{rep}");
    assert_eq!(rep.order, vec![w(2, 1), w(1, 1)]);
    assert_eq!(rep.intervals, 5);
    assert_eq!(rep.bytes_checked, 300);
    assert!(rep.to_string().starts_with("ATOMIC"));
}

#[test]
fn torn_write_across_intervals_names_writers_and_offsets() {
    let a = write(1, 3, &[(4096, 4104), (5120, 5128)]);
    let b = write(2, 3, &[(4096, 4104), (5120, 5128)]);
    let mut file = vec![0u8; 8192];
    paint_range(&mut file, a.id, 4096, 4104);
    paint_range(&mut file, b.id, 5120, 5128);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated);
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::TornWrite);
    assert_eq!(v.ops, vec![w(1, 3), w(2, 3)]);
    assert_eq!(v.evidence[0].range, r(4096, 4104));
    assert_eq!(v.evidence[0].data_of, Some(w(1, 3)));
    assert_eq!(v.evidence[1].range, r(5120, 5128));
    assert_eq!(v.evidence[1].data_of, Some(w(2, 3)));
    assert_eq!(
        v.to_string(),
        "writes (w1,op3) and (w2,op3) both appear in their overlap: \
         [4096, 4104) from (w1,op3), [5120, 5128) from (w2,op3)"
    );
}

#[test]
fn torn_write_inside_one_interval_is_found_at_the_split() {
    let a = write(1, 0, &[(0, 64)]);
    let b = write(2, 0, &[(0, 64)]);
    let mut file = vec![0u8; 64];
    paint_range(&mut file, a.id, 0, 40);
    paint_range(&mut file, b.id, 40, 64);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::TornWrite);
    assert_eq!(v.ops, vec![w(1, 0), w(2, 0)]);
    assert_eq!(v.evidence[0].range, r(0, 40));
    assert_eq!(v.evidence[1].range, r(40, 64));
}

#[test]
fn three_write_cycle_is_reported_with_its_overlaps() {
    // A over B at [0,8), B over C at [16,24), C over A at [32,40).
    let a = write(1, 0, &[(0, 8), (32, 40)]);
    let b = write(2, 0, &[(0, 8), (16, 24)]);
    let c = write(3, 0, &[(16, 24), (32, 40)]);
    let mut file = vec![0u8; 48];
    paint_range(&mut file, a.id, 0, 8);
    paint_range(&mut file, b.id, 16, 24);
    paint_range(&mut file, c.id, 32, 40);
    let rep = verify(&file[..], &[a, b, c], &[]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated);
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::OrderCycle);
    assert_eq!(v.cycle.len(), 3);
    let mut steps: Vec<(OpId, OpId, ByteRange)> = v
        .cycle
        .iter()
        .map(|e| (e.before, e.after, e.range))
        .collect();
    steps.sort_by_key(|s| s.2.start);
    assert_eq!(
        steps,
        vec![
            (w(2, 0), w(1, 0), r(0, 8)),
            (w(3, 0), w(2, 0), r(16, 24)),
            (w(1, 0), w(3, 0), r(32, 40)),
        ]
    );
    for pair in v.cycle.windows(2) {
        assert_eq!(pair[0].after, pair[1].before, "steps chain into a cycle");
    }
    assert!(
        v.to_string().starts_with(
            "no serial order of whole writes explains the file: (w1,op0) → (w3,op0) → (w2,op0) → (w1,op0), because (w3,op0) over (w1,op0) at [32, 40)"
        ),
        "{v}"
    );
}

#[test]
fn data_at_a_wrong_offset_is_unexplained_and_located() {
    // B is written first over [0, 16384); A's data for [4096, 8192) lands 512 bytes high.
    let a = write(1, 7, &[(4096, 8192)]);
    let b = write(2, 7, &[(0, 16384)]);
    let mut file = vec![0u8; 16384];
    paint(&mut file, &b);
    let mut data = vec![0u8; 4096];
    atomio_verify::fill(1, 7, [r(4096, 8192)], &mut data).unwrap();
    file[4608..8704].copy_from_slice(&data);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated);
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::UnexplainedData);
    assert_eq!(v.range().unwrap().start, 4608);
    assert_eq!(v.ops, vec![w(1, 7), w(2, 7)]);
    let note = v.note.as_deref().unwrap();
    assert!(
        note.contains("(w1,op7)") && note.contains("512 bytes too high"),
        "{v}"
    );
    // The bytes past A's range, [8192, 8704), are B's only and also wrong.
    assert_eq!(rep.violation_count, 2);
    assert_eq!(rep.violations[1].range().unwrap().start, 8192);
}

#[test]
fn lost_data_and_stray_writes_are_told_apart() {
    let a = write(1, 0, &[(0, 64)]);
    let b = write(2, 0, &[(64, 128)]);
    let mut file = vec![0u8; 128];
    paint(&mut file, &b);
    // A never landed; instead A's tags appear over [64, 72), which it did not declare.
    paint_range(&mut file, a.id, 64, 72);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    let lost = &rep.violations[0];
    assert_eq!(lost.kind, ViolationKind::UnexplainedData);
    assert_eq!(lost.range(), Some(r(0, 64)));
    assert!(lost.to_string().contains("never landed"), "{lost}");
    let stray = &rep.violations[1];
    assert_eq!(stray.range(), Some(r(64, 72)));
    assert!(
        stray.note.as_deref().unwrap().contains("stray write"),
        "{stray}"
    );
}

#[test]
fn read_that_saw_half_of_a_write_is_torn() {
    let a = write(1, 0, &[(0, 1024)]);
    let mut file = vec![0u8; 1024];
    paint(&mut file, &a);
    let mut seen = vec![0u8; 1024];
    seen[..512].copy_from_slice(&file[..512]);
    let read = Read::new(5, 2, list(&[(0, 1024)]), seen);
    let rep = verify(&file[..], &[a], &[read]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated);
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::TornRead);
    assert_eq!(v.ops, vec![OpId::Read(ReadId::new(5, 2)), w(1, 0)]);
    assert_eq!(v.evidence[0].range, r(0, 512));
    assert_eq!(v.evidence[1].range, r(512, 1024));
    assert_eq!(v.evidence[1].data_of, Some(OpId::Initial));
}

#[test]
fn read_that_saw_half_of_a_noncontiguous_write_is_a_cycle() {
    // The write's two pieces are separate intervals: the tear shows only in the order.
    let a = write(1, 0, &[(0, 512), (1024, 1536)]);
    let mut file = vec![0u8; 1536];
    paint(&mut file, &a);
    let ranges = list(&[(0, 1536)]);
    let mut seen = observe(&file, &ranges);
    seen[1024..].fill(0);
    let read = Read::new(5, 2, ranges, seen);
    let rep = verify(&file[..], &[a], &[read]).unwrap();
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::TornRead, "{rep}");
    assert_eq!(v.evidence[0].range, r(0, 512));
    assert_eq!(v.evidence[1].range, r(1024, 1536));
    assert_eq!(v.cycle.len(), 2);
}

#[test]
fn read_of_a_write_later_overwritten_is_accepted() {
    // W1, then the read (sees W1 whole), then W2 over part of it.
    let w1 = write(1, 0, &[(0, 1024)]);
    let w2 = write(2, 0, &[(512, 1536)]);
    let mut file = vec![0u8; 1536];
    paint(&mut file, &w1);
    let ranges = list(&[(0, 1024)]);
    let seen = observe(&file, &ranges);
    paint(&mut file, &w2);
    let late_ranges = list(&[(0, 1536)]);
    let late = observe(&file, &late_ranges);
    let reads = [
        Read::new(9, 0, ranges, seen),
        Read::new(9, 1, late_ranges, late),
    ];
    let rep = verify(&file[..], &[w1, w2], &reads).unwrap();
    assert!(rep.ok(), "{rep}");
    let rd = |op| OpId::Read(ReadId::new(9, op));
    let pos = |o: OpId| rep.order.iter().position(|&x| x == o).unwrap();
    assert!(pos(w(1, 0)) < pos(rd(0)) && pos(rd(0)) < pos(w(2, 0)));
    assert!(pos(w(2, 0)) < pos(rd(1)));
}

#[test]
fn read_of_a_write_later_completely_hidden_is_accepted() {
    // W2 covers all of W1, so W1 is nowhere in the file, yet the read proves it happened.
    let w1 = write(1, 0, &[(0, 256), (512, 768)]);
    let w2 = write(2, 0, &[(0, 1024)]);
    let mut file = vec![0u8; 1024];
    paint(&mut file, &w1);
    let ranges = list(&[(0, 1024)]);
    let seen = observe(&file, &ranges);
    paint(&mut file, &w2);
    let rep = verify(&file[..], &[w1, w2], &[Read::new(9, 0, ranges, seen)]).unwrap();
    assert!(rep.ok(), "{rep}");
    assert_eq!(
        rep.order,
        vec![w(1, 0), OpId::Read(ReadId::new(9, 0)), w(2, 0)]
    );
}

#[test]
fn read_ordered_inconsistently_with_the_file_is_not_serializable() {
    // The file says W1 then W2 (W2 on top). The read saw W2 in one place and W1 in another
    // place where W2 also wrote: it would need W2 both before and after it.
    let w1 = write(1, 0, &[(0, 64), (128, 192)]);
    let w2 = write(2, 0, &[(0, 64), (128, 192)]);
    let mut file = vec![0u8; 192];
    paint(&mut file, &w1);
    let ranges = list(&[(0, 64), (128, 192)]);
    let mut seen = observe(&file, &ranges);
    paint(&mut file, &w2);
    seen[..64].copy_from_slice(&file[..64]);
    let read = Read::new(3, 0, ranges, seen);
    let rep = verify(&file[..], &[w1, w2], &[read]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated, "{rep}");
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::TornRead, "{v}");
    assert_eq!(v.ops[1], w(2, 0));
}

#[test]
fn read_of_never_written_bytes_must_be_zero() {
    let a = write(1, 0, &[(0, 16)]);
    let mut file = vec![0u8; 64];
    paint(&mut file, &a);
    let mut seen = vec![0u8; 32];
    seen[20] = 7;
    let read = Read::new(4, 0, list(&[(32, 64)]), seen);
    let rep = verify(&file[..], &[a], &[read]).unwrap();
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::UnexplainedRead);
    assert_eq!(v.range(), Some(r(52, 53)));
    assert_eq!(v.found, vec![7]);
}

#[test]
fn read_before_any_write_sees_zeros_and_goes_first() {
    let a = write(1, 0, &[(0, 64)]);
    let mut file = vec![0u8; 64];
    paint(&mut file, &a);
    let read = Read::new(4, 0, list(&[(0, 64)]), vec![0u8; 64]);
    let rep = verify(&file[..], &[a], &[read]).unwrap();
    assert!(rep.ok(), "{rep}");
    assert_eq!(rep.order, vec![OpId::Read(ReadId::new(4, 0)), w(1, 0)]);
    assert_eq!(rep.violation(), None);
}

/// Finds an op number for writer 2 whose tag byte at `o` equals writer 1 op 0's.
fn colliding_op(o: u64) -> u64 {
    let want = atomio_verify::tag_byte(1, 0, o);
    (0..)
        .find(|&op| atomio_verify::tag_byte(2, op, o) == want)
        .unwrap()
}

#[test]
fn ambiguous_short_interval_is_not_a_violation() {
    let op = colliding_op(100);
    let a = write(1, 0, &[(100, 101)]);
    let b = write(2, op, &[(100, 101)]);
    let mut file = vec![0u8; 128];
    paint(&mut file, &a);
    let rep = verify(&file[..], &[a, b], &[]).unwrap();
    assert!(rep.ok(), "{rep}");
    assert_eq!(rep.ambiguous_intervals, 1);
}

#[test]
fn ambiguity_resolved_by_other_evidence_can_prove_a_violation() {
    // At [100,101) all of A, B, C cover the byte and it matches A and B (by chance), not C.
    // Elsewhere C is clearly on top of A and of B, so C would be last at 100: impossible.
    let op = colliding_op(100);
    let a = write(1, 0, &[(0, 8), (100, 101)]);
    let b = write(2, op, &[(16, 24), (100, 101)]);
    let c = write(3, 0, &[(0, 8), (16, 24), (100, 101)]);
    let mut file = vec![0u8; 128];
    paint(&mut file, &c);
    paint_range(&mut file, a.id, 100, 101);
    let rep = verify(&file[..], &[a, b, c], &[]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated, "{rep}");
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::OrderCycle);
    assert!(v.cycle.iter().any(|e| !e.alternatives.is_empty()), "{v}");
    // Without the conflicting evidence the same ambiguous byte is fine.
    let a = write(1, 0, &[(100, 101)]);
    let b = write(2, op, &[(100, 101)]);
    let c = write(3, 0, &[(100, 101)]);
    let mut file = vec![0u8; 128];
    paint_range(&mut file, a.id, 100, 101);
    assert!(verify(&file[..], &[a, b, c], &[]).unwrap().ok());
}

#[test]
fn input_problems_are_errors_not_verdicts() {
    let a = write(1, 0, &[(0, 100)]);
    let file = [0u8; 50];
    assert!(matches!(
        verify(&file[..], std::slice::from_ref(&a), &[]),
        Err(Error::ShortFile {
            len: 50,
            needed: 100,
            ..
        })
    ));
    let file = [0u8; 100];
    let dup = [a.clone(), write(1, 0, &[(0, 10)])];
    assert!(matches!(
        verify(&file[..], &dup, &[]),
        Err(Error::Duplicate { .. })
    ));
    let read = Read::new(1, 0, list(&[(0, 10)]), vec![0u8; 9]);
    assert!(matches!(
        verify(&file[..], &[a], &[read]),
        Err(Error::ObservedSize {
            expected: 10,
            got: 9,
            ..
        })
    ));
}

#[test]
fn report_display_reads_well() {
    let a = write(1, 3, &[(4096, 4104), (5120, 5128)]);
    let b = write(2, 3, &[(4096, 4104), (5120, 5128)]);
    let mut file = vec![0u8; 8192];
    paint_range(&mut file, a.id, 4096, 4104);
    paint_range(&mut file, b.id, 5120, 5128);
    let text = verify(&file[..], &[a, b], &[]).unwrap().to_string();
    assert!(
        text.starts_with("NOT ATOMIC: torn write: writes (w1,op3) and (w2,op3)"),
        "{text}"
    );
    assert!(
        text.contains("2 writes, 0 reads; 2 elementary intervals"),
        "{text}"
    );
    let e = &verify(&file[..], &[write(1, 3, &[(4096, 4104)])], &[])
        .unwrap()
        .violations;
    assert_eq!(e.len(), 0);
    let _ = EdgeReason::Overwrote;
}

#[test]
fn read_in_a_longer_cycle_is_not_serializable() {
    // The file puts C before A (A over C at [128,192)). The read saw A at [0,64) but the
    // initial zeros at [256,320), where C wrote: A → read → C → A.
    let a = write(1, 0, &[(0, 64), (128, 192)]);
    let c = write(3, 0, &[(128, 192), (256, 320)]);
    let mut file = vec![0u8; 320];
    paint(&mut file, &c);
    paint(&mut file, &a);
    let ranges = list(&[(0, 64), (256, 320)]);
    let mut seen = observe(&file, &ranges);
    seen[64..].fill(0);
    let read = Read::new(5, 0, ranges, seen);
    let rep = verify(&file[..], &[a, c], &[read]).unwrap();
    assert_eq!(rep.verdict, Verdict::Violated, "{rep}");
    let v = rep.violation().unwrap();
    assert_eq!(v.kind, ViolationKind::ReadNotSerializable, "{v}");
    let rd = OpId::Read(ReadId::new(5, 0));
    assert_eq!(v.ops[0], rd);
    assert_eq!(v.cycle.len(), 3);
    assert_eq!(v.cycle[0].before, rd, "the cycle starts at the read");
    let ranges: Vec<ByteRange> = v.cycle.iter().map(|e| e.range).collect();
    assert!(ranges.contains(&r(256, 320)) && ranges.contains(&r(128, 192)));
    assert!(ranges.contains(&r(0, 64)));
    assert!(
        v.to_string().starts_with("read (r5,op0) fits nowhere"),
        "{v}"
    );
}
