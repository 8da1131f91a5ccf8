//! The outcome of a verification: a verdict, what was checked, and the evidence.
//!
//! **Invariants and why:**
//! * `Verdict::Atomic` is only given with a witness: `order` is a serial order of every
//!   operation that reproduces each checked byte of the file and of every read.
//! * `Verdict::Violated` is only given with a proof that no serial order exists: bytes no
//!   covering write explains, one interval holding two writes' data, or a cycle of ordering
//!   facts. Ambiguous evidence (short intervals whose bytes match several writes by chance)
//!   never produces a violation on its own.
//! * `Verdict::Inconclusive` is the honest third answer for read sets whose check is
//!   NP-complete in general (view serializability): no violation was proven and no witness
//!   order was found. Writes alone are always decided exactly.
//! * Violations are listed in the order found: local ones (bad bytes) in file offset order
//!   during the sweep, then ordering cycles. Only the first `max_detailed` carry details;
//!   `violation_count` counts all of them.

use crate::op::{OpId, ReadId};
use atomio_layout::ByteRange;
use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// A serial order of whole operations explains every checked byte.
    Atomic,
    /// No serial order can explain the bytes.
    Violated,
    /// Neither proven: see `Report::inconclusive`.
    Inconclusive,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ViolationKind {
    /// Two writes' data both appear where they overlap.
    TornWrite,
    /// Three or more writes are ordered in a cycle by the file's contents.
    OrderCycle,
    /// Written bytes match none of the writes covering them: lost, corrupt or misplaced data.
    UnexplainedData,
    /// A read saw part of a write: its data in some bytes, older data in others.
    TornRead,
    /// A read returned bytes that match none of the writes covering them nor the initial zeros.
    UnexplainedRead,
    /// A read's view fits nowhere in the writes' serial order (a longer cycle).
    ReadNotSerializable,
}

impl ViolationKind {
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::TornWrite => "torn write",
            ViolationKind::OrderCycle => "order cycle",
            ViolationKind::UnexplainedData => "unexplained data",
            ViolationKind::TornRead => "torn read",
            ViolationKind::UnexplainedRead => "unexplained read data",
            ViolationKind::ReadNotSerializable => "read not serializable",
        }
    }
}

/// "These bytes hold this operation's data" (for reads: the read saw it there); `None` when
/// the bytes are nobody's. An unexplained range ends where the bytes are explained again for
/// 8 bytes in a row, so single bytes inside it may match a write by chance (1/256 each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub range: ByteRange,
    pub data_of: Option<OpId>,
}

/// Why one operation must come before another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EdgeReason {
    /// The file shows `after`'s data over `before`'s in `range`.
    Overwrote,
    /// Read `after` saw write `before`'s data in `range`.
    ReadSaw,
    /// Read `before` saw `saw`'s data in `range`, where write `after` also wrote: `after`
    /// came later (when `saw` is a write, because `after` is ordered after `saw`).
    ReadMissed { saw: OpId },
    /// Write `before` also wrote `range`, where read `read` saw `after`'s data, and `before`
    /// is ordered before the read: it must have come before `after` too.
    Inferred { read: ReadId },
}

/// An ordering fact with its evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    pub before: OpId,
    pub after: OpId,
    pub range: ByteRange,
    pub reason: EdgeReason,
    /// When the evidence was ambiguous (a short interval whose bytes match several writes),
    /// the other writes it could also have been; `after` is one possibility.
    pub alternatives: Vec<OpId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The operations involved, in the order the explanation names them (for reads, the
    /// read first).
    pub ops: Vec<OpId>,
    /// Whose data was found where.
    pub evidence: Vec<Evidence>,
    /// For cycle kinds: the ordering facts, each `before` of the next step's `before`.
    pub cycle: Vec<Edge>,
    /// For unexplained bytes: the first bytes found (at most 16).
    pub found: Vec<u8>,
    /// A diagnosis beyond the proof (e.g. "looks like (w2,op1)'s data shifted by 4096").
    pub note: Option<String>,
}

impl Violation {
    pub(crate) fn new(kind: ViolationKind) -> Self {
        Self {
            kind,
            ops: Vec::new(),
            evidence: Vec::new(),
            cycle: Vec::new(),
            found: Vec::new(),
            note: None,
        }
    }

    /// The first file range the violation points at.
    pub fn range(&self) -> Option<ByteRange> {
        self.evidence
            .first()
            .map(|e| e.range)
            .or_else(|| self.cycle.first().map(|e| e.range))
    }
}

/// What a verification found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub verdict: Verdict,
    pub writes: usize,
    pub reads: usize,
    /// Elementary intervals: maximal byte ranges covered by a constant, non-empty set of
    /// writes.
    pub intervals: u64,
    /// Intervals whose bytes matched more than one covering write (resolved, if at all, by
    /// the ordering check).
    pub ambiguous_intervals: u64,
    /// File bytes compared against tags (bytes covered by no write are not checked).
    pub bytes_checked: u64,
    /// Bytes of read data compared.
    pub read_bytes_checked: u64,
    /// Distinct ordering facts taken directly from the evidence.
    pub edges: u64,
    /// Ordering facts inferred while placing reads.
    pub inferred_edges: u64,
    /// The first violations found (see the module docs for the order).
    pub violations: Vec<Violation>,
    /// All violations, including those beyond `violations`.
    pub violation_count: u64,
    /// Why the verdict is `Inconclusive`.
    pub inconclusive: Option<String>,
    /// With `Atomic`: a serial order of every write and read that explains the bytes.
    pub order: Vec<OpId>,
}

impl Report {
    /// True when the run was proven atomic.
    pub fn ok(&self) -> bool {
        self.verdict == Verdict::Atomic
    }

    /// The first violation found.
    pub fn violation(&self) -> Option<&Violation> {
        self.violations.first()
    }
}

fn list(ops: &[OpId]) -> String {
    ops.iter()
        .map(|o| match o {
            OpId::Write(w) => w.to_string(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_id(o: &OpId) -> String {
    match o {
        OpId::Write(w) => w.to_string(),
        OpId::Read(r) => r.to_string(),
        OpId::Initial => "the initial zeros".into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads as the evidence for "`before` comes before `after`".
impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (b, a, r) = (short_id(&self.before), short_id(&self.after), self.range);
        match self.reason {
            EdgeReason::Overwrote => write!(f, "{a} over {b} at {r}")?,
            EdgeReason::ReadSaw => write!(f, "{a} saw {b} at {r}")?,
            EdgeReason::ReadMissed { saw: OpId::Initial } => {
                write!(f, "{b} saw the initial zeros at {r}, not {a}")?
            }
            EdgeReason::ReadMissed { saw } => {
                write!(f, "{b} saw older {} at {r}, not {a}", short_id(&saw))?
            }
            EdgeReason::Inferred { read } => write!(
                f,
                "{read} saw {a} at {r}, where {b} also wrote before the read (so {b} before {a})"
            )?,
        }
        if !self.alternatives.is_empty() {
            write!(
                f,
                " (ambiguous: those bytes also match {})",
                list(&self.alternatives)
            )?;
        }
        Ok(())
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{} {many}", thousands(n as u64))
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = |i: usize| self.ops.get(i).map_or_else(String::new, short_id);
        let ev = |i: usize| {
            self.evidence
                .get(i)
                .map_or_else(String::new, |e| match &e.data_of {
                    Some(o) => format!("{} from {}", e.range, short_id(o)),
                    None => format!("{} from no one", e.range),
                })
        };
        match self.kind {
            ViolationKind::TornWrite => write!(
                f,
                "writes {} and {} both appear in their overlap: {}, {}",
                op(0),
                op(1),
                ev(0),
                ev(1)
            )?,
            ViolationKind::TornRead => write!(
                f,
                "read {} saw part of write {}: {}, but {}, where {} also wrote",
                op(0),
                op(1),
                ev(0),
                ev(1),
                op(1)
            )?,
            ViolationKind::UnexplainedData | ViolationKind::UnexplainedRead => {
                let range = self.evidence.first().map(|e| e.range);
                let range = range.map_or_else(String::new, |r| r.to_string());
                if self.kind == ViolationKind::UnexplainedData {
                    match self.ops.len() {
                        1 => write!(
                            f,
                            "bytes {range} do not match the one write covering them, {}",
                            list(&self.ops)
                        )?,
                        n => write!(
                            f,
                            "bytes {range} match none of the {n} writes covering them ({})",
                            list(&self.ops)
                        )?,
                    }
                } else {
                    write!(
                        f,
                        "read {} saw bytes at {range} that match none of: the initial zeros{}{}",
                        op(0),
                        if self.ops.len() > 1 { ", " } else { "" },
                        list(self.ops.get(1..).unwrap_or(&[]))
                    )?;
                }
                write!(f, "; found {}", hex(&self.found))?;
                if self.found.iter().all(|&b| b == 0) {
                    f.write_str(" (zeros: the data never landed)")?;
                }
            }
            ViolationKind::OrderCycle | ViolationKind::ReadNotSerializable => {
                if self.kind == ViolationKind::OrderCycle {
                    f.write_str("no serial order of whole writes explains the file: ")?;
                } else {
                    write!(f, "read {} fits nowhere in the serial order: ", op(0))?;
                }
                for e in &self.cycle {
                    write!(f, "{} → ", short_id(&e.before))?;
                }
                if let Some(e) = self.cycle.first() {
                    write!(f, "{}", short_id(&e.before))?;
                }
                f.write_str(", because ")?;
                for (i, e) in self.cycle.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
            }
        }
        if let Some(n) = &self.note {
            write!(f, " [{n}]")?;
        }
        Ok(())
    }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.verdict {
            Verdict::Atomic => f.write_str("ATOMIC")?,
            Verdict::Violated => f.write_str("NOT ATOMIC")?,
            Verdict::Inconclusive => f.write_str("INCONCLUSIVE")?,
        }
        match (self.violation(), &self.inconclusive) {
            (Some(v), _) => writeln!(f, ": {}: {v}", v.kind.name())?,
            (None, Some(why)) => writeln!(f, ": {why}")?,
            (None, None) => writeln!(f)?,
        }
        for v in self.violations.iter().skip(1) {
            writeln!(f, "  also {}: {v}", v.kind.name())?;
        }
        let hidden = self
            .violation_count
            .saturating_sub(self.violations.len() as u64);
        if hidden > 0 {
            writeln!(f, "  … and {} more violations", thousands(hidden))?;
        }
        writeln!(
            f,
            "  {}, {}; {} ({} ambiguous); {} file bytes and {} read bytes checked; {} ordering edges ({} inferred)",
            plural(self.writes, "write", "writes"),
            plural(self.reads, "read", "reads"),
            plural(self.intervals as usize, "elementary interval", "elementary intervals"),
            thousands(self.ambiguous_intervals),
            thousands(self.bytes_checked),
            thousands(self.read_bytes_checked),
            thousands(self.edges + self.inferred_edges),
            thousands(self.inferred_edges),
        )?;
        if self.verdict == Verdict::Atomic && !self.order.is_empty() {
            const SHOWN: usize = 8;
            let shown: Vec<String> = self.order.iter().take(SHOWN).map(short_id).collect();
            write!(f, "  serial order: {}", shown.join(" → "))?;
            if self.order.len() > SHOWN {
                write!(
                    f,
                    " → … ({} operations)",
                    thousands(self.order.len() as u64)
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
