//! SeqDLM's lock modes (Chen et al., SC'22, §III-C/D): the compatibility matrix (Table II),
//! the severity order and conversions (Fig. 9), and the mode selection rules (Fig. 10).
//!
//! * **PR** (protective read): the traditional read lock.
//! * **NBW** (non-blocking write): write only, no reads; an overlapping NBW/BW request may be
//!   granted as soon as it is CANCELING (*early grant*): writers do not read each other's
//!   data, and sequence numbers order their flushes.
//! * **BW** (blocking write): NBW that keeps the write lock's blocking feature — for a write
//!   holding several resources at once, which early grant could interleave (Fig. 8).
//! * **PW** (protective write): the traditional write lock (read and write).
//!
//! **Invariant:** `compatible` is exactly Table II; a traditional DLM (`early_grant` off)
//! sees only PR and PW and the classic read/write matrix.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mode {
    Pr,
    Nbw,
    Bw,
    Pw,
}

/// A granted lock's state: GRANTED (cacheable, reusable) or CANCELING (its holder was
/// asked to give it back, or it was granted that way by early revocation: no new I/O under
/// it; it is released once its data are flushed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    Granted,
    Canceling,
}

/// What an I/O operation needs (the inputs of Fig. 10's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    /// A write; `implicit_read`: it reads what it updates (append, a partial page);
    /// `several_resources`: it holds locks of several resources at once (a write across
    /// stripes that must be atomic).
    Write {
        implicit_read: bool,
        several_resources: bool,
    },
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Pr, Mode::Nbw, Mode::Bw, Mode::Pw];

    pub fn is_write(self) -> bool {
        self != Mode::Pr
    }

    /// Whether the holder may read under it.
    pub fn reads(self) -> bool {
        matches!(self, Mode::Pr | Mode::Pw)
    }

    /// Table II: may a request in mode `new` be granted beside a lock granted in `held`
    /// that is in `state`? With `early_grant` off (a traditional DLM) a CANCELING lock
    /// still blocks until it is released.
    pub fn compatible(new: Mode, held: Mode, state: State, early_grant: bool) -> bool {
        match (new, held) {
            (Mode::Pr, Mode::Pr) => true,
            (Mode::Nbw | Mode::Bw, Mode::Nbw) => early_grant && state == State::Canceling,
            _ => false,
        }
    }

    /// Fig. 10: the least restrictive mode that serves `need`.
    pub fn select(need: Need) -> Mode {
        match need {
            Need::Read => Mode::Pr,
            Need::Write {
                implicit_read: true,
                ..
            } => Mode::Pw,
            Need::Write {
                several_resources: true,
                ..
            } => Mode::Bw,
            Need::Write { .. } => Mode::Nbw,
        }
    }

    /// Fig. 9, upgrading: the least restrictive mode that serves both `self` and `other`
    /// (what a request is granted as when it conflicts with its own client's lock).
    pub fn upgrade(self, other: Mode) -> Mode {
        match (self, other) {
            (a, b) if a == b => a,
            (Mode::Pr, _) | (_, Mode::Pr) | (Mode::Pw, _) | (_, Mode::Pw) => Mode::Pw,
            // NBW with BW
            _ => Mode::Bw,
        }
    }

    /// Fig. 9, downgrading a CANCELING lock: a PW whose holder only reads under it (its
    /// dirty data flushed) becomes PR; any other write lock becomes NBW, so conflicting
    /// writers can be granted early.
    pub fn downgraded(self, only_readers: bool) -> Mode {
        match self {
            Mode::Pw if only_readers => Mode::Pr,
            Mode::Pr => Mode::Pr,
            _ => Mode::Nbw,
        }
    }

    /// Whether `to` is a downgrade Fig. 9 allows from `self`.
    pub fn may_downgrade_to(self, to: Mode) -> bool {
        matches!(
            (self, to),
            (Mode::Pw, Mode::Pr) | (Mode::Pw | Mode::Bw, Mode::Nbw)
        ) || self == to
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Pr => "pr",
            Mode::Nbw => "nbw",
            Mode::Bw => "bw",
            Mode::Pw => "pw",
        }
    }
}

impl From<atomio_proto::DlmMode> for Mode {
    fn from(m: atomio_proto::DlmMode) -> Self {
        match m {
            atomio_proto::DlmMode::Pr => Mode::Pr,
            atomio_proto::DlmMode::Nbw => Mode::Nbw,
            atomio_proto::DlmMode::Bw => Mode::Bw,
            atomio_proto::DlmMode::Pw => Mode::Pw,
        }
    }
}

impl From<Mode> for atomio_proto::DlmMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Pr => atomio_proto::DlmMode::Pr,
            Mode::Nbw => atomio_proto::DlmMode::Nbw,
            Mode::Bw => atomio_proto::DlmMode::Bw,
            Mode::Pw => atomio_proto::DlmMode::Pw,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown SeqDLM mode '{s}' (pr, nbw, bw, pw)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::*;

    /// Table II, row by row (Y, N, and N/Y = incompatible while GRANTED, compatible once
    /// CANCELING).
    #[test]
    fn compatibility_is_table_ii() {
        let table = [
            (Pr, ["Y", "N", "N", "N"]),
            (Nbw, ["N", "N/Y", "N", "N"]),
            (Bw, ["N", "N/Y", "N", "N"]),
            (Pw, ["N", "N", "N", "N"]),
        ];
        for (new, row) in table {
            for (held, cell) in Mode::ALL.into_iter().zip(row) {
                let g = Mode::compatible(new, held, State::Granted, true);
                let c = Mode::compatible(new, held, State::Canceling, true);
                let want = match cell {
                    "Y" => (true, true),
                    "N" => (false, false),
                    _ => (false, true),
                };
                assert_eq!((g, c), want, "{new} vs granted {held}");
                // Without early grant, CANCELING changes nothing.
                assert_eq!(Mode::compatible(new, held, State::Canceling, false), g);
            }
        }
    }

    #[test]
    fn selection_follows_fig_10() {
        assert_eq!(Mode::select(Need::Read), Pr);
        let w = |implicit_read, several_resources| Need::Write {
            implicit_read,
            several_resources,
        };
        assert_eq!(Mode::select(w(true, true)), Pw);
        assert_eq!(Mode::select(w(true, false)), Pw);
        assert_eq!(Mode::select(w(false, true)), Bw);
        assert_eq!(Mode::select(w(false, false)), Nbw);
    }

    /// An upgrade serves both modes (it reads if either reads, blocks if either blocks) and
    /// is the least restrictive such mode.
    #[test]
    fn upgrades_serve_both_and_no_more() {
        let severity = |m: Mode| match m {
            Nbw => 0,
            Pr | Bw => 1,
            Pw => 2,
        };
        for a in Mode::ALL {
            for b in Mode::ALL {
                let u = a.upgrade(b);
                assert_eq!(u, b.upgrade(a));
                assert!(!a.reads() || u.reads(), "{a}+{b}");
                assert!(!b.reads() || u.reads(), "{a}+{b}");
                assert!(!a.is_write() || u.is_write(), "{a}+{b}");
                assert!(!b.is_write() || u.is_write(), "{a}+{b}");
                assert!(severity(u) >= severity(a).max(severity(b)));
            }
        }
        assert_eq!(Pr.upgrade(Nbw), Pw);
        assert_eq!(Nbw.upgrade(Bw), Bw);
    }

    #[test]
    fn downgrades_follow_fig_9() {
        assert_eq!(Pw.downgraded(true), Pr);
        assert_eq!(Pw.downgraded(false), Nbw);
        assert_eq!(Bw.downgraded(false), Nbw);
        assert_eq!(Nbw.downgraded(false), Nbw);
        assert!(Bw.may_downgrade_to(Nbw) && !Nbw.may_downgrade_to(Bw));
        assert!(!Pr.may_downgrade_to(Nbw));
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
    }
}
