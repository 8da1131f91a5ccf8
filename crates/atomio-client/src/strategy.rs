//! Strategies by name: a `Strategy` is a handle on one `Technique` (see `techniques` for
//! the table of names). Parsing is the registry: a new technique adds its name here and
//! nothing else in the client changes.
//!
//! **Invariant:** `name()` and `FromStr` are inverse; two strategies are equal exactly when
//! their names are.

use crate::technique::{PlacementKind, Technique};
pub use crate::techniques::BlockSize;
use crate::techniques::{
    BlockLocks, CachedStripeLocks, CentralLock, Ching, FcntlExtent, NoLocks, Versioning,
};
use atomio_lock::{Method, Protocol};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::Arc;

#[derive(Clone)]
pub struct Strategy(Arc<dyn Technique>);

impl Strategy {
    pub fn new(t: impl Technique + 'static) -> Self {
        Strategy(Arc::new(t))
    }
    pub fn none() -> Self {
        Self::new(NoLocks)
    }
    pub fn whole_file() -> Self {
        Self::new(CentralLock {
            whole_file: true,
            sieve: false,
        })
    }
    pub fn bounding_extent() -> Self {
        Self::new(CentralLock {
            whole_file: false,
            sieve: false,
        })
    }
    /// ROMIO's atomic mode on atomio's lock service: the extent locked, then data sieving.
    pub fn bounding_extent_sieve() -> Self {
        Self::new(CentralLock {
            whole_file: false,
            sieve: true,
        })
    }
    pub fn block(size: BlockSize) -> Self {
        Self::new(BlockLocks(size))
    }
    pub fn ching(method: Method, protocol: Protocol) -> Self {
        Self::new(Ching { method, protocol })
    }
    /// One `fcntl` lock over the extent, one `pwrite` per piece.
    pub fn posix_fcntl() -> Self {
        Self::new(FcntlExtent { sieve: false })
    }
    /// What ROMIO's atomic mode does: `fcntl` over the extent, then data sieving.
    pub fn romio() -> Self {
        Self::new(FcntlExtent { sieve: true })
    }

    /// Versioning: lock-free snapshots (Tran et al.).
    pub fn versioning() -> Self {
        Self::new(Versioning)
    }

    /// Interval I/O: locks only on shared intervals (Logan & Dickens).
    pub fn interval() -> Self {
        Self::new(crate::interval::IntervalLocks { auto: false })
    }

    /// Picks a technique per file from its interval analysis (`atomio_interval::choose`).
    pub fn auto() -> Self {
        Self::new(crate::interval::IntervalLocks { auto: true })
    }

    pub fn is_auto(&self) -> bool {
        self.name() == "auto"
    }

    pub fn is_versioning(&self) -> bool {
        self.name() == "versioning"
    }

    /// A cached-lock DLM (`dlm-basic`, `dlm-lustre`, `seqdlm[:…]`).
    pub fn dlm(spec: crate::dlm::DlmSpec) -> Self {
        Self::new(CachedStripeLocks(spec))
    }

    /// The DLM this strategy runs, if it is one.
    pub fn dlm_spec(&self) -> Option<crate::dlm::DlmSpec> {
        crate::dlm::DlmSpec::parse(&self.name()).and_then(Result::ok)
    }

    /// Every Ching combination.
    pub fn ching_all() -> Vec<Strategy> {
        Method::ALL
            .iter()
            .flat_map(|&m| Protocol::ALL.iter().map(move |&p| Strategy::ching(m, p)))
            .collect()
    }

    pub fn technique(&self) -> &dyn Technique {
        &*self.0
    }

    pub fn is_atomic(&self) -> bool {
        self.0.atomic()
    }

    pub fn supports(&self, p: PlacementKind) -> bool {
        self.0.placements().contains(&p)
    }

    /// True when it needs the atomio lock service.
    pub fn uses_lock_service(&self) -> bool {
        self.0.uses_lock_service()
    }

    pub fn name(&self) -> String {
        self.0.name()
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name())
    }
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Strategy({})", self.0.name())
    }
}

impl PartialEq for Strategy {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}
impl Eq for Strategy {}
impl Hash for Strategy {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.name().hash(h)
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => return Ok(Self::none()),
            "whole-file" => return Ok(Self::whole_file()),
            "bounding-extent" => return Ok(Self::bounding_extent()),
            "bounding-extent:sieve" => return Ok(Self::bounding_extent_sieve()),
            "posix-fcntl" => return Ok(Self::posix_fcntl()),
            "romio" => return Ok(Self::romio()),
            "block:stripe" => return Ok(Self::block(BlockSize::Stripe)),
            "versioning" => return Ok(Self::versioning()),
            "interval" => return Ok(Self::interval()),
            "auto" => return Ok(Self::auto()),
            _ => {}
        }
        if let Some(n) = s.strip_prefix("block:") {
            return match n.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Self::block(BlockSize::Bytes(n))),
                _ => Err(format!(
                    "'{s}': a block size is a positive number of bytes or 'stripe'"
                )),
            };
        }
        if let Some(spec) = crate::dlm::DlmSpec::parse(s) {
            return spec.map(Self::dlm);
        }
        if let Some(rest) = s.strip_prefix("ching:") {
            let (m, p) = rest
                .split_once(':')
                .ok_or_else(|| format!("'{s}': expected ching:<method>:<protocol>"))?;
            return Ok(Self::ching(m.parse()?, p.parse()?));
        }
        Err(format!(
            "unknown strategy '{s}' (expected none, whole-file, bounding-extent, bounding-extent:sieve, block:<bytes>|block:stripe, \
             ching:<posix|list|list/N|datatype>:<two-phase|one-try|alt-try>, posix-fcntl, romio, \
             dlm-basic, dlm-lustre, seqdlm[:<pr|nbw|bw|pw>][:no-er][:no-conv], versioning, interval or auto)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let mut all = vec![
            Strategy::none(),
            Strategy::whole_file(),
            Strategy::bounding_extent(),
            Strategy::bounding_extent_sieve(),
            Strategy::block(BlockSize::Bytes(4096)),
            Strategy::block(BlockSize::Stripe),
            Strategy::posix_fcntl(),
            Strategy::romio(),
            Strategy::ching(Method::List { max_ranges: 16 }, Protocol::AltTry),
            "seqdlm".parse().unwrap(),
            "seqdlm:pw:no-er".parse().unwrap(),
            "dlm-lustre".parse().unwrap(),
            Strategy::versioning(),
            Strategy::interval(),
            Strategy::auto(),
        ];
        all.extend(Strategy::ching_all());
        for s in all {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s.clone()), "{s}");
        }
        assert!("block:0".parse::<Strategy>().is_err());
        assert!("ching:datatype".parse::<Strategy>().is_err());
        assert!("fcntl".parse::<Strategy>().is_err());
    }

    #[test]
    fn placements() {
        assert!(Strategy::romio().supports(PlacementKind::Direct));
        assert!(!Strategy::romio().supports(PlacementKind::Servers));
        assert!(!Strategy::bounding_extent_sieve().supports(PlacementKind::Servers));
        assert!(!Strategy::posix_fcntl().supports(PlacementKind::Servers));
        for s in Strategy::ching_all() {
            assert!(s.supports(PlacementKind::Direct) && s.supports(PlacementKind::Servers));
        }
    }
}
