//! Interval I/O from C: patterns as bytes (to exchange MPI filetypes between
//! ranks), the interval set of one MPI view per rank, and installing it on a file.
//!
//! * `atomio_pattern_encode` / `atomio_pattern_decode`: a pattern's postcard form (its flat
//!   node array, as the wire's `WirePattern` carries it). Decoding validates every node
//!   (`Pattern::from_nodes`: references, sizes, depth, limits) and refuses trailing bytes,
//!   so bytes from another process are never trusted.
//! * `atomio_intervals_from_views`: `atomio_interval::from_views` over one (displacement,
//!   filetype) per rank; the same inputs give the same set on every rank.
//! * `atomio_file_set_intervals`, `atomio_file_explain`, `atomio_file_stats`: the file side.
//!
//! **Invariants:** the conventions of the crate root (error codes, `atomio_last_error`,
//! no unwinding into C, null checks); an `atomio_intervals` is immutable once built and
//! shared by reference count with every file it was installed on, so freeing it while
//! files still use it is safe.

use super::*;
use atomio_interval::{IntervalSet, Limits, View};
use std::time::Instant;

/// The interval set of a group of ranks' file views (immutable).
pub struct AtomioIntervals {
    set: Arc<IntervalSet>,
    bound: u64,
    seconds: f64,
}

/// Facts about an interval set and what computing it cost.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AtomioIntervalStats {
    /// Ranks whose views were analyzed.
    pub ranks: u32,
    /// Families of intervals kept (the size of the set).
    pub entries: u64,
    /// Elementary intervals those families stand for.
    pub intervals: u64,
    pub private_intervals: u64,
    pub shared_intervals: u64,
    pub private_bytes: u64,
    pub shared_bytes: u64,
    /// Wall time of the whole computation (lowering the views and the analysis).
    pub seconds: f64,
    /// The analysis covers file offsets below this (the same for every rank); beyond it
    /// no byte is declared and every call locks.
    pub bound: u64,
}

/// A file's I/O counters (`atomio_client::IoStats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AtomioIoStats {
    pub calls: u64,
    pub bytes: u64,
    /// Lock requests made (sub-requests, or `fcntl` calls).
    pub lock_requests: u64,
    /// Lock messages sent (acquires, partial and full releases).
    pub lock_messages: u64,
    /// Calls that took no lock at all (every byte private to the caller).
    pub lock_free_calls: u64,
    /// Calls that had to lock bytes no view declared (strategy `interval`/`auto`).
    pub interval_fallbacks: u64,
    /// Ranges in the lock requests made (a structured request counts its access's runs,
    /// an upper bound).
    pub lock_ranges: u64,
    /// `pread` system calls made on the user's file (direct placement).
    pub read_syscalls: u64,
}

/// Writes the encoded form of `p` into `buf` (`cap` bytes); `*len` is always set to the
/// bytes the encoding needs. `buf` NULL with `cap` 0 only asks for the length; a `cap`
/// too small is `ATOMIO_ELIMIT` (nothing written).
#[no_mangle]
pub extern "C" fn atomio_pattern_encode(
    p: *const AtomioPattern,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> c_int {
    call(|| {
        let p = &ref_or(p, "pattern")?.0;
        let len = mut_or(len, "len")?;
        let bytes = postcard::to_allocvec(p)
            .map_err(|e| err(ErrorCode::Internal, format!("encoding a pattern: {e}")))?;
        *len = bytes.len();
        if buf.is_null() && cap == 0 {
            return Ok(());
        }
        if cap < bytes.len() {
            return Err(err(
                ErrorCode::LimitExceeded,
                format!(
                    "the pattern needs {} bytes; the buffer has {cap}",
                    bytes.len()
                ),
            ));
        }
        slice_mut(buf.cast(), bytes.len(), "buf")?.copy_from_slice(&bytes);
        Ok(())
    })
}

/// A pattern from the `len` bytes `atomio_pattern_encode` wrote (possibly in another
/// process). Malformed or invalid bytes are `ATOMIO_EMALFORMED` / `ATOMIO_EINVAL` /
/// `ATOMIO_ELIMIT`, never a crash. Free with `atomio_pattern_free`.
#[no_mangle]
pub extern "C" fn atomio_pattern_decode(
    buf: *const u8,
    len: usize,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let bytes = slice(buf, len, "buf")?;
        let (p, rest) = postcard::take_from_bytes::<Pattern>(bytes).map_err(|e| {
            err(
                ErrorCode::Malformed,
                format!("not an encoded valid pattern: {e}"),
            )
        })?;
        if !rest.is_empty() {
            return Err(err(
                ErrorCode::Malformed,
                format!("{} bytes after the encoded pattern", rest.len()),
            ));
        }
        put(out, AtomioPattern(p))
    })
}

/// The interval set of `n` ranks' MPI file views: rank `i` sees `filetypes[i]` repeated
/// every extent from byte `disps[i]` (filetypes monotone, data within the extent, as MPI
/// requires of views). Analyzed up to `reach` bytes past the largest displacement (0: the
/// default, 1 TiB). Every rank calling it with the same inputs gets the same set.
#[no_mangle]
pub extern "C" fn atomio_intervals_from_views(
    n: usize,
    filetypes: *const *const AtomioPattern,
    disps: *const u64,
    reach: u64,
    out: *mut *mut AtomioIntervals,
) -> c_int {
    call(|| {
        if out.is_null() {
            return Err(err(
                ErrorCode::InvalidArgument,
                "the output pointer is null",
            ));
        }
        let fts = slice(filetypes, n, "filetypes")?;
        let ds = slice(disps, n, "disps")?;
        let mut views = Vec::with_capacity(n);
        for (i, (&ft, &disp)) in fts.iter().zip(ds).enumerate() {
            let p = &ref_or(ft, "filetype")?.0;
            if p.size() > 0 {
                let ub = p.data_bounds().map_or(0, |(_, ub)| ub);
                if !p.monotone() || ub > p.extent() {
                    return Err(err(
                        ErrorCode::InvalidArgument,
                        format!(
                            "rank {i}'s filetype is not a view: its data must be in \
                             increasing, non-overlapping order within its extent"
                        ),
                    ));
                }
            }
            views.push(View {
                disp,
                filetype: p.clone(),
            });
        }
        let reach = if reach == 0 {
            atomio_interval::views::DEFAULT_VIEW_REACH
        } else {
            reach
        };
        let t0 = Instant::now();
        let (set, bound) = atomio_interval::from_views(&views, reach, Limits::default())
            .map_err(|e| err(ErrorCode::LimitExceeded, format!("interval analysis: {e}")))?;
        put(
            out,
            AtomioIntervals {
                set: Arc::new(set),
                bound,
                seconds: t0.elapsed().as_secs_f64(),
            },
        )
    })
}

/// Facts about an interval set.
#[no_mangle]
pub extern "C" fn atomio_intervals_stats(
    set: *const AtomioIntervals,
    out: *mut AtomioIntervalStats,
) -> c_int {
    call(|| {
        let s = ref_or(set, "intervals")?;
        let out = mut_or(out, "out")?;
        let a = s.set.stats();
        *out = AtomioIntervalStats {
            ranks: a.ranks,
            entries: a.entries,
            intervals: a.intervals,
            private_intervals: a.private_intervals,
            shared_intervals: a.shared_intervals,
            private_bytes: a.private_bytes,
            shared_bytes: a.shared_bytes,
            seconds: s.seconds,
            bound: s.bound,
        };
        Ok(())
    })
}

/// Frees an interval set (files it was installed on keep their own reference).
#[no_mangle]
pub extern "C" fn atomio_intervals_free(set: *mut AtomioIntervals) {
    if !set.is_null() {
        // SAFETY: `set` came from `atomio_intervals_from_views` and is freed once here.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(set) })));
    }
}

/// Installs `set` on the file, for rank `rank` of the views it was computed from
/// (strategies `interval` and `auto`: bytes private to `rank` are written and read without
/// locks; `auto` picks its strategy from the set). Call it again when the views change.
#[no_mangle]
pub extern "C" fn atomio_file_set_intervals(
    file: *mut AtomioFile,
    set: *const AtomioIntervals,
    rank: u32,
) -> c_int {
    call(|| {
        let s = ref_or(set, "intervals")?;
        let f = mut_or(file, "file")?;
        let ranks = s.set.ranks();
        if rank >= ranks && ranks > 0 {
            return Err(err(
                ErrorCode::InvalidArgument,
                format!("rank {rank} of a set of {ranks} ranks"),
            ));
        }
        f.file.set_intervals(s.set.clone(), rank);
        Ok(())
    })
}

/// Makes the file an **interval file** laid out by the interval set installed last
/// (`atomio_file_set_intervals`; strategy `interval` on the user's file): rank 0 writes the
/// metadata now, each rank's private bytes are cached and written at `atomio_sync` /
/// `atomio_flush` as one stretch per rank, shared bytes in place under their locks. Every
/// rank of the set calls it before any I/O. Bytes outside the set are refused afterwards,
/// and the layout does not follow later views. `atomio interval translate FILE OUT --to
/// flat` turns the file back into a flat one.
#[no_mangle]
pub extern "C" fn atomio_file_set_interval_format(file: *mut AtomioFile) -> c_int {
    call(|| mut_or(file, "file")?.file.set_interval_format())
}

/// The strategy `auto` chose for the file and why, as "strategy: reason" (NUL-terminated,
/// truncated to `cap` - 1 bytes at a character boundary); "" when nothing was chosen.
#[no_mangle]
pub extern "C" fn atomio_file_explain(
    file: *const AtomioFile,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    call(|| {
        let f = ref_or(file, "file")?;
        let text = f
            .file
            .explain()
            .map(|c| format!("{}: {}", c.strategy, c.reason))
            .unwrap_or_default();
        put_text(&text, buf, cap)
    })
}

/// `text` into a C buffer of `cap` bytes, NUL-terminated, cut at a character boundary.
fn put_text(text: &str, buf: *mut c_char, cap: usize) -> Result<(), WireError> {
    let dst = slice_mut(buf.cast(), cap, "buf")?;
    if dst.is_empty() {
        return Ok(());
    }
    let mut n = text.len().min(dst.len() - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    dst[..n].copy_from_slice(&text.as_bytes()[..n]);
    dst[n] = 0;
    Ok(())
}

/// The strategy in force on the file ("" when atomic mode is off): for `auto`, the one it
/// chose (or fell back to); NUL-terminated, truncated to `cap` - 1 bytes.
#[no_mangle]
pub extern "C" fn atomio_get_strategy(
    file: *const AtomioFile,
    buf: *mut c_char,
    cap: usize,
) -> c_int {
    call(|| {
        let f = ref_or(file, "file")?;
        let text = f.file.atomic().map(|s| s.to_string()).unwrap_or_default();
        put_text(&text, buf, cap)
    })
}

/// The file's I/O counters since it was opened.
#[no_mangle]
pub extern "C" fn atomio_file_stats(file: *const AtomioFile, out: *mut AtomioIoStats) -> c_int {
    call(|| {
        let f = ref_or(file, "file")?;
        let out = mut_or(out, "out")?;
        let s = f.file.stats();
        *out = AtomioIoStats {
            calls: s.calls,
            bytes: s.bytes,
            lock_requests: s.lock_requests,
            lock_messages: s.lock_messages,
            lock_free_calls: s.lock_free_calls,
            interval_fallbacks: s.interval_fallbacks,
            lock_ranges: s.lock_ranges,
            read_syscalls: s.read_syscalls,
        };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(p: &AtomioPattern) -> Vec<u8> {
        let mut len = 0usize;
        assert_eq!(
            atomio_pattern_encode(p, std::ptr::null_mut(), 0, &mut len),
            ATOMIO_OK
        );
        let mut buf = vec![0u8; len];
        assert_eq!(
            atomio_pattern_encode(p, buf.as_mut_ptr(), buf.len(), &mut len),
            ATOMIO_OK
        );
        buf
    }

    fn decode(b: &[u8]) -> Result<Pattern, c_int> {
        let mut out: *mut AtomioPattern = std::ptr::null_mut();
        match atomio_pattern_decode(b.as_ptr(), b.len(), &mut out) {
            ATOMIO_OK => {
                // SAFETY: a fresh pattern from atomio_pattern_decode, freed here.
                let p = unsafe { Box::from_raw(out) };
                Ok(p.0.clone())
            }
            e => Err(e),
        }
    }

    #[test]
    fn patterns_round_trip_and_bad_bytes_are_refused() {
        let b = Pattern::bytes(8).unwrap();
        let p =
            AtomioPattern(Pattern::subarray(&[10, 20], &[3, 4], &[2, 5], Order::C, &b).unwrap());
        let bytes = encode(&p);
        assert_eq!(decode(&bytes).unwrap(), p.0);
        let mut small = vec![0u8; bytes.len() - 1];
        let mut len = 0;
        assert_eq!(
            atomio_pattern_encode(&p, small.as_mut_ptr(), small.len(), &mut len),
            ATOMIO_ELIMIT
        );
        assert_eq!(len, bytes.len());
        // Every truncation and every single-byte change: an error or a valid pattern.
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err());
        }
        for i in 0..bytes.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut c = bytes.clone();
                c[i] = v;
                if let Ok(q) = decode(&c) {
                    let _ = (q.size(), q.extent());
                }
            }
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(decode(&extra), Err(ATOMIO_EMALFORMED));
        // A node referring forward is refused by validation.
        let bad = postcard::to_allocvec(&vec![atomio_layout::Node::Resized { extent: 8, elem: 0 }])
            .unwrap();
        assert!(decode(&bad).is_err());
        // A huge length prefix does not allocate it.
        assert!(decode(&[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }

    #[test]
    fn strided_views_make_a_private_set() {
        let (p, b) = (4u64, 384u64);
        let ft = AtomioPattern(Pattern::resized(p * b, &Pattern::bytes(b).unwrap()).unwrap());
        let fts: Vec<*const AtomioPattern> = (0..p).map(|_| &ft as *const _).collect();
        let disps: Vec<u64> = (0..p).map(|r| r * b).collect();
        let mut set: *mut AtomioIntervals = std::ptr::null_mut();
        assert_eq!(
            atomio_intervals_from_views(4, fts.as_ptr(), disps.as_ptr(), 1 << 30, &mut set),
            ATOMIO_OK
        );
        let mut st = AtomioIntervalStats::default();
        assert_eq!(atomio_intervals_stats(set, &mut st), ATOMIO_OK);
        assert_eq!(st.ranks, 4);
        assert_eq!(st.shared_bytes, 0);
        assert!(st.private_bytes > 0 && st.bound > 0);
        atomio_intervals_free(set);
        // A rank with an empty view and a rank with a contiguous one (what the MPI library
        // passes for them): the contiguous rank shares nothing with nobody else's bytes.
        let empty = AtomioPattern(Pattern::bytes(0).unwrap());
        let all = AtomioPattern(Pattern::bytes(1 << 20).unwrap());
        let fts2: Vec<*const AtomioPattern> = vec![&empty, &all];
        assert_eq!(
            atomio_intervals_from_views(2, fts2.as_ptr(), [0u64, 4096].as_ptr(), 1 << 20, &mut set),
            ATOMIO_OK
        );
        assert_eq!(atomio_intervals_stats(set, &mut st), ATOMIO_OK);
        assert_eq!((st.ranks, st.shared_bytes), (2, 0));
        assert!(st.private_bytes >= 1 << 20, "{st:?}");
        atomio_intervals_free(set);
        // Nulls are errors, not crashes.
        assert_eq!(
            atomio_intervals_from_views(4, std::ptr::null(), disps.as_ptr(), 0, &mut set),
            ATOMIO_EINVAL
        );
        assert_eq!(
            atomio_intervals_stats(std::ptr::null(), &mut st),
            ATOMIO_EINVAL
        );
    }
}
