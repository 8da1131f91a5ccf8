//! Cached-lock DLMs on atomio's servers: SeqDLM (Chen et al., SC'22) and the traditional
//! `dlm-basic` / `dlm-lustre` it is measured against. `machine` is the client (sans-IO),
//! `agent` runs it on a thread of its own (revocations must be answered while the caller
//! computes or waits in MPI), and this module names the variants users pick as strategies.
//!
//! Names (`DlmSpec::parse` / `name`):
//! * `dlm-basic` — one lock resource per object, greedy range expansion, PR/PW only, no
//!   early grant or revocation: a write lock is granted after the holder flushed.
//! * `dlm-lustre` — the same with Lustre's expansion (at most 32 MiB past the request once a
//!   resource has more than 32 locks).
//! * `seqdlm` — early grant, early revocation, sequence numbers, conversion; modes by
//!   Fig. 10 (NBW inside one object, BW across objects, PR for reads).
//! * `seqdlm:<pr|nbw|bw|pw>` — every write in that mode (ablations; `seqdlm:nbw` across
//!   objects is the paper's Fig. 8 anomaly, not atomic), and the switches `:no-er` (no early
//!   revocation), `:no-cr` (the paper's early revocation only: without the extension that
//!   also revokes early on bytes another client is already giving back) and `:no-conv` (no
//!   upgrading/downgrading), e.g. `seqdlm:pw:no-er`.

pub mod agent;
pub mod machine;
pub mod pool;

use atomio_lock::seqdlm::{Config, Expand, Mode};
use atomio_proto::{DlmExpand, DlmPolicy};

/// How a call's lock mode is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeRule {
    /// Fig. 10: NBW inside one object, BW across objects; reads PR.
    Fig10,
    /// Every write in this mode; reads PR.
    Always(Mode),
}

/// One cached-lock DLM variant: what its resources do and how its clients pick modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DlmSpec {
    pub policy: DlmPolicy,
    pub modes: ModeRule,
}

pub fn policy_of(cfg: Config) -> DlmPolicy {
    DlmPolicy {
        expand: match cfg.expand {
            Expand::None => DlmExpand::None,
            Expand::Greedy => DlmExpand::Greedy,
            Expand::Lustre { crowded, max_past } => DlmExpand::Lustre {
                crowded: crowded as u32,
                max_past,
            },
        },
        early_grant: cfg.early_grant,
        early_revocation: cfg.early_revocation,
        conversion: cfg.conversion,
        contention_revocation: cfg.contention_revocation,
    }
}

impl DlmSpec {
    pub fn dlm_basic() -> Self {
        Self {
            policy: policy_of(Config::DLM_BASIC),
            modes: ModeRule::Always(Mode::Pw),
        }
    }

    pub fn dlm_lustre() -> Self {
        Self {
            policy: policy_of(Config::DLM_LUSTRE),
            modes: ModeRule::Always(Mode::Pw),
        }
    }

    pub fn seqdlm() -> Self {
        Self {
            policy: policy_of(Config::SEQDLM),
            modes: ModeRule::Fig10,
        }
    }

    /// Whether writes spanning several objects stay atomic: every mode but NBW forced
    /// across objects.
    pub fn atomic_across_objects(&self) -> bool {
        self.modes != ModeRule::Always(Mode::Nbw)
    }

    /// Parses a strategy name (see the module); `None` if it is not a DLM's.
    pub fn parse(s: &str) -> Option<Result<Self, String>> {
        match s {
            "dlm-basic" => return Some(Ok(Self::dlm_basic())),
            "dlm-lustre" => return Some(Ok(Self::dlm_lustre())),
            _ => {}
        }
        let rest = s.strip_prefix("seqdlm")?;
        let mut spec = Self::seqdlm();
        let mut parts = rest.split(':');
        if parts.next() != Some("") {
            return None; // "seqdlmx"
        }
        let mut seen_mode = false;
        for p in parts {
            match p {
                // No early revocation at all: the paper's and the extension's.
                "no-er" if spec.policy.early_revocation => {
                    spec.policy.early_revocation = false;
                    spec.policy.contention_revocation = false;
                }
                // Only the paper's early revocation (queued conflicts).
                "no-cr" if spec.policy.contention_revocation => {
                    spec.policy.contention_revocation = false
                }
                "no-conv" if spec.policy.conversion => spec.policy.conversion = false,
                m if !seen_mode && m.parse::<Mode>().is_ok() => {
                    seen_mode = true;
                    spec.modes = ModeRule::Always(m.parse().expect("checked"));
                }
                _ => {
                    return Some(Err(format!(
                        "'{s}': expected seqdlm[:<pr|nbw|bw|pw>][:no-er|:no-cr][:no-conv]"
                    )))
                }
            }
        }
        Some(Ok(spec))
    }

    /// The name `parse` takes back.
    pub fn name(&self) -> String {
        if *self == Self::dlm_basic() {
            return "dlm-basic".into();
        }
        if *self == Self::dlm_lustre() {
            return "dlm-lustre".into();
        }
        let mut n = String::from("seqdlm");
        if let ModeRule::Always(m) = self.modes {
            n.push(':');
            n.push_str(m.name());
        }
        if !self.policy.early_revocation {
            n.push_str(":no-er");
        } else if !self.policy.contention_revocation {
            n.push_str(":no-cr");
        }
        if !self.policy.conversion {
            n.push_str(":no-conv");
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in [
            "dlm-basic",
            "dlm-lustre",
            "seqdlm",
            "seqdlm:nbw",
            "seqdlm:pw:no-er",
            "seqdlm:bw:no-conv",
            "seqdlm:no-er:no-conv",
            "seqdlm:nbw:no-cr",
            "seqdlm:no-cr:no-conv",
        ] {
            let s = DlmSpec::parse(n).unwrap().unwrap();
            assert_eq!(s.name(), n);
        }
        assert!(DlmSpec::parse("seqdlm:xx").unwrap().is_err());
        assert!(DlmSpec::parse("seqdlm:nbw:pw").unwrap().is_err());
        assert!(DlmSpec::parse("seqdlm:no-er:no-cr").unwrap().is_err());
        assert!(DlmSpec::parse("seqdlmx").is_none());
        assert!(DlmSpec::parse("ching:datatype:one-try").is_none());
        assert!(!DlmSpec::parse("seqdlm:nbw")
            .unwrap()
            .unwrap()
            .atomic_across_objects());
    }
}
