//! `File`'s interval I/O (Logan et al.): the declared interval set and `auto`'s choice
//! from it, the interval file format's cache of private bytes, and the call that moves a
//! rank's private runs with no lock and the rest under locks on their shared bytes.
//!
//! **Invariants:** a run is written with no lock only if every byte of it is private to
//! this rank in the declared set; undeclared bytes are locked (or refused by the interval
//! format); a read sees this rank's cached private writes (flushed first).

use super::*;

impl File {
    /// Makes this direct file an **interval file** laid out by its interval set (after
    /// `set_intervals`; collective: every rank calls it before any I/O): rank 0 writes
    /// the metadata, private bytes are cached and written at sync/flush as one stretch per
    /// rank, shared ones are written in place under their locks. Read it back flat with
    /// `atomio interval translate FILE OUT --to flat`.
    pub fn set_interval_format(&mut self) -> Result<(), WireError> {
        let (Placement::Direct(d), Some((set, rank))) = (&self.placement, &self.intervals) else {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                "the interval format needs a direct file with an interval set (set_intervals)",
            ));
        };
        let layout = IntervalLayout::new(set).map_err(|e| {
            WireError::new(ErrorCode::InvalidArgument, format!("interval layout: {e}"))
        })?;
        self.ifile = Some(IntervalOutput::start(
            d.raw_file(),
            Arc::new(layout),
            *rank,
        )?);
        Ok(())
    }

    /// Writes what the interval cache holds (interval files; nothing otherwise).
    pub(super) fn flush_interval_cache(&mut self) -> Result<(), WireError> {
        match (&mut self.ifile, &self.placement) {
            (Some(o), Placement::Direct(d)) => o.flush(d.raw_file()),
            _ => Ok(()),
        }
    }

    /// Declares the file's interval set (the analysis of every rank's views or calls;
    /// every rank must install the same set) and this client's rank in it. Interval I/O
    /// then moves this rank's private bytes with no lock; with `auto` the strategy is
    /// chosen from the set now (and again at every later call of this), and the choice is
    /// returned.
    pub fn set_intervals(&mut self, set: Arc<IntervalSet>, rank: u32) -> Option<Choice> {
        self.intervals = Some((set.clone(), rank));
        if !self.auto {
            return None;
        }
        let user_file = matches!(self.placement, Placement::Direct(_));
        let choice = atomio_interval::choose(&set, user_file);
        let chosen = choice
            .strategy
            .parse::<Strategy>()
            .ok()
            .filter(|s| s.supports(self.placement.kind()))
            .unwrap_or_else(Strategy::interval);
        tracing::info!(strategy = %chosen, reason = %choice.reason, "auto");
        self.atomic = chosen;
        self.choice = Some(choice.clone());
        Some(choice)
    }

    /// What `auto` chose for this file, and why (`None` before an interval set, or when
    /// the strategy is not `auto`).
    pub fn explain(&self) -> Option<&Choice> {
        self.choice.as_ref()
    }

    /// The file's interval set, if declared.
    pub fn intervals(&self) -> Option<&IntervalSet> {
        self.intervals.as_ref().map(|(s, _)| &**s)
    }

    /// Interval I/O's call: the runs wholly private to this rank with no lock, then the
    /// rest, whole, under locks on their shared and undeclared bytes (see `interval`).
    pub(super) async fn interval_call(
        &mut self,
        mut c: Option<&mut ClusterClient>,
        access: &Access,
        op: Op<'_>,
        set: &IntervalSet,
        rank: u32,
    ) -> Result<(), WireError> {
        // A call whose runs are all private to this rank needs no lock and no split: found
        // a group of runs at a time (ROMIO noncontig's 2,500 ints are one group), where the
        // split walks every run (~90 us a call there).
        if self.ifile.is_none() && private_by_groups(set, rank, access) {
            self.stats.lock_free_calls += 1;
            return self.locked_io(c, access, op, None).await;
        }
        let split = set.split(rank, access.ranges());
        refuse_foreign(&split)?;
        if split.undeclared_bytes > 0 {
            if self.ifile.is_some() {
                let first = split
                    .pieces
                    .iter()
                    .find(|(_, c)| *c == PieceClass::Undeclared);
                return Err(undeclared(first.expect("undeclared bytes > 0").0));
            }
            self.stats.interval_fallbacks += 1;
        }
        if self.ifile.is_some() {
            match &op {
                // Private bytes into the cache; the rest below, in place under locks.
                Op::Write(data) => {
                    let (Some(o), Placement::Direct(d)) = (self.ifile.as_mut(), &self.placement)
                    else {
                        unreachable!("the interval format is set on direct files only")
                    };
                    let parts = Parts::by_piece(&split);
                    for (r, at) in &parts.free {
                        let bytes = &data[*at..*at + r.len() as usize];
                        o.cache_write(d.raw_file(), *r, bytes)?;
                    }
                    let Some(a) = Parts::access(&parts.locked)? else {
                        self.stats.lock_free_calls += 1;
                        return Ok(());
                    };
                    let d = Parts::gather(&parts.locked, data);
                    let servers = c.as_ref().map_or(0, |c| c.servers());
                    let locks = self.plan_locks(servers, LockMode::Write, &a)?;
                    return self.locked_io(c, &a, Op::Write(&d), locks).await;
                }
                // A read sees this rank's cached writes: flush them first.
                Op::Read { .. } => self.flush_interval_cache()?,
            }
        }
        let servers = c.as_ref().map_or(0, |c| c.servers());
        if split.locked_bytes() == 0 {
            self.stats.lock_free_calls += 1;
            return self.locked_io(c, access, op, None).await;
        }
        let parts = Parts::by_run(access.ranges(), &split);
        let Some(free) = Parts::access(&parts.free)? else {
            // Every run needs a lock: the call moves whole, locked on its shared bytes only.
            let locks = self.plan_locks(servers, op.mode(), access)?;
            return self.locked_io(c, access, op, locks).await;
        };
        let locked = Parts::access(&parts.locked)?.expect("locked bytes > 0");
        match op {
            Op::Write(data) => {
                // On the user's file the free runs go straight from the caller's buffer;
                // on servers they are gathered into one lock-free call.
                if let Placement::Direct(d) = &self.placement {
                    d.write_ranges(&parts.free, data)?;
                } else {
                    let d = Parts::gather(&parts.free, data);
                    self.locked_io(c.as_deref_mut(), &free, Op::Write(&d), None)
                        .await?;
                }
                let d = Parts::gather(&parts.locked, data);
                let locks = self.plan_locks(servers, LockMode::Write, &locked)?;
                self.locked_io(c, &locked, Op::Write(&d), locks).await
            }
            Op::Read { out, holes_ok } => {
                let mut buf = vec![0u8; free.size() as usize];
                let op = Op::Read {
                    out: &mut buf,
                    holes_ok,
                };
                self.locked_io(c.as_deref_mut(), &free, op, None).await?;
                Parts::scatter(&parts.free, &buf, out);
                let mut buf = vec![0u8; locked.size() as usize];
                let locks = self.plan_locks(servers, LockMode::Read, &locked)?;
                let op = Op::Read {
                    out: &mut buf,
                    holes_ok,
                };
                self.locked_io(c, &locked, op, locks).await?;
                Parts::scatter(&parts.locked, &buf, out);
                Ok(())
            }
        }
    }
}

/// Whether every run of `access` is private to `rank` in `set`, decided group by group
/// (`IntervalSet::group_private_to`) and given up (`false`: split run by run) after a
/// bounded number of groups or entries.
pub(super) fn private_by_groups(set: &IntervalSet, rank: u32, access: &Access) -> bool {
    const MAX_GROUPS: usize = 64;
    let mut runs = access.ranges();
    for _ in 0..MAX_GROUPS {
        match runs.next_group() {
            None => return true,
            Some(g) if set.group_private_to(rank, g, 16) => {}
            Some(_) => return false,
        }
    }
    false
}
