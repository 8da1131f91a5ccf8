//! Reading the tables whole: the open requests and granted ranges (for tests and the
//! simulator's reports) and `check_invariants`, which verifies every invariant of the
//! module docs of `server` in O(everything).

use super::*;

impl LockServer {
    /// Every open request: (lock, owner, owed an answer?). For the simulator's leak reports.
    pub fn open(&self) -> Vec<(LockId, ClientId, bool)> {
        let mut v: Vec<_> = self
            .requests
            .iter()
            .map(|(&id, r)| (id, r.owner, r.pending.is_some()))
            .collect();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    /// Every granted range: (lock, owner, mode, range). For tests and the simulator.
    pub fn granted(&self) -> Vec<(LockId, ClientId, LockMode, ByteRange)> {
        let mut v: Vec<_> = self
            .requests
            .iter()
            .flat_map(|(&id, r)| {
                r.granted_ranges()
                    .into_iter()
                    .map(move |g| (id, r.owner, r.mode, g))
            })
            .collect();
        v.sort_unstable_by_key(|x| (x.3, x.0));
        v
    }

    /// Verifies every invariant in the module docs; O(everything). Returns the first
    /// violation found.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.dlm.check()?;
        let mut entries = 0usize;
        let mut waiting = 0usize;
        let mut per_client: HashMap<ClientId, usize> = HashMap::new();
        let mut waiting_per: HashMap<ClientId, usize> = HashMap::new();
        let mut entries_of: HashMap<ClientId, usize> = HashMap::new();
        let mut per_file: HashMap<FileId, usize> = HashMap::new();
        // Granted ranges keyed by file first: locks on different files never conflict.
        let mut all: Vec<(FileId, ByteRange, LockMode, LockId)> = Vec::new();
        let mut to_run: Vec<LockId> = Vec::new();
        for (&id, r) in &self.requests {
            if r.held.entries() > 0 {
                *entries_of.entry(r.owner).or_default() += r.held.entries();
            }
            if !matches!(r.pending, Some(Pending::Releasing { orphan: true, .. })) {
                *per_client.entry(r.owner).or_default() += 1;
            }
            if matches!(
                r.pending,
                Some(Pending::Granting(_) | Pending::Releasing { .. })
            ) {
                to_run.push(id);
            }
            *per_file.entry(r.file).or_default() += 1;
            let table = self
                .files
                .get(&r.file)
                .ok_or_else(|| format!("{id} has no file table"))?;
            let granted = r.granted_ranges();
            entries += check_request(id, r, table, &granted)?;
            all.extend(granted.into_iter().map(|g| (r.file, g, r.mode, id)));
            if matches!(r.pending, Some(Pending::Waiting(_))) {
                waiting += 1;
                *waiting_per.entry(r.owner).or_default() += 1;
                self.check_waiter(id, r, table)?;
            }
        }
        if !self.ignore_conflicts {
            check_no_conflicts(all)?;
        }
        self.check_files(&per_file)?;
        let queued: usize = self.files.values().map(|t| t.waiters.len()).sum();
        if entries != self.entries.total || waiting != self.waiting || queued != waiting {
            return Err(format!(
                "counters: entries {entries}/{} waiting {waiting}/{} queued {queued}",
                self.entries.total, self.waiting
            ));
        }
        if per_client != self.per_client {
            return Err("per-client request counts are wrong".into());
        }
        if entries_of != self.entries.of_client {
            return Err(format!(
                "per-client entry counts are wrong: {entries_of:?} in the tables, {:?} counted",
                self.entries.of_client
            ));
        }
        if waiting_per != self.waiting_of {
            return Err("per-client waiting counts are wrong".into());
        }
        let mut queued_to_run: Vec<LockId> = self.runnable.iter().copied().collect();
        queued_to_run.sort_unstable();
        to_run.sort_unstable();
        if queued_to_run != to_run {
            return Err(format!(
                "run queue {queued_to_run:?} but requests with work left {to_run:?}"
            ));
        }
        Ok(())
    }

    /// A waiting request is queued at its next byte, and something holds that byte.
    fn check_waiter(&self, id: LockId, r: &LockRequest, table: &FileTable) -> Result<(), String> {
        let Some(Pending::Waiting(b)) = &r.pending else {
            return Ok(());
        };
        let at = r
            .next
            .ok_or_else(|| format!("{id} blocked with nothing left"))?;
        if table.waiters.get(&(at, b.seq)) != Some(&id) {
            return Err(format!("{id} blocked at {at} but not queued there"));
        }
        let probe = ByteRange {
            start: at,
            end: at + 1,
        };
        let conflict = write_conflict(&table.writes, &self.requests, id, probe)
            .conflict
            .is_some()
            || (r.mode == LockMode::Write
                && !self.ignore_conflicts
                && table.reads.first_overlap(probe).is_some());
        if !conflict {
            return Err(format!("{id} waits at {at}, which nothing holds"));
        }
        Ok(())
    }

    /// Every file table: its read index, its request count, and write hulls that are
    /// disjoint, name each owner once and are listed by each owner.
    fn check_files(&self, per_file: &HashMap<FileId, usize>) -> Result<(), String> {
        for (f, t) in &self.files {
            t.reads.check()?;
            if per_file.get(f).copied().unwrap_or(0) != t.requests || t.requests == 0 {
                return Err(format!("{f}: request count {} is wrong", t.requests));
            }
            let mut prev_end = 0;
            for (s, h) in t.writes.iter() {
                if s < prev_end {
                    return Err(format!("{f}: hull at {s} overlaps the previous one"));
                }
                prev_end = h.end;
                let owners = h.owners();
                if owners
                    .iter()
                    .enumerate()
                    .any(|(i, o)| owners[..i].contains(o))
                {
                    return Err(format!("{f}: hull at {s} names an owner twice"));
                }
                for o in owners {
                    match self.requests.get(o).map(|r| &r.held) {
                        Some(Held::Write(starts)) if starts.contains(&s) => {}
                        _ => return Err(format!("{f}: hull at {s} is not listed by {o}")),
                    }
                }
            }
        }
        Ok(())
    }
}

/// One request's own invariants (`last`, `next`, its hulls or chain against its granted
/// bytes); returns how many index entries it holds.
fn check_request(
    id: LockId,
    r: &LockRequest,
    table: &FileTable,
    granted: &[ByteRange],
) -> Result<usize, String> {
    let want_last = granted.last().map_or(0, |g| g.end);
    if r.last != want_last {
        return Err(format!(
            "{id}: last {} but granted bytes end at {want_last}",
            r.last
        ));
    }
    let want_next = r.desc.first_at_or_after(r.cursor);
    if r.next != want_next {
        return Err(format!("{id}: next {:?}, expected {:?}", r.next, want_next));
    }
    match &r.held {
        Held::Write(starts) => {
            if r.mode != LockMode::Write {
                return Err(format!("{id}: read request holds write hulls"));
            }
            check_write_hulls(id, r, starts, table, granted)?;
            Ok(starts.len())
        }
        Held::Read(chain) => {
            if r.mode != LockMode::Read {
                return Err(format!("{id}: write request holds read ranges"));
            }
            let chain: Vec<ByteRange> = chain.iter().copied().collect();
            if chain.windows(2).any(|w| w[0].end > w[1].start) {
                return Err(format!("{id}: chain not sorted/disjoint {chain:?}"));
            }
            if RangeList::from_ranges(chain.clone()) != RangeList::from_ranges(granted.to_vec()) {
                return Err(format!(
                    "{id}: chain {chain:?} but granted bytes {granted:?}"
                ));
            }
            for &g in &chain {
                if table.reads.count_at(g.start) == 0 {
                    return Err(format!("{id}: read lock {g:?} missing from the index"));
                }
            }
            Ok(chain.len())
        }
    }
}

/// A write request's hulls are its own, start below its cursor and cover its granted bytes.
fn check_write_hulls(
    id: LockId,
    r: &LockRequest,
    starts: &BTreeSet<u64>,
    table: &FileTable,
    granted: &[ByteRange],
) -> Result<(), String> {
    let mut hulls = Vec::new();
    for &s in starts {
        let h = table
            .writes
            .get(s)
            .ok_or_else(|| format!("{id}: hull at {s} missing"))?;
        if !h.has(id) {
            return Err(format!("{id}: hull at {s} is not its own"));
        }
        if s >= r.cursor {
            return Err(format!(
                "{id}: hull at {s} starts above cursor {}",
                r.cursor
            ));
        }
        hulls.push(ByteRange {
            start: s,
            end: h.end,
        });
    }
    let hulls = RangeList::from_ranges(hulls);
    for g in granted {
        let i = hulls.first_ending_after(g.start);
        if !hulls
            .as_slice()
            .get(i)
            .is_some_and(|h| h.start <= g.start && g.end <= h.end)
        {
            return Err(format!("{id}: granted {g:?} lies outside its hulls"));
        }
    }
    Ok(())
}

/// No two requests hold overlapping bytes of one file where one of them writes.
fn check_no_conflicts(mut all: Vec<(FileId, ByteRange, LockMode, LockId)>) -> Result<(), String> {
    all.sort_unstable_by_key(|x| (x.0, x.1));
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if b.0 != a.0 || b.1.start >= a.1.end {
                break;
            }
            if a.3 != b.3 && (a.2 == LockMode::Write || b.2 == LockMode::Write) {
                return Err(format!("conflicting grants {a:?} and {b:?}"));
            }
        }
    }
    Ok(())
}
