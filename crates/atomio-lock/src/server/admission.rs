//! Mandatory locks: the lock service admits every request that changes a file's bytes or
//! objects (`Request::needs_admission`) before the data service runs it, and refuses those
//! that would change bytes another client holds a lock on — POSIX mandatory-locking
//! semantics: a write needs no lock of its own (`none` writers stay lock-free), but it
//! cannot reach into bytes someone else has locked, so no peer, hostile or buggy, can tear
//! an atomic write or change what a reader holds. The driver forwards an admitted request
//! to the data service *before* handling the next lock message, so an admission is
//! serialized with the grants: a write admitted while the bytes were free is applied
//! before anyone granted them later can read or write them.
//!
//! Servers hold objects, locks are taken in file offsets: the request's `Striping` maps its
//! object pieces back to file bytes. A server keeps the first striping it sees for a file
//! and refuses writes that name another, so a peer cannot dodge the check by lying about
//! the layout once the file is in use (a peer that is *first* to name a file's striping
//! makes every honest writer's request fail with a clear error — a denial of service, never
//! a silent overwrite; see docs/security.md).
//!
//! **Invariants:** admission never changes the lock table; a lapsed client's changes are
//! refused `LeaseExpired` before anything else; it is refused (`Locked`) iff
//! some mapped file byte lies in another client's granted write bytes or in any read lock
//! (a client cannot hold a read and a write lock on one byte, so a read lock on a byte the
//! writer wrote is another's, or the writer writing under its own read lock); a write's cost
//! is bounded by `MAX_CHECKED_STRIPS` index lookups; a resize or drop walks only the
//! requester's own write hulls before it finds another's (or none).

use super::{LockRequest, LockServer};
use crate::index::WriteHulls;
use atomio_layout::{ByteRange, MAX_OFFSET};
use atomio_proto::data::{validate_pieces, ObjPiece, Striping};
use atomio_proto::{ClientId, ErrorCode, FileId, LockId, Request, WireError};
use std::collections::HashMap;

/// Most file ranges (pieces × strips) one request may be checked for: bounds the time an
/// admission takes on the lock thread (a 64 MiB write at 512-byte strips fits).
pub const MAX_CHECKED_STRIPS: usize = 1 << 17;

/// Most files a server remembers a striping for.
pub const MAX_STRIPED_FILES: usize = 1 << 20;

fn locked(what: &str, at: u64) -> WireError {
    WireError::new(
        ErrorCode::Locked,
        format!("refused: {what} file byte {at}, which another client holds a lock on"),
    )
}

/// The first byte of `w` in another client's granted write bytes.
fn foreign_write(
    writes: &WriteHulls,
    requests: &HashMap<LockId, LockRequest>,
    client: ClientId,
    w: ByteRange,
) -> Option<u64> {
    for (start, hull) in writes.overlapping(w) {
        // A hull covers its owners' bytes and the gaps between them: ask the descriptions.
        let (lo, hi) = (w.start.max(start), w.end.min(hull.end));
        let first = hull
            .owners()
            .iter()
            .map(|o| &requests[o])
            .filter(|owner| owner.owner != client)
            .filter_map(|owner| super::granted_in(owner, lo, hi))
            .min();
        if first.is_some() {
            return first;
        }
    }
    None
}

impl LockServer {
    /// Admits `request` from `client` (see the module): `Ok` for requests that need no
    /// admission and for those that touch no byte another client holds a lock on.
    pub fn admit(&mut self, client: ClientId, request: &Request) -> Result<(), WireError> {
        // A lapsed client is told so (its data requests would be refused as fenced anyway).
        if let Some(leases) = self.leases.as_ref().filter(|l| l.is_lapsed(client)) {
            return Err(super::lapsed(leases.duration_ms()));
        }
        let verdict = self.verdict(client, request);
        match &verdict {
            Ok(()) if request.needs_admission() => self.stats.changes_admitted += 1,
            Err(e) if e.code == ErrorCode::Locked => self.stats.changes_refused += 1,
            _ => {}
        }
        verdict
    }

    fn verdict(&mut self, client: ClientId, request: &Request) -> Result<(), WireError> {
        match request {
            Request::Write {
                file,
                object,
                striping,
                pieces,
                ..
            }
            | Request::Stage {
                file,
                object,
                striping,
                pieces,
                ..
            } => {
                self.admit_write(client, *file, *object, *striping, pieces)?;
                self.no_foreign_dlm_lock(client, *file, Some(*object), pieces)
            }
            Request::SeqWrite {
                file,
                object,
                blocks,
                data,
                ..
            } => self
                .dlm
                .admit_flush(client, *file, *object, blocks, data.len()),
            Request::SetObjectSize { file, object, size } => {
                self.admit_resize(client, *file, *object, *size)?;
                let rest = [ObjPiece {
                    offset: (*size).min(MAX_OFFSET - 1),
                    len: MAX_OFFSET - (*size).min(MAX_OFFSET - 1),
                }];
                self.no_foreign_dlm_lock(client, *file, Some(*object), &rest)
            }
            // Every object goes: refused if anyone else holds anything of the file here.
            // Admitted, the striping goes too (a file made again may be striped otherwise).
            Request::DropObjects { file } => match self.foreign_lock_from(client, *file, 0) {
                Some(at) => Err(locked("dropping the objects of", at)),
                None => {
                    let all = [ObjPiece {
                        offset: 0,
                        len: MAX_OFFSET,
                    }];
                    self.no_foreign_dlm_lock(client, *file, None, &all)?;
                    self.stripings.remove(file);
                    Ok(())
                }
            },
            _ => Ok(()),
        }
    }

    /// Mandatory locks in the DLMs' lock space: refused where another client holds a
    /// cached DLM lock on the object bytes (`object: None`: any object of the file).
    fn no_foreign_dlm_lock(
        &self,
        client: ClientId,
        file: FileId,
        object: Option<u32>,
        pieces: &[ObjPiece],
    ) -> Result<(), WireError> {
        if self.dlm.resources() == 0 {
            return Ok(());
        }
        for p in pieces {
            let w = ByteRange {
                start: p.offset,
                end: p.offset.saturating_add(p.len).min(MAX_OFFSET),
            };
            if let Some(at) = self.dlm.foreign_lock(client, file, object, w) {
                return Err(WireError::new(
                    ErrorCode::Locked,
                    format!(
                        "refused: changing object byte {at} of {file}, which another client \
                         holds a DLM lock on"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Completes an admitted request with what only the lock service knows: a flush gets
    /// its resource's mSN (see `dlm`), so the data service may clean its extent cache.
    pub fn stamp(&self, request: &mut Request) {
        if let Request::SeqWrite {
            file, object, msn, ..
        } = request
        {
            *msn = self.dlm.msn(*file, *object);
        }
    }

    /// The striping this server keeps for `file`, recorded at first sight.
    fn striping_of(&mut self, file: FileId, striping: Striping) -> Result<(), WireError> {
        match self.stripings.get(&file) {
            Some(&known) if known == striping => Ok(()),
            Some(known) => Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "{file} is striped {} × {} bytes at this server; this request says {} × {}",
                    known.objects, known.stripe_size, striping.objects, striping.stripe_size
                ),
            )),
            None if self.stripings.len() >= MAX_STRIPED_FILES => Err(WireError::new(
                ErrorCode::LimitExceeded,
                format!("this server checks writes of {MAX_STRIPED_FILES} files, its limit"),
            )),
            None => {
                self.stripings.insert(file, striping);
                Ok(())
            }
        }
    }

    fn admit_write(
        &mut self,
        client: ClientId,
        file: FileId,
        object: u32,
        striping: Striping,
        pieces: &[ObjPiece],
    ) -> Result<(), WireError> {
        striping.validate(object)?;
        validate_pieces(pieces)?;
        self.striping_of(file, striping)?;
        let Some(table) = self.files.get(&file) else {
            return Ok(()); // nobody holds anything of the file here
        };
        let requests = &self.requests;
        striping.file_ranges(object, pieces, MAX_CHECKED_STRIPS, |w| {
            if let Some(b) = table.reads.first_overlap(w) {
                return Err(locked("writing", b));
            }
            match foreign_write(&table.writes, requests, client, w) {
                Some(b) => Err(locked("writing", b)),
                None => Ok(()),
            }
        })
    }

    /// Resizing `object` to `size` changes only its bytes at and past `size` (a truncation
    /// drops them; an extension turns holes into zeros, which read the same): refused when
    /// another client holds a lock at or past the file byte where those begin (every
    /// object's strips from there on, not only this object's: conservative, and one seek).
    fn admit_resize(
        &mut self,
        client: ClientId,
        file: FileId,
        object: u32,
        size: u64,
    ) -> Result<(), WireError> {
        // With no striping known (no write was ever admitted here), the whole file.
        let from = match self.stripings.get(&file) {
            // In u128 (at most 2^96 here): a client's striping may be absurd, and fuzzing
            // found the strip row's size overflowing u64. Past the byte space, no lock.
            Some(st) if object < st.objects && st.stripe_size > 0 => {
                let stripe = u128::from(st.stripe_size);
                let size = u128::from(size);
                let at = (size / stripe) * stripe * u128::from(st.objects)
                    + u128::from(object) * stripe
                    + size % stripe;
                u64::try_from(at).map_or(MAX_OFFSET, |at| at.min(MAX_OFFSET))
            }
            Some(_) => MAX_OFFSET, // no such object (or no strips) under the file's striping
            None => 0,
        };
        match self.foreign_lock_from(client, file, from) {
            Some(at) => Err(locked("resizing over", at)),
            None => Ok(()),
        }
    }

    /// The first byte at or past `from` of `file` that another client holds a lock on.
    fn foreign_lock_from(&self, client: ClientId, file: FileId, from: u64) -> Option<u64> {
        let table = self.files.get(&file)?;
        let rest = ByteRange::new(from.min(MAX_OFFSET), MAX_OFFSET).ok()?;
        [
            table.reads.first_overlap(rest),
            foreign_write(&table.writes, &self.requests, client, rest),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
