//! The verifier for C test programs and benchmarks: `libatomio_oracle.so`, declared in
//! `include/atomio_oracle.h`. A program tags each call's data (`atomio_tag_view`), records
//! its writes and reads, and checks the file (`atomio_verifier_check`) — the oracle of the
//! MPI suite, kept out of the product's `libatomio.so`.
//!
//! Views are the product's pattern handles; this library turns them into file ranges
//! through the product's own C ABI (`atomio_view_runs`, resolved from `libatomio.so` when
//! the program is loaded), so the oracle and the product agree on what a view covers
//! without this library reaching into the product's handles.
//!
//! **Invariants:** no panic crosses into C (each entry point catches it and returns
//! `ATOMIO_EINTERNAL`); null handles and pointers are `ATOMIO_EINVAL`; the file is read as
//! its file system holds it, not as this client's page cache does.

use atomio_layout::{Access, ByteRange, RangeList};
use atomio_proto::{ErrorCode, WireError};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The product's pattern handle (`atomio_pattern` in atomio.h), opaque here.
#[repr(C)]
pub struct AtomioPattern {
    _opaque: [u8; 0],
}

extern "C" {
    /// The product's C ABI (libatomio.so): a call's file ranges, increasing, merged.
    fn atomio_view_runs(
        disp: u64,
        filetype: *const AtomioPattern,
        skip: u64,
        len: usize,
        offsets: *mut u64,
        lengths: *mut u64,
        cap: usize,
        n: *mut usize,
    ) -> c_int;
    fn atomio_last_error() -> *const c_char;
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// The message of this thread's last failed call of this library ("" after a success).
#[no_mangle]
pub extern "C" fn atomio_oracle_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

fn err(code: ErrorCode, msg: impl Into<String>) -> WireError {
    WireError::new(code, msg)
}

/// Runs `f`, turning errors and panics into atomio.h's codes.
fn call(f: impl FnOnce() -> Result<(), WireError>) -> c_int {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            LAST_ERROR.with(|l| *l.borrow_mut() = CString::default());
            return 0;
        }
        Ok(Err(e)) => e,
        Err(_) => err(ErrorCode::Internal, "panic in the oracle"),
    };
    let msg = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = msg);
    e.code as c_int
}

fn non_null<T>(p: *const T, what: &str) -> Result<(), WireError> {
    if p.is_null() {
        return Err(err(ErrorCode::InvalidArgument, format!("{what} is null")));
    }
    Ok(())
}

fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, WireError> {
    non_null(p, what)?;
    // SAFETY: the caller passes a NUL-terminated string that lives for the call.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| err(ErrorCode::InvalidArgument, format!("{what} is not UTF-8")))
}

/// Frees a verifier from `atomio_verifier_new` (null does nothing).
fn free(v: *mut AtomioVerifier) {
    if !v.is_null() {
        // SAFETY: `v` came from `atomio_verifier_new` and is freed exactly once here.
        drop(unsafe { Box::from_raw(v) });
    }
}

/// Stores `v` at `p`, a place for one `T` the caller passed (null is an error).
fn set<T>(p: *mut T, v: T, what: &str) -> Result<(), WireError> {
    non_null(p, what)?;
    // SAFETY: the caller passes a valid place for one `T` (checked non-null above).
    unsafe { p.write(v) };
    Ok(())
}

fn bytes<'a>(p: *const c_void, n: usize, what: &str) -> Result<&'a [u8], WireError> {
    if n == 0 {
        return Ok(&[]);
    }
    non_null(p, what)?;
    // SAFETY: the caller promises `p` points to `n` readable bytes for the call.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
}

fn bytes_mut<'a>(p: *mut c_void, n: usize, what: &str) -> Result<&'a mut [u8], WireError> {
    if n == 0 {
        return Ok(&mut []);
    }
    non_null(p, what)?;
    // SAFETY: the caller promises `p` points to `n` writable bytes for the call, not aliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
}

/// The file ranges of `len` data bytes at `skip` of the view, as the product computes them.
fn view(
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    len: usize,
) -> Result<Access, WireError> {
    non_null(filetype, "filetype")?;
    let product = |rc: c_int| -> Result<(), WireError> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: libatomio returns a NUL-terminated string that lives until its next call.
        let why = unsafe { CStr::from_ptr(atomio_last_error()) }.to_string_lossy();
        Err(err(
            ErrorCode::InvalidArgument,
            format!("atomio_view_runs: {why}"),
        ))
    };
    let mut n = 0usize;
    // SAFETY: a count query (cap 0) writes only `n`.
    product(unsafe {
        atomio_view_runs(
            disp,
            filetype,
            skip,
            len,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            &mut n,
        )
    })?;
    let (mut offs, mut lens) = (vec![0u64; n], vec![0u64; n]);
    let mut got = 0usize;
    // SAFETY: both buffers hold `n` elements, the capacity passed.
    product(unsafe {
        atomio_view_runs(
            disp,
            filetype,
            skip,
            len,
            offs.as_mut_ptr(),
            lens.as_mut_ptr(),
            n,
            &mut got,
        )
    })?;
    offs.truncate(got.min(n));
    let ranges = offs
        .iter()
        .zip(&lens)
        .map(|(&o, &l)| ByteRange::new(o, o + l))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Access::from_list(&RangeList::from_ranges(ranges))?)
}

/// Fills `buf` (`len` bytes) with the verifier's tags for the data of one call by `writer`
/// (its `op`-th write) at data offset `skip` of the view (`disp`, `filetype`).
#[no_mangle]
pub extern "C" fn atomio_tag_view(
    writer: u32,
    op: u64,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let out = bytes_mut(buf, len, "buf")?;
        atomio_verify::fill(writer, op, a.ranges(), out)
            .map_err(|e| err(ErrorCode::InvalidArgument, e.to_string()))
    })
}

/// A set of writes and reads to check a file against.
pub struct AtomioVerifier {
    writes: Vec<atomio_verify::Write>,
    reads: Vec<(u32, u64, Access, Vec<u8>)>,
}

/// A new, empty verifier.
#[no_mangle]
pub extern "C" fn atomio_verifier_new(out: *mut *mut AtomioVerifier) -> c_int {
    call(|| {
        let v = Box::new(AtomioVerifier {
            writes: Vec::new(),
            reads: Vec::new(),
        });
        set(out, Box::into_raw(v), "out")
    })
}

fn verifier<'a>(v: *mut AtomioVerifier) -> Result<&'a mut AtomioVerifier, WireError> {
    // SAFETY: the caller passes null or a verifier from `atomio_verifier_new`, not freed,
    // used by one thread at a time.
    unsafe { v.as_mut() }.ok_or_else(|| err(ErrorCode::InvalidArgument, "verifier is null"))
}

/// Records a write: `len` bytes at data offset `skip` of the view, by (`writer`, `op`),
/// whose data came from `atomio_tag_view` with the same arguments.
#[no_mangle]
pub extern "C" fn atomio_verifier_add_write(
    v: *mut AtomioVerifier,
    writer: u32,
    op: u64,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    len: usize,
) -> c_int {
    call(|| {
        let v = verifier(v)?;
        let a = view(disp, filetype, skip, len)?;
        v.writes.push(atomio_verify::Write::new(writer, op, a));
        Ok(())
    })
}

/// Records a read and the `len` bytes it returned.
#[no_mangle]
pub extern "C" fn atomio_verifier_add_read(
    v: *mut AtomioVerifier,
    reader: u32,
    op: u64,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    observed: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let v = verifier(v)?;
        let a = view(disp, filetype, skip, len)?;
        let data = bytes(observed, len, "observed")?.to_vec();
        v.reads.push((reader, op, a, data));
        Ok(())
    })
}

/// Checks the ordinary file at `path` against the recorded operations (see the header).
#[no_mangle]
pub extern "C" fn atomio_verifier_check(
    v: *const AtomioVerifier,
    path: *const c_char,
    atomic: *mut c_int,
    report: *mut c_char,
    cap: usize,
) -> c_int {
    call(|| {
        let v = verifier(v.cast_mut())?;
        let path = text(path, "path")?;
        let f =
            std::fs::File::open(path).map_err(|e| err(ErrorCode::Io, format!("{path}: {e}")))?;
        // The file as its file system holds it, not this client's cache of it (a client of a
        // file system whose clients cache privately may keep pages others wrote since).
        atomio_client::fs_caches::forget_cached(&f, 0, 0)
            .map_err(|e| err(ErrorCode::Io, format!("{path}: {e}")))?;
        let reads: Vec<atomio_verify::Read<'_>> = v
            .reads
            .iter()
            .map(|(r, op, a, d)| atomio_verify::Read::new(*r, *op, a.clone(), &d[..]))
            .collect();
        let rep = atomio_verify::verify(&f, &v.writes, &reads)
            .map_err(|e| err(ErrorCode::InvalidArgument, e.to_string()))?;
        let verdict = match rep.verdict {
            atomio_verify::Verdict::Atomic => 1,
            atomio_verify::Verdict::Violated => 0,
            atomio_verify::Verdict::Inconclusive => -1,
        };
        set(atomic, verdict, "atomic")?;
        if cap > 0 {
            non_null(report, "report")?;
            let text = rep.to_string();
            let n = text.len().min(cap - 1);
            let dst = bytes_mut(report.cast::<c_void>(), cap, "report")?;
            dst[..n].copy_from_slice(&text.as_bytes()[..n]);
            dst[n] = 0;
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn atomio_verifier_free(v: *mut AtomioVerifier) {
    let _ = catch_unwind(AssertUnwindSafe(|| free(v)));
}
