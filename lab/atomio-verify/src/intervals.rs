//! The sweep: one pass over the file in offset order, cutting it into elementary intervals
//! and checking every covered byte against the tags of the writes covering it.
//!
//! **Invariants and why:**
//! * An elementary interval is a maximal range whose set `C` of covering writes is constant
//!   and non-empty; read boundaries do not cut it (cutting would only make the evidence
//!   shorter and more ambiguous). Its candidate set shrinks chunk by chunk to `M`, the writes
//!   whose tags match *every* byte: a write is never credited with a partial match.
//! * `M = ∅` is decided on the spot: some byte matches none of `C` (unexplained data) or no
//!   single write explains all bytes (two writes' data in one interval: torn). Both are
//!   proofs, whatever the ambiguity elsewhere. Otherwise `(C, M)` goes to `order`.
//! * A read's bytes inside one interval (possibly several pieces) are judged together
//!   against `C ∪ {initial zeros}` the same way; read bytes outside every write must be zero.
//! * Bytes covered by no write are not checked: the run did not define them.
//! * Memory: the candidate sets, one file window, one small window per *active* read, and
//!   the constraints — never O(file) or O(ranges). Each source is read in increasing
//!   offset order, so the windows only move forward.

use crate::error::Error;
use crate::merge::{Event, Merge};
use crate::op::{OpId, Read, Write};
use crate::order::{Constraints, INIT};
use crate::report::{Evidence, Violation, ViolationKind};
use crate::source::{ByteSource, Window};
use crate::tag::{OpTag, TagKey};
use atomio_layout::ByteRange;

/// Largest piece of bytes compared at once.
const CHUNK: usize = 64 << 10;
const FILE_WINDOW: usize = 4 << 20;
/// All read windows together stay under this (each between 4 KiB and `CHUNK`), so thousands
/// of reads active at once cost tens of MiB, not one window of `CHUNK` each.
const READ_WINDOWS_TOTAL: usize = 64 << 20;
/// Shifts tried when looking for the origin of misplaced data.
const SHIFT_SEARCH: i64 = 64 << 10;
const NONE: u32 = u32::MAX;

pub(crate) struct SweepResult {
    pub intervals: u64,
    pub bytes_checked: u64,
    pub read_bytes_checked: u64,
    pub violations: Vec<Violation>,
    pub violation_count: u64,
    pub constraints: Constraints,
}

struct ReadState<'r> {
    src: &'r (dyn ByteSource + 'r),
    window: Option<Window<'r, dyn ByteSource + 'r>>,
    /// Data offset of the read's next byte.
    pos: u64,
    /// The interval its candidates belong to.
    seq: u64,
    cand: Vec<u32>,
    failed: bool,
    first: u64,
    piece: ByteRange,
    prev_piece: ByteRange,
}

struct State<'a, 'r, S: ?Sized> {
    nw: usize,
    ids: Vec<OpId>,
    tags: Vec<OpTag>,
    file: Window<'a, S>,
    cons: Constraints,
    active_w: Vec<u32>,
    slot_w: Vec<u32>,
    zob_c: u64,
    active_r: Vec<u32>,
    slot_r: Vec<u32>,
    reads: Vec<ReadState<'r>>,
    /// Current interval: `seq` counts intervals, `in_interval` says whether one is open.
    in_interval: bool,
    seq: u64,
    start: u64,
    cand: Vec<u32>,
    failed: bool,
    touched: Vec<u32>,
    scratch: Vec<u32>,
    intervals: u64,
    bytes_checked: u64,
    read_bytes_checked: u64,
    violations: Vec<Violation>,
    violation_count: u64,
    max_detailed: usize,
    /// Largest chunk while reads are active: their window size.
    read_chunk: usize,
}

pub(crate) fn sweep<'r, S: ByteSource + ?Sized>(
    src: &S,
    writes: &[Write],
    reads: &'r [Read<'r>],
    key: TagKey,
    max_detailed: usize,
) -> Result<SweepResult, Error> {
    let nw = writes.len();
    let nr = reads.len();
    let ids: Vec<OpId> = writes
        .iter()
        .map(|w| OpId::Write(w.id))
        .chain(reads.iter().map(|r| OpId::Read(r.id)))
        .collect();
    let mut st = State {
        nw,
        tags: writes
            .iter()
            .map(|w| key.op(w.id.writer, w.id.op))
            .collect(),
        file: Window::new(src, FILE_WINDOW, "the file"),
        cons: Constraints::new(nw, nr),
        active_w: Vec::new(),
        slot_w: vec![NONE; nw],
        zob_c: 0,
        active_r: Vec::new(),
        slot_r: vec![NONE; nr],
        reads: reads
            .iter()
            .map(|r| ReadState {
                src: &*r.observed,
                window: None,
                pos: 0,
                seq: 0,
                cand: Vec::new(),
                failed: false,
                first: 0,
                piece: ByteRange { start: 0, end: 0 },
                prev_piece: ByteRange { start: 0, end: 0 },
            })
            .collect(),
        in_interval: false,
        seq: 0,
        start: 0,
        cand: Vec::new(),
        failed: false,
        touched: Vec::new(),
        scratch: Vec::new(),
        intervals: 0,
        bytes_checked: 0,
        read_bytes_checked: 0,
        violations: Vec::new(),
        violation_count: 0,
        max_detailed,
        read_chunk: (READ_WINDOWS_TOTAL / nr.max(1)).clamp(4 << 10, CHUNK),
        ids,
    };
    let mut merge = Merge::new(
        writes
            .iter()
            .map(|w| w.ranges.iter())
            .chain(reads.iter().map(|r| r.ranges.iter())),
    );
    let mut events = Vec::new();
    let mut pos = 0u64;
    while let Some(p) = merge.peek() {
        if p > pos {
            st.segment(pos, p)?;
        }
        events.clear();
        merge
            .pop_at(p, &mut events)
            .map_err(|d| Error::NotMonotone {
                op: st.ids[d.stream as usize],
                offset: d.offset,
            })?;
        let stream = |e: &Event| match *e {
            Event::Start(s) | Event::End { stream: s, .. } => s as usize,
        };
        let write_change = events.iter().any(|e| stream(e) < nw);
        if write_change {
            st.finish_interval(p);
        }
        for e in &events {
            st.apply(*e);
        }
        if write_change && !st.active_w.is_empty() {
            st.start_interval(p);
        }
        pos = p;
    }
    st.finish_interval(pos);
    Ok(SweepResult {
        intervals: st.intervals,
        bytes_checked: st.bytes_checked,
        read_bytes_checked: st.read_bytes_checked,
        violations: st.violations,
        violation_count: st.violation_count,
        constraints: st.cons,
    })
}

impl<'r, S: ByteSource + ?Sized> State<'_, 'r, S> {
    fn apply(&mut self, e: Event) {
        let nw = self.nw;
        match e {
            Event::Start(s) if (s as usize) < nw => {
                self.slot_w[s as usize] = self.active_w.len() as u32;
                self.active_w.push(s);
                self.zob_c ^= self.cons.zob(s);
            }
            Event::End { stream: s, .. } if (s as usize) < nw => {
                remove(&mut self.active_w, &mut self.slot_w, s);
                self.zob_c ^= self.cons.zob(s);
            }
            Event::Start(s) => {
                let r = s - nw as u32;
                self.slot_r[r as usize] = self.active_r.len() as u32;
                self.active_r.push(r);
                let rs = &mut self.reads[r as usize];
                if rs.window.is_none() {
                    let what = format!("the data observed by {}", self.ids[s as usize]);
                    rs.window = Some(Window::new(rs.src, self.read_chunk, what));
                }
            }
            Event::End { stream: s, last } => {
                let r = s - nw as u32;
                remove(&mut self.active_r, &mut self.slot_r, r);
                if last {
                    self.reads[r as usize].window = None;
                }
            }
        }
    }

    fn start_interval(&mut self, p: u64) {
        self.in_interval = true;
        self.seq += 1;
        self.start = p;
        self.cand.clear();
        self.cand.extend_from_slice(&self.active_w);
        self.failed = false;
        self.intervals += 1;
    }

    fn finish_interval(&mut self, p: u64) {
        if !std::mem::replace(&mut self.in_interval, false) {
            return;
        }
        let range = ByteRange {
            start: self.start,
            end: p,
        };
        if !self.failed {
            self.cons
                .file_interval(&self.active_w, self.zob_c, &self.cand, range);
        }
        for r in self.touched.drain(..) {
            let rs = &self.reads[r as usize];
            if !rs.failed {
                let range = ByteRange {
                    start: rs.first,
                    end: rs.piece.end,
                };
                self.cons.read_interval(
                    (self.nw + r as usize) as u32,
                    &self.active_w,
                    self.zob_c,
                    &rs.cand,
                    range,
                );
            }
        }
    }

    fn record(&mut self, v: Option<Violation>) {
        self.violation_count += 1;
        if let Some(v) = v {
            if self.violations.len() < self.max_detailed {
                self.violations.push(v);
            }
        }
    }

    /// Checks the bytes `[a, b)`, over which the covering writes and active reads are constant.
    fn segment(&mut self, a: u64, b: u64) -> Result<(), Error> {
        if !self.in_interval && self.active_r.is_empty() {
            return Ok(());
        }
        let step = if self.active_r.is_empty() {
            CHUNK
        } else {
            self.read_chunk
        };
        let mut x = a;
        while x < b {
            let len = (b - x).min(step as u64) as usize;
            if self.in_interval {
                self.file_chunk(x, len)?;
            }
            for i in 0..self.active_r.len() {
                let r = self.active_r[i];
                self.read_chunk(r, x, len)?;
            }
            x += len as u64;
        }
        Ok(())
    }

    fn file_chunk(&mut self, x: u64, len: usize) -> Result<(), Error> {
        self.bytes_checked += len as u64;
        if self.failed {
            return Ok(());
        }
        let data = self.file.get(x, len)?;
        let tags = &self.tags;
        self.scratch.clear();
        self.scratch.extend(
            self.cand
                .iter()
                .copied()
                .filter(|&c| tags[c as usize].matches(x, data)),
        );
        if !self.scratch.is_empty() {
            std::mem::swap(&mut self.cand, &mut self.scratch);
            return Ok(());
        }
        self.failed = true;
        let v = if self.violations.len() < self.max_detailed {
            let diag = diagnose(tags, &self.active_w, &self.cand, false, self.start, x, data);
            Some(self.file_violation(diag, x, len))
        } else {
            None
        };
        self.record(v);
        Ok(())
    }

    fn file_violation(&self, diag: Diag, x: u64, len: usize) -> Violation {
        let id = |w: u32| self.ids[w as usize];
        match diag {
            Diag::Split {
                a,
                a_range,
                b,
                b_range,
            } => {
                let mut v = Violation::new(ViolationKind::TornWrite);
                v.ops = vec![id(a), id(b)];
                v.evidence = vec![
                    Evidence {
                        range: a_range,
                        data_of: Some(id(a)),
                    },
                    Evidence {
                        range: b_range,
                        data_of: Some(id(b)),
                    },
                ];
                v
            }
            Diag::Unexplained { range, found } => {
                let mut v = Violation::new(ViolationKind::UnexplainedData);
                v.ops = self.active_w.iter().map(|&w| id(w)).collect();
                v.ops.sort();
                v.note = self.explain(range.start, &found);
                v.evidence = vec![Evidence {
                    range,
                    data_of: None,
                }];
                v.found = found;
                v
            }
            Diag::Nothing => {
                let mut v = Violation::new(ViolationKind::UnexplainedData);
                v.evidence = vec![Evidence {
                    range: ByteRange {
                        start: x,
                        end: x + len as u64,
                    },
                    data_of: None,
                }];
                v
            }
        }
    }

    /// Where unexplained bytes could have come from: another write's tags for this very
    /// offset (a stray write outside its declared ranges), or a covering write's tags for a
    /// nearby offset (data placed at the wrong offset).
    fn explain(&self, at: u64, found: &[u8]) -> Option<String> {
        if found.iter().all(|&b| b == 0) {
            return None;
        }
        let k = found.len().min(8);
        if k >= 4 {
            for (w, t) in self.tags.iter().enumerate() {
                if t.matches(at, &found[..k]) && !self.active_w.contains(&(w as u32)) {
                    return Some(format!(
                        "they are {}'s data for this offset, which it did not declare: a stray write",
                        self.ids[w]
                    ));
                }
            }
        }
        if k < 8 {
            return None;
        }
        // A handful of covering writes is enough to name the culprit; all of a heavily
        // overlapped interval's writes × 128 Ki shifts would make diagnosis slower than the sweep.
        for &c in self.active_w.iter().take(8) {
            let t = &self.tags[c as usize];
            for d in (-SHIFT_SEARCH..=SHIFT_SEARCH).filter(|&d| d != 0) {
                let Some(src) = at.checked_add_signed(d) else {
                    continue;
                };
                if t.matches(src, &found[..k]) {
                    return Some(format!(
                        "they are {}'s data for offset {src}, written {} bytes {}",
                        self.ids[c as usize],
                        d.unsigned_abs(),
                        if d > 0 { "too low" } else { "too high" }
                    ));
                }
            }
        }
        None
    }

    fn read_chunk(&mut self, r: u32, x: u64, len: usize) -> Result<(), Error> {
        let nw = self.nw;
        let seq = self.seq;
        let in_interval = self.in_interval;
        let rs = &mut self.reads[r as usize];
        let data_pos = rs.pos;
        rs.pos += len as u64;
        self.read_bytes_checked += len as u64;
        let Some(window) = rs.window.as_mut() else {
            return Ok(());
        };
        let data = window.get(data_pos, len)?;
        let read_id = self.ids[nw + r as usize];
        if !in_interval {
            // Never written: must still be the initial zeros.
            let Some(bad) = data.iter().position(|&b| b != 0) else {
                return Ok(());
            };
            let end = data[bad..]
                .iter()
                .position(|&b| b == 0)
                .map_or(data.len(), |e| bad + e);
            let found = data[bad..end.min(bad + 16)].to_vec();
            let detail = self.violations.len() < self.max_detailed;
            let v = detail.then(|| {
                let mut v = Violation::new(ViolationKind::UnexplainedRead);
                v.ops = vec![read_id];
                v.evidence = vec![Evidence {
                    range: ByteRange {
                        start: x + bad as u64,
                        end: x + end as u64,
                    },
                    data_of: None,
                }];
                v.found = found;
                v.note = Some(format!(
                    "no write covers these bytes; read data offset {}",
                    data_pos + bad as u64
                ));
                v
            });
            self.record(v);
            return Ok(());
        }
        if rs.seq != seq {
            rs.seq = seq;
            rs.cand.clear();
            rs.cand.extend_from_slice(&self.active_w);
            rs.cand.push(INIT);
            rs.failed = false;
            rs.first = x;
            rs.piece = ByteRange { start: x, end: x };
            rs.prev_piece = rs.piece;
            self.touched.push(r);
        }
        if rs.piece.end != x {
            rs.prev_piece = rs.piece;
            rs.piece = ByteRange { start: x, end: x };
        }
        rs.piece.end = x + len as u64;
        if rs.failed {
            return Ok(());
        }
        let tags = &self.tags;
        let matches = |c: u32| {
            if c == INIT {
                data.iter().all(|&b| b == 0)
            } else {
                tags[c as usize].matches(x, data)
            }
        };
        self.scratch.clear();
        self.scratch
            .extend(rs.cand.iter().copied().filter(|&c| matches(c)));
        if !self.scratch.is_empty() {
            std::mem::swap(&mut rs.cand, &mut self.scratch);
            return Ok(());
        }
        rs.failed = true;
        let from = if rs.piece.start < x {
            rs.piece.start
        } else {
            rs.prev_piece.start
        };
        let detail = self.violations.len() < self.max_detailed;
        let v = if detail {
            let diag = diagnose(tags, &self.active_w, &rs.cand, true, from, x, data);
            let prev = rs.prev_piece;
            let id = |w: u32| {
                if w == INIT {
                    OpId::Initial
                } else {
                    self.ids[w as usize]
                }
            };
            Some(match diag {
                Diag::Split {
                    a,
                    mut a_range,
                    b,
                    b_range,
                } => {
                    if a_range.is_empty() {
                        a_range = prev;
                    }
                    // Name the write seen in part; the other side is what was seen instead.
                    let (w, w_range, o, o_range) = if a == INIT {
                        (b, b_range, a, a_range)
                    } else {
                        (a, a_range, b, b_range)
                    };
                    let mut v = Violation::new(ViolationKind::TornRead);
                    v.ops = vec![read_id, id(w)];
                    v.evidence = vec![
                        Evidence {
                            range: w_range,
                            data_of: Some(id(w)),
                        },
                        Evidence {
                            range: o_range,
                            data_of: Some(id(o)),
                        },
                    ];
                    v.note = Some(format!("read data offset {data_pos}"));
                    v
                }
                Diag::Unexplained { range, found } => {
                    let mut v = Violation::new(ViolationKind::UnexplainedRead);
                    v.ops = vec![read_id];
                    let mut cov: Vec<OpId> = self.active_w.iter().map(|&w| id(w)).collect();
                    cov.sort();
                    v.ops.extend(cov);
                    v.evidence = vec![Evidence {
                        range,
                        data_of: None,
                    }];
                    v.found = found;
                    v.note = Some(format!("read data offset {}", data_pos + (range.start - x)));
                    v
                }
                Diag::Nothing => {
                    let mut v = Violation::new(ViolationKind::UnexplainedRead);
                    v.ops = vec![read_id];
                    v.evidence = vec![Evidence {
                        range: ByteRange {
                            start: x,
                            end: x + len as u64,
                        },
                        data_of: None,
                    }];
                    v
                }
            })
        } else {
            None
        };
        self.record(v);
        Ok(())
    }
}

fn remove(active: &mut Vec<u32>, slot: &mut [u32], s: u32) {
    let i = slot[s as usize];
    if i == NONE {
        return;
    }
    active.swap_remove(i as usize);
    if let Some(&moved) = active.get(i as usize) {
        slot[moved as usize] = i;
    }
    slot[s as usize] = NONE;
}

enum Diag {
    /// Bytes before `b_range` are consistent with `a` since `a_range.start`; from
    /// `b_range.start` they are `b`'s and not `a`'s.
    Split {
        a: u32,
        a_range: ByteRange,
        b: u32,
        b_range: ByteRange,
    },
    /// Bytes matching no candidate at all.
    Unexplained {
        range: ByteRange,
        found: Vec<u8>,
    },
    Nothing,
}

/// Finds where, inside `data` (file bytes from `x`), the candidates consistent so far (`prev`,
/// consistent since `from`) all stop matching. `init`: the initial zeros are a candidate.
fn diagnose(
    tags: &[OpTag],
    covering: &[u32],
    prev: &[u32],
    init: bool,
    from: u64,
    x: u64,
    data: &[u8],
) -> Diag {
    let hit = |c: u32, o: u64, byte: u8| {
        if c == INIT {
            byte == 0
        } else {
            tags[c as usize].byte(o) == byte
        }
    };
    let all: Vec<u32> = covering
        .iter()
        .copied()
        .chain(init.then_some(INIT))
        .collect();
    let mut common: Vec<u32> = prev.to_vec();
    for (i, &byte) in data.iter().enumerate() {
        let o = x + i as u64;
        let m: Vec<u32> = all.iter().copied().filter(|&c| hit(c, o, byte)).collect();
        if m.is_empty() {
            // The run ends where bytes are explained again for 8 bytes in a row; shorter islands
            // (and a short tail) are chance matches (1/256 per byte) and stay inside the run.
            let explained = |j: usize| all.iter().any(|&c| hit(c, o + j as u64, data[i + j]));
            let rest = data.len() - i;
            let run = (1..rest)
                .find(|&j| j + 8 <= rest && (j..j + 8).all(explained))
                .unwrap_or(rest);
            return Diag::Unexplained {
                range: ByteRange {
                    start: o,
                    end: o + run as u64,
                },
                found: data[i..i + run.min(16)].to_vec(),
            };
        }
        let next: Vec<u32> = common.iter().copied().filter(|c| m.contains(c)).collect();
        if next.is_empty() {
            let a = common.first().copied().unwrap_or(NONE);
            let b = m[0];
            let run = data[i..]
                .iter()
                .enumerate()
                .position(|(j, &bj)| !hit(b, o + j as u64, bj))
                .unwrap_or(data.len() - i);
            return Diag::Split {
                a,
                a_range: ByteRange {
                    start: from.min(o),
                    end: o,
                },
                b,
                b_range: ByteRange {
                    start: o,
                    end: o + run as u64,
                },
            };
        }
        common = next;
    }
    Diag::Nothing
}
