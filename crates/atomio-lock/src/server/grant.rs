//! The grant loop and the table edits it makes: extending a request's granted prefix range
//! by range (the fast path below the horizon, the precise check past it), joining or
//! carving write hulls, and cutting a request's holdings back to an offset.
//!
//! Invariant: every function here leaves a request's granted bytes a prefix of its own bytes
//! in offset order and keeps the per-file entry counts equal to the tables.

use super::*;

/// What the write index says about a range `w` that request `me` wants.
#[derive(Clone, Copy, Default)]
pub(super) struct WriteCheck {
    /// The first byte of `w` another request's granted write bytes occupy.
    pub(super) conflict: Option<u64>,
    /// The hull covering `w.start`, if any: (start, hull).
    pub(super) covering: Option<(u64, Hull)>,
    /// The first hull start in `(w.start, w.end)`: a piece granted outside every hull ends
    /// there, so hulls stay disjoint.
    pub(super) next_start: Option<u64>,
}

/// `owner`'s first granted byte in `[lo, hi)`: its description's, below its cursor.
pub(super) fn granted_in(owner: &LockRequest, lo: u64, hi: u64) -> Option<u64> {
    let hi = hi.min(owner.cursor);
    if lo >= hi {
        return None;
    }
    owner.desc.first_at_or_after(lo).filter(|&b| b < hi)
}

/// Checks `w` against the write hulls it meets (see `WriteCheck`). Hulls are disjoint and
/// met in order, so the first hull with a conflict holds the first conflicting byte.
pub(super) fn write_conflict(
    writes: &WriteHulls,
    others: &HashMap<LockId, LockRequest>,
    me: LockId,
    w: ByteRange,
) -> WriteCheck {
    let mut out = WriteCheck::default();
    for (start, hull) in writes.overlapping(w) {
        if start <= w.start {
            out.covering = Some((start, hull));
        } else if out.next_start.is_none() {
            out.next_start = Some(start);
        }
        let (lo, hi) = (w.start.max(start), w.end.min(hull.end));
        out.conflict = hull
            .owners()
            .iter()
            .filter(|&&o| o != me)
            .filter_map(|o| granted_in(&others[o], lo, hi))
            .min();
        if out.conflict.is_some() {
            break;
        }
    }
    out
}

/// The first byte at or after `pos` where another request's lock could be: the start of a
/// write hull or (for writers) of a read segment, or `pos` itself if one covers it.
/// `ignore_cross` is the simulator's fault: readers and writers do not see each other.
pub(super) fn horizon(table: &FileTable, pos: u64, mode: LockMode, ignore_cross: bool) -> u64 {
    let see_writes = mode == LockMode::Write || !ignore_cross;
    let see_reads = mode == LockMode::Write && !ignore_cross;
    let mut h = MAX_OFFSET;
    if see_writes {
        if table.writes.covering(pos).is_some() {
            return pos;
        }
        h = table
            .writes
            .next_at_or_after(pos)
            .map_or(MAX_OFFSET, |(s, _)| s);
    }
    if see_reads {
        if let Some(b) = table.reads.first_overlap(ByteRange {
            start: pos,
            end: h.max(pos + 1),
        }) {
            h = h.min(b);
        }
    }
    h
}

/// The grant loop (see the module docs for the fast and slow paths).
#[allow(clippy::too_many_arguments)]
pub(super) fn grant_into(
    req: &mut LockRequest,
    lock: LockId,
    limit: u64,
    table: &mut FileTable,
    others: &mut HashMap<LockId, LockRequest>,
    entries: &mut Entries,
    (ranges, checked, owners): (&mut u64, &mut u64, &mut u64),
    budget: &mut u64,
    ignore_conflicts: bool,
    hull_owners: usize,
    leap_after: u64,
) -> Grant {
    let mode = req.mode;
    // What this request may still add before its client reaches its share.
    let room = entries.client_limit.saturating_sub(entries.of(req.owner));
    let held_before = req.held.entries();
    let desc = &req.desc;
    let mut src = desc.cursor();
    src.seek(req.cursor);
    let mut horizon = horizon(table, req.cursor, mode, ignore_conflicts);
    // Write bytes granted on the fast path, not yet in the index.
    let mut run: Option<ByteRange> = None;
    // The next horizon, when a slow-path grant already knows it.
    let mut known_horizon: Option<u64> = None;
    // The rest of a range cut at a hull boundary, checked next as a range of its own.
    let mut carry: Option<ByteRange> = None;
    // Write ranges granted on the fast path in a row (see `leap`).
    let mut streak = 0u64;
    let outcome = loop {
        let next = carry.take().or_else(|| src.next_range());
        let (r, want) = match next_want(next, limit, budget, (&mut req.cursor, &mut req.next)) {
            Ok(ranges) => ranges,
            Err(stop) => break stop,
        };
        let slow = want.end > horizon;
        let piece = if !slow {
            // Fast path: nobody else holds anything in [cursor, horizon).
            let held = (&mut req.held, mode, want);
            fast_piece(held, (table, entries), &mut run, (held_before, room))
                .map(|()| (want.end, None, None))
        } else {
            if let Some(x) = run.take() {
                add_write_hull(table, &mut req.held, lock, x, &mut entries.total);
            }
            slow_piece(
                (&mut req.held, mode, lock, want),
                (table, others, entries),
                (held_before, room),
                (ignore_conflicts, hull_owners),
                &mut known_horizon,
            )
        };
        let (end, conflict, inside) = match piece {
            Ok(piece) => piece,
            Err(full) => {
                req.next = Some(want.start);
                break full;
            }
        };
        let at = (&mut req.cursor, &mut req.last, &mut req.next);
        carry = match piece_granted((r, want), (end, conflict), at, slow, (ranges, checked)) {
            Ok(carry) => carry,
            Err(stop) => break stop,
        };
        if !slow && mode == LockMode::Write && end == r.end && !ignore_conflicts {
            streak += 1;
            let bound = horizon.min(limit).min(desc.end_bound());
            if streak >= leap_after && bound > req.cursor && *budget > 0 {
                // Nobody else holds anything below the horizon: the request's bytes up to
                // it join the run at once.
                leap_run(
                    desc,
                    &mut src,
                    (&mut req.cursor, &mut req.last),
                    bound,
                    &mut run,
                );
                *budget -= 1;
                *ranges += 1;
                streak = 0;
            }
        } else {
            streak = 0;
        }
        if let Some(h) = inside.filter(|_| {
            carry.is_none() && end == r.end && !ignore_conflicts && table.reads.is_empty()
        }) {
            let walked = walk_shared_hull(
                (&mut req.cursor, &mut req.last),
                desc,
                &mut src,
                lock,
                h,
                (limit, leap_after),
                others,
                budget,
            );
            carry = walked.counted((ranges, checked, owners));
        }
        if slow {
            horizon = known_horizon
                .take()
                .unwrap_or_else(|| self::horizon(table, req.cursor, mode, ignore_conflicts));
        }
    };
    if let Some(x) = run.take() {
        add_write_hull(table, &mut req.held, lock, x, &mut entries.total);
    }
    outcome
}

/// The next range `next` of the request (the rest of a cut range, or the source's next)
/// and the part of it to grant now, clipped to `limit`; or the `Grant` that ends the loop
/// before it: the request is complete, has reached `limit`, or the budget is spent. Takes
/// one unit of the budget for the range it hands out.
fn next_want(
    next: Option<ByteRange>,
    limit: u64,
    budget: &mut u64,
    (cursor, next_at): (&mut u64, &mut Option<u64>),
) -> Result<(ByteRange, ByteRange), Grant> {
    let Some(r) = next else {
        *cursor = MAX_OFFSET;
        *next_at = None;
        return Err(Grant::Complete);
    };
    if r.start >= limit {
        *cursor = limit.max(*cursor);
        *next_at = Some(r.start);
        return Err(Grant::Reached);
    }
    if *budget == 0 {
        // `r` is the request's first byte at or after the cursor (the source was sought
        // there and is clipped): the state is exactly a granted prefix.
        *next_at = Some(r.start);
        return Err(Grant::Paused);
    }
    *budget -= 1;
    let want = ByteRange {
        start: r.start,
        end: r.end.min(limit),
    };
    Ok((r, want))
}

/// Records the piece of `want` (of range `r`) granted up to `end`: the request's cursor
/// and last byte move, and the loop goes on with the rest of `r` cut at `end` (`Ok`), or
/// stops (`Err`) at a conflicting byte or at the bound that clipped `r` to `want`.
fn piece_granted(
    (r, want): (ByteRange, ByteRange),
    (end, conflict): (u64, Option<u64>),
    (cursor, last, next): (&mut u64, &mut u64, &mut Option<u64>),
    slow: bool,
    (ranges, checked): (&mut u64, &mut u64),
) -> Result<Option<ByteRange>, Grant> {
    if end > want.start {
        *ranges += 1;
        *checked += u64::from(slow);
        *last = end;
    }
    *cursor = end;
    if let Some(at) = conflict {
        *next = Some(at);
        return Err(Grant::Blocked(at));
    }
    if end < want.end {
        return Ok(Some(ByteRange {
            start: end,
            end: r.end,
        }));
    }
    if want.end < r.end {
        // The bound cut this range: the rest waits for a later acquire.
        *next = Some(want.end);
        return Err(Grant::Reached);
    }
    Ok(None)
}

/// The fast path for one range `want` below the horizon (nobody else holds anything
/// there): a write joins `run`, the write bytes granted on the fast path and not yet in
/// the index; a read is added at once. `Err` is the `Grant` that stops the loop when the
/// tables are full (the caller then waits at `want.start`).
fn fast_piece(
    (held, mode, want): (&mut Held, LockMode, ByteRange),
    (table, entries): (&mut FileTable, &mut Entries),
    run: &mut Option<ByteRange>,
    (held_before, room): (usize, usize),
) -> Result<(), Grant> {
    let full_now = |held: &Held, total| full(total, 1, held.entries() - held_before, room);
    match mode {
        LockMode::Write => {
            if run.is_none() {
                if let Some(full) = full_now(held, entries.total) {
                    return Err(full);
                }
            }
            *run = Some(run.map_or(want, |x| ByteRange {
                start: x.start,
                end: want.end,
            }));
        }
        LockMode::Read => {
            if let Some(full) = full_now(held, entries.total) {
                return Err(full);
            }
            add_read(table, held, want, &mut entries.total);
        }
    }
    Ok(())
}

/// The slow path for one range `want` past the horizon: checks it against the hulls and
/// read segments it meets and grants the piece below the first conflict (or hull boundary),
/// joining, carving or adding a hull. Returns (the piece's end, the conflicting byte, the
/// shared hull it lies in), or the `Grant` that stops the loop when the tables are full
/// (the caller then waits at `want.start`).
fn slow_piece(
    (held, mode, lock, want): (&mut Held, LockMode, LockId, ByteRange),
    (table, others, entries): (
        &mut FileTable,
        &mut HashMap<LockId, LockRequest>,
        &mut Entries,
    ),
    (held_before, room): (usize, usize),
    (ignore_conflicts, hull_owners): (bool, usize),
    known_horizon: &mut Option<u64>,
) -> Result<(u64, Option<u64>, Option<Hull>), Grant> {
    // The hull this piece lies in, when the request owns it (with others).
    let mut inside: Option<Hull> = None;
    let check = if mode == LockMode::Write || !ignore_conflicts {
        write_conflict(&table.writes, others, lock, want)
    } else {
        WriteCheck::default()
    };
    let mut conflict = check.conflict;
    if mode == LockMode::Write && !ignore_conflicts {
        if let Some(b) = table.reads.first_overlap(want) {
            conflict = Some(conflict.map_or(b, |c| c.min(b)));
        }
    }
    let mut end = conflict.unwrap_or(want.end);
    if mode == LockMode::Write {
        // A write piece stays inside one hull or between hulls (the index stays
        // disjoint); the rest of the range is checked as a range of its own.
        let stop = match check.covering {
            Some((_, h)) => h.end,
            None => check.next_start.unwrap_or(MAX_OFFSET),
        };
        if stop < end {
            end = stop;
            conflict = None;
        }
    }
    if end > want.start {
        if let Some(full) = full(entries.total, 2, held.entries() - held_before, room) {
            return Err(full);
        }
        let piece = ByteRange {
            start: want.start,
            end,
        };
        match (mode, check.covering) {
            // Inside a hull this request already owns: its bytes there are
            // recorded by its cursor alone.
            (LockMode::Write, Some((_, h))) if h.has(lock) => inside = Some(h),
            // Inside another request's hull (interleaved patterns): join it.
            (LockMode::Write, Some((s, h))) if h.owners().len() < hull_owners => {
                table.writes.join(s, lock);
                write_starts(held).insert(s);
                entries.total += 1;
                inside = Some(h);
            }
            (LockMode::Write, Some((s, h))) => {
                // No room for another owner: cut the piece out of the hull. Past
                // `piece`, no write hull starts before the remainder's start, which
                // is the next horizon when no reader could be in between.
                let rest = carve_hull(table, others, (s, h), piece, entries);
                new_write_hull(table, held, lock, piece, &mut entries.total);
                if let Some(rs) = rest.filter(|_| table.reads.is_empty()) {
                    *known_horizon = Some(rs);
                }
            }
            (LockMode::Write, None) => add_write_hull(table, held, lock, piece, &mut entries.total),
            (LockMode::Read, _) => add_read(table, held, piece, &mut entries.total),
        }
    }
    Ok((end, conflict, inside))
}

/// Ranges granted one by one (on the fast path, or in a shared hull with no other owner to
/// check) before the rest up to the bound is granted at once by `leap`: a leap costs a
/// binary search of ~20–60 seeks, which a few ranges do not repay.
pub(super) const LEAP_AFTER: u64 = 16;

/// Grants every byte of a writer's description in `[cursor, bound)` at once (nobody else
/// holds any there): its cursor moves to `bound`, `last` to one past its last byte below it,
/// and its source past it. O(log · depth) instead of one step per range.
fn leap(
    desc: &ValidDesc,
    src: &mut DescCursor<'_>,
    (cursor, last): (&mut u64, &mut u64),
    bound: u64,
) {
    if let Some(x) = desc.last_before(bound, *cursor) {
        *last = x + 1;
    }
    *cursor = bound;
    src.seek(bound);
}

/// `leap`, with `run` (the write bytes granted on the fast path) extended to the last
/// byte it granted.
fn leap_run(
    desc: &ValidDesc,
    src: &mut DescCursor<'_>,
    (cursor, last): (&mut u64, &mut u64),
    bound: u64,
    run: &mut Option<ByteRange>,
) {
    leap(desc, src, (&mut *cursor, &mut *last), bound);
    if let Some(x) = run.as_mut() {
        x.end = *last;
    }
}

/// What `walk_shared_hull` did.
struct Walked {
    /// Ranges granted.
    granted: u64,
    /// Other owners' walkers the granted ranges were checked against, summed.
    owners_checked: u64,
    /// The range it stopped at (taken from the source), for the caller's checks.
    rest: Option<ByteRange>,
}

impl Walked {
    /// Adds what the walk granted and checked to the grant's counts; the range it stopped at.
    fn counted(
        self,
        (ranges, checked, owners): (&mut u64, &mut u64, &mut u64),
    ) -> Option<ByteRange> {
        *ranges += self.granted;
        *checked += self.granted;
        *owners += self.owners_checked;
        self.rest
    }
}

/// Grants a writer's next ranges inside hull `h`, which it owns with other requests
/// (interleaved patterns: neighbours' rows of one subarray), checking each against the
/// other owners' descriptions walked alongside: no index lookups, no hash lookups, no
/// seeks from the root. The other owners' granted bytes in `h` are exactly their
/// descriptions' bytes there below their cursors, and nobody else has any there (hulls are
/// disjoint and name every owner). Stops, handing the range back, at the first range that
/// leaves the hull, reaches `limit`, may conflict (the caller checks it precisely), or when
/// the budget is spent. The caller makes sure no read lock exists in the file.
#[allow(clippy::too_many_arguments)]
fn walk_shared_hull(
    (cursor, last): (&mut u64, &mut u64),
    desc: &ValidDesc,
    src: &mut DescCursor<'_>,
    me: LockId,
    h: Hull,
    (limit, leap_after): (u64, u64),
    others: &HashMap<LockId, LockRequest>,
    budget: &mut u64,
) -> Walked {
    // Owners whose whole access provably shares no byte with this one's (block-partitioned
    // subarrays: `GridBox`) need no walk.
    let mine = desc.access().and_then(GridBox::of);
    let apart = |q: &LockRequest| {
        mine.as_ref().is_some_and(|m| {
            q.desc
                .access()
                .and_then(GridBox::of)
                .is_some_and(|b| grid_box::boxes_disjoint(m, &b))
        })
    };
    // Per other owner: its cursor over its description, its range at or after ours, and
    // its granted prefix's end.
    let mut walkers: Vec<(DescCursor<'_>, Option<ByteRange>, u64)> = h
        .owners()
        .iter()
        .filter(|&&o| o != me)
        .map(|o| &others[o])
        .filter(|q| !apart(q))
        .map(|q| {
            let mut c = q.desc.cursor();
            c.seek(*cursor);
            let first = c.next_range();
            (c, first, q.cursor)
        })
        .collect();
    let mut granted = 0;
    let mut owners_checked = 0;
    while *budget > 0 {
        if walkers.is_empty() && granted >= leap_after {
            // Nobody else's bytes can be in this hull's rest: take it at once.
            let bound = h.end.min(limit).min(desc.end_bound());
            if bound > *cursor {
                leap(desc, src, (cursor, last), bound);
                *budget -= 1;
                granted += 1;
            }
            return Walked {
                granted,
                owners_checked,
                rest: None,
            };
        }
        let Some(n) = src.next_range() else {
            return Walked {
                granted,
                owners_checked,
                rest: None,
            };
        };
        let clear = n.end <= h.end
            && n.end <= limit
            && walkers.iter_mut().all(|(c, cur, top)| {
                while let Some(x) = *cur {
                    if x.end > n.start {
                        break;
                    }
                    *cur = c.next_range();
                }
                cur.is_none_or(|x| x.start.max(n.start) >= n.end.min(*top))
            });
        if !clear {
            return Walked {
                granted,
                owners_checked,
                rest: Some(n),
            };
        }
        *budget -= 1;
        granted += 1;
        owners_checked += walkers.len() as u64;
        *cursor = n.end;
        *last = n.end;
    }
    Walked {
        granted,
        owners_checked,
        rest: None,
    }
}

/// Releases `req`'s granted bytes at or above `x` from the indexes and moves its cursor
/// back; returns what was freed, in increasing order.
pub(super) fn cut_held(
    req: &mut LockRequest,
    lock: LockId,
    table: &mut FileTable,
    x: u64,
) -> Vec<ByteRange> {
    let mut freed = Vec::new();
    match &mut req.held {
        Held::Write(starts) => {
            let above = starts.split_off(&x);
            if let Some(&s) = starts.last() {
                let h = table.writes.get(s).expect("listed hulls exist");
                if h.end > x {
                    // A shared hull keeps its bounds: this request's bytes there end at its
                    // cursor, which moves back below.
                    if h.is_only(lock) {
                        table.writes.set_end(s, x);
                    }
                    freed.push(ByteRange {
                        start: x,
                        end: h.end,
                    });
                }
            }
            for s in above {
                let h = table.writes.leave(s, lock);
                freed.push(ByteRange {
                    start: s,
                    end: h.end,
                });
            }
        }
        Held::Read(chain) => {
            let cut = chain.partition_point(|r| r.end <= x);
            let mut tail = chain.split_off(cut);
            if let Some(first) = tail.first_mut() {
                if first.start < x {
                    let kept = ByteRange {
                        start: first.start,
                        end: x,
                    };
                    table.reads.remove(*first);
                    table.reads.add(kept);
                    chain.push(kept);
                    first.start = x;
                } else {
                    table.reads.remove(*first);
                }
            }
            for r in tail.iter().skip(1) {
                table.reads.remove(*r);
            }
            freed = tail;
        }
    }
    if req.cursor > x {
        req.cursor = x;
        match &req.held {
            // The chain is exactly the granted bytes, and a freed range starting at `x`
            // means `x` is the request's own byte: no walk of the description (which would
            // cost a sliced release of millions of runs a seek per slice).
            Held::Read(chain) => {
                req.last = chain.last().map_or(0, |r| r.end);
                req.next = if freed.first().is_some_and(|r| r.start == x) {
                    Some(x)
                } else {
                    req.desc.first_at_or_after(x)
                };
            }
            Held::Write(_) => {
                req.next = req.desc.first_at_or_after(x);
                req.last = req.desc.last_before(x, 0).map_or(0, |b| b + 1);
            }
        }
    }
    freed
}

/// `Some` limit a grant would pass by adding `n` entries: the server's (with `total` in use)
/// or the client's (this request added `added` of the `room` its client had).
fn full(total: usize, n: usize, added: usize, room: usize) -> Option<Grant> {
    if total + n > MAX_LOCKS_PER_SERVER {
        Some(Grant::Full)
    } else if added + n > room {
        Some(Grant::ClientFull)
    } else {
        None
    }
}

fn add_read(table: &mut FileTable, held: &mut Held, r: ByteRange, entries: &mut usize) {
    table.reads.add(r);
    if let Held::Read(chain) = held {
        chain.push(r);
    }
    *entries += 1;
}

/// Records granted write bytes `r` (above every hull the request has): extends the request's
/// last hull when no other hull lies between, else starts a new one.
fn add_write_hull(
    table: &mut FileTable,
    held: &mut Held,
    lock: LockId,
    r: ByteRange,
    entries: &mut usize,
) {
    if let Some(&tail) = write_starts(held).last() {
        let h = table.writes.get(tail).expect("listed hulls exist");
        debug_assert!(h.end <= r.start);
        // A shared hull is not stretched: its other owners would check their later grants
        // there against this request for nothing.
        if h.is_only(lock)
            && table
                .writes
                .next_after(tail)
                .is_none_or(|(s, _)| s >= r.end)
        {
            table.writes.set_end(tail, r.end);
            return;
        }
    }
    new_write_hull(table, held, lock, r, entries);
}

/// Records granted write bytes `r` as a hull of their own (another request's hull lies
/// between them and the request's last one).
fn new_write_hull(
    table: &mut FileTable,
    held: &mut Held,
    lock: LockId,
    r: ByteRange,
    entries: &mut usize,
) {
    table.writes.insert(r.start, Hull::new(r.end, lock));
    write_starts(held).insert(r.start);
    *entries += 1;
}

/// A write request's hull starts.
fn write_starts(held: &mut Held) -> &mut BTreeSet<u64> {
    match held {
        Held::Write(starts) => starts,
        Held::Read(_) => unreachable!("write grants go to write requests"),
    }
}

/// Before granting write bytes `w` inside the hull `(s, h)`, none of whose owners has a
/// byte there, when the hull has no room for another owner: cuts `w` out of it so hulls
/// stay disjoint. The part below `w` keeps the entry and its owners (or goes, if empty);
/// the part above starts at the owners' first granted byte past `w`, if any, names only
/// the owners with granted bytes in it (so a hull never starts above an owner's cursor),
/// and its start is returned.
fn carve_hull(
    table: &mut FileTable,
    others: &mut HashMap<LockId, LockRequest>,
    (s, h): (u64, Hull),
    w: ByteRange,
    entries: &mut Entries,
) -> Option<u64> {
    debug_assert!(s <= w.start && w.end <= h.end);
    let mut above: Vec<LockId> = Vec::new();
    let mut rest: Option<u64> = None;
    for o in h.owners() {
        if let Some(b) = granted_in(&others[o], w.end, h.end) {
            above.push(*o);
            rest = Some(rest.map_or(b, |r| r.min(b)));
        }
    }
    let below = s < w.start;
    if below {
        table.writes.set_end(s, w.start);
    } else {
        table.writes.remove(s);
    }
    if let Some(rs) = rest {
        let mut upper = Hull::new(h.end, above[0]);
        for &o in &above[1..] {
            upper.add(o);
        }
        table.writes.insert(rs, upper);
    }
    // The entries are the owners' (they go when the owners release), counted in their
    // shares though this request caused them.
    for o in h.owners() {
        let owner = others.get_mut(o).expect("hulls have owners");
        let starts = write_starts(&mut owner.held);
        let (before, mut after) = (1usize, 1usize);
        if !below {
            starts.remove(&s);
            after -= 1;
        }
        if let Some(rs) = rest.filter(|_| above.contains(o)) {
            starts.insert(rs);
            after += 1;
        }
        entries.total = entries.total + after - before;
        entries.moved(owner.owner, before, after);
    }
    rest
}
