//! The C ABI of atomio (`include/atomio.h`, generated from this file by cbindgen and
//! checked in; a test fails if it is stale).
//!
//! Conventions, for every function:
//! * returns `ATOMIO_OK` (0) or a stable error code (`ATOMIO_E*`, the values of
//!   `atomio_proto::ErrorCode`); the message is in `atomio_last_error()` (thread-local,
//!   valid until the next atomio call on the same thread);
//! * never unwinds into C: a panic is caught and reported as `ATOMIO_EINTERNAL`;
//! * null handles and null pointers where data is required are `ATOMIO_EINVAL`, not crashes;
//! * calls block; a client or file may be used from one thread at a time (calls on one
//!   handle are serialized by a mutex).
//!
//! **This is the only crate with `unsafe`**: turning C pointers and lengths into slices and
//! borrowing a caller's file descriptor. Each `unsafe` block states what the caller promised.

// C callers cannot see Rust's `unsafe fn` marker; the contract (handles come from this
// library and are not used after being freed) is documented per handle, and every pointer
// is checked for null before use.
#![allow(clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

use atomio_client::{Caches, DirectData, File, Placement, Strategy};
use atomio_layout::{Access, Block, ByteRange, Order, Pattern};
use atomio_net::ClusterClient;
use atomio_proto::{ErrorCode, WireError};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

mod intervals;
pub use intervals::*;

pub const ATOMIO_OK: c_int = 0;
pub const ATOMIO_EMALFORMED: c_int = 1;
pub const ATOMIO_EVERSION: c_int = 2;
pub const ATOMIO_EINVAL: c_int = 3;
pub const ATOMIO_ELIMIT: c_int = 4;
pub const ATOMIO_ENOTFOUND: c_int = 5;
pub const ATOMIO_ENOTOWNER: c_int = 6;
pub const ATOMIO_ESTATE: c_int = 7;
pub const ATOMIO_EIO: c_int = 8;
pub const ATOMIO_ETIMEOUT: c_int = 9;
pub const ATOMIO_EDISCONNECTED: c_int = 10;
pub const ATOMIO_EUNSUPPORTED: c_int = 11;
pub const ATOMIO_EINTERNAL: c_int = 12;
pub const ATOMIO_EEXISTS: c_int = 13;
pub const ATOMIO_ELEASE: c_int = 14;
pub const ATOMIO_EAUTH: c_int = 15;
pub const ATOMIO_EABORTED: c_int = 16;
pub const ATOMIO_ELOCKED: c_int = 17;

#[cfg(test)]
mod codes {
    use super::*;

    /// The C constants are literals (cbindgen exports only those); they must stay the
    /// stable wire codes.
    #[test]
    fn c_codes_are_the_wire_codes() {
        let pairs = [
            (ATOMIO_EMALFORMED, ErrorCode::Malformed),
            (ATOMIO_EVERSION, ErrorCode::Version),
            (ATOMIO_EINVAL, ErrorCode::InvalidArgument),
            (ATOMIO_ELIMIT, ErrorCode::LimitExceeded),
            (ATOMIO_ENOTFOUND, ErrorCode::NotFound),
            (ATOMIO_ENOTOWNER, ErrorCode::NotOwner),
            (ATOMIO_ESTATE, ErrorCode::InvalidState),
            (ATOMIO_EIO, ErrorCode::Io),
            (ATOMIO_ETIMEOUT, ErrorCode::Timeout),
            (ATOMIO_EDISCONNECTED, ErrorCode::Disconnected),
            (ATOMIO_EUNSUPPORTED, ErrorCode::Unsupported),
            (ATOMIO_EINTERNAL, ErrorCode::Internal),
            (ATOMIO_EEXISTS, ErrorCode::Exists),
            (ATOMIO_ELEASE, ErrorCode::LeaseExpired),
            (ATOMIO_EAUTH, ErrorCode::Unauthorized),
            (ATOMIO_EABORTED, ErrorCode::Aborted),
            (ATOMIO_ELOCKED, ErrorCode::Locked),
        ];
        for (c, e) in pairs {
            assert_eq!(c, e as c_int, "{e:?}");
        }
    }
}

/// `atomio_open` flag: create the file if it does not exist.
pub const ATOMIO_CREATE: u32 = 1;
/// `atomio_open` flag: with `ATOMIO_CREATE`, fail if it exists.
pub const ATOMIO_EXCL: u32 = 2;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(e: &WireError) -> c_int {
    let msg = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = msg);
    e.code as c_int
}

fn err(code: ErrorCode, msg: impl Into<String>) -> WireError {
    WireError::new(code, msg)
}

/// Runs `f`, turning errors and panics into codes.
fn call(f: impl FnOnce() -> Result<(), WireError>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            LAST_ERROR.with(|l| *l.borrow_mut() = CString::default());
            ATOMIO_OK
        }
        Ok(Err(e)) => set_error(&e),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_error(&err(
                ErrorCode::Internal,
                format!("atomio panicked (a bug): {what}"),
            ))
        }
    }
}

fn ref_or<'a, T>(p: *const T, what: &str) -> Result<&'a T, WireError> {
    // SAFETY: the caller passes either null or a pointer this library returned and has not
    // freed (documented for every handle).
    unsafe { p.as_ref() }.ok_or_else(|| err(ErrorCode::InvalidArgument, format!("{what} is null")))
}

fn mut_or<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, WireError> {
    // SAFETY: as for `ref_or`; handles are not shared between threads without a mutex.
    unsafe { p.as_mut() }.ok_or_else(|| err(ErrorCode::InvalidArgument, format!("{what} is null")))
}

fn str_or<'a>(p: *const c_char, what: &str) -> Result<&'a str, WireError> {
    if p.is_null() {
        return Err(err(ErrorCode::InvalidArgument, format!("{what} is null")));
    }
    // SAFETY: the caller passes a NUL-terminated string that lives for the call.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| err(ErrorCode::InvalidArgument, format!("{what} is not UTF-8")))
}

fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], WireError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(err(ErrorCode::InvalidArgument, format!("{what} is null")));
    }
    // SAFETY: the caller promises `p` points to `n` readable elements for the call.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn slice_mut<'a>(p: *mut c_void, n: usize, what: &str) -> Result<&'a mut [u8], WireError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(err(ErrorCode::InvalidArgument, format!("{what} is null")));
    }
    // SAFETY: the caller promises `p` points to `n` writable bytes for the call, not aliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
}

fn put<T>(out: *mut *mut T, v: T) -> Result<(), WireError> {
    if out.is_null() {
        return Err(err(
            ErrorCode::InvalidArgument,
            "the output pointer is null",
        ));
    }
    // SAFETY: `out` is a valid place for one pointer (checked non-null above).
    unsafe { *out = Box::into_raw(Box::new(v)) };
    Ok(())
}

/// The message of the last failed call on this thread ("" after a success).
#[no_mangle]
pub extern "C" fn atomio_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// A short name for an error code ("ATOMIO_EINVAL", …).
#[no_mangle]
pub extern "C" fn atomio_error_name(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        0 => c"ATOMIO_OK",
        1 => c"ATOMIO_EMALFORMED",
        2 => c"ATOMIO_EVERSION",
        3 => c"ATOMIO_EINVAL",
        4 => c"ATOMIO_ELIMIT",
        5 => c"ATOMIO_ENOTFOUND",
        6 => c"ATOMIO_ENOTOWNER",
        7 => c"ATOMIO_ESTATE",
        8 => c"ATOMIO_EIO",
        9 => c"ATOMIO_ETIMEOUT",
        10 => c"ATOMIO_EDISCONNECTED",
        11 => c"ATOMIO_EUNSUPPORTED",
        13 => c"ATOMIO_EEXISTS",
        14 => c"ATOMIO_ELEASE",
        15 => c"ATOMIO_EAUTH",
        16 => c"ATOMIO_EABORTED",
        17 => c"ATOMIO_ELOCKED",
        _ => c"ATOMIO_EINTERNAL",
    };
    s.as_ptr()
}

// ----- servers in this process -------------------------------------------------------------

/// A server (locks + data) running on a thread of this process.
pub struct AtomioServer {
    address: CString,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts a server on its own thread, listening on `listen` ("127.0.0.1:0" picks a port),
/// keeping data under `data_dir`. `id` is its index in the cluster, or -1.
#[no_mangle]
pub extern "C" fn atomio_server_start(
    listen: *const c_char,
    data_dir: *const c_char,
    id: i64,
    out: *mut *mut AtomioServer,
) -> c_int {
    call(|| {
        let listen = str_or(listen, "listen")?;
        let dir = std::path::PathBuf::from(str_or(data_dir, "data_dir")?);
        let lease_ms =
            atomio_net::lease_ms_from_env().map_err(|m| err(ErrorCode::InvalidArgument, m))?;
        let std_listener = std::net::TcpListener::bind(listen)
            .map_err(|e| err(ErrorCode::Io, format!("binding {listen}: {e}")))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
        let bound = std_listener
            .local_addr()
            .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
        let token = atomio_net::auth::Token::from_env()?;
        atomio_net::auth::check_listen(bound, token.as_ref())?;
        let tls = atomio_net::tls::server_from_env()?;
        let address = bound.to_string();
        let id = u32::try_from(id).ok().map(atomio_layout::ServerId);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("atomio-server".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    tokio::select! {
                        r = atomio_net::run_tcp_server(listener, id, &dir, lease_ms, token, tls) => {
                            if let Err(e) = r { eprintln!("atomio server stopped: {e}"); }
                        }
                        _ = rx => {}
                    }
                });
            })
            .map_err(|e| err(ErrorCode::Io, format!("starting a server thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| err(ErrorCode::Internal, "the server thread died at start"))?
            .map_err(|e| err(ErrorCode::Io, e))?;
        put(
            out,
            AtomioServer {
                address: CString::new(address).expect("addresses have no NUL"),
                shutdown: Some(tx),
                thread: Some(thread),
            },
        )
    })
}

/// The address the server listens on ("127.0.0.1:40123"), owned by the server.
#[no_mangle]
pub extern "C" fn atomio_server_address(server: *const AtomioServer) -> *const c_char {
    ref_or(server, "server").map_or(std::ptr::null(), |s| s.address.as_ptr())
}

/// Stops the server, waits for its thread, and frees it.
#[no_mangle]
pub extern "C" fn atomio_server_stop(server: *mut AtomioServer) -> c_int {
    call(|| {
        if server.is_null() {
            return Ok(());
        }
        // SAFETY: `server` came from `atomio_server_start` and is freed exactly once here.
        let mut s = unsafe { Box::from_raw(server) };
        if let Some(tx) = s.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = s.thread.take() {
            t.join()
                .map_err(|_| err(ErrorCode::Internal, "the server thread panicked"))?;
        }
        Ok(())
    })
}

// ----- clients -----------------------------------------------------------------------------

struct ClientInner {
    rt: tokio::runtime::Runtime,
    client: ClusterClient,
}

/// A connection to every server of a cluster.
pub struct AtomioClient {
    inner: Arc<Mutex<ClientInner>>,
}

fn lock(inner: &Mutex<ClientInner>) -> std::sync::MutexGuard<'_, ClientInner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

/// Connects to the servers `addrs[0..n]` (server i of the cluster is `addrs[i]`).
#[no_mangle]
pub extern "C" fn atomio_connect(
    addrs: *const *const c_char,
    n: usize,
    out: *mut *mut AtomioClient,
) -> c_int {
    call(|| {
        let ptrs = slice(addrs, n, "addrs")?;
        if ptrs.is_empty() {
            return Err(err(
                ErrorCode::InvalidArgument,
                "a cluster needs at least one server",
            ));
        }
        let addrs = ptrs
            .iter()
            .map(|&p| str_or(p, "address").map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
        let client = rt.block_on(ClusterClient::connect_tcp(&addrs))?;
        put(
            out,
            AtomioClient {
                inner: Arc::new(Mutex::new(ClientInner { rt, client })),
            },
        )
    })
}

/// Drops this handle; the connections close when no file opened through it remains.
#[no_mangle]
pub extern "C" fn atomio_disconnect(client: *mut AtomioClient) {
    if !client.is_null() {
        // SAFETY: `client` came from `atomio_connect` and is freed exactly once here.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(client) })));
    }
}

/// Deletes the file at `path` (objects and metadata).
#[no_mangle]
pub extern "C" fn atomio_remove(client: *mut AtomioClient, path: *const c_char) -> c_int {
    call(|| {
        let c = ref_or(client, "client")?;
        let path = str_or(path, "path")?;
        let mut g = lock(&c.inner);
        let ClientInner { rt, client } = &mut *g;
        rt.block_on(client.remove(path))
    })
}

// ----- patterns ----------------------------------------------------------------------------

/// An immutable structured pattern (an MPI-datatype-like description of bytes).
pub struct AtomioPattern(Pattern);

fn pattern_out(
    out: *mut *mut AtomioPattern,
    p: Result<Pattern, atomio_layout::LayoutError>,
) -> Result<(), WireError> {
    put(out, AtomioPattern(p?))
}

/// `len` contiguous bytes.
#[no_mangle]
pub extern "C" fn atomio_pattern_bytes(len: u64, out: *mut *mut AtomioPattern) -> c_int {
    call(|| pattern_out(out, Pattern::bytes(len)))
}

/// `count` blocks `stride` bytes apart, each `blocklen` copies of `elem` (MPI hvector).
#[no_mangle]
pub extern "C" fn atomio_pattern_hvector(
    count: u64,
    blocklen: u64,
    stride: u64,
    elem: *const AtomioPattern,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let e = ref_or(elem, "elem")?;
        pattern_out(out, Pattern::hvector(count, blocklen, stride, &e.0))
    })
}

/// Blocks at byte displacements `disps[i]`, `blocklens[i]` copies of `elem` (MPI hindexed).
#[no_mangle]
pub extern "C" fn atomio_pattern_hindexed(
    n: usize,
    disps: *const u64,
    blocklens: *const u64,
    elem: *const AtomioPattern,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let e = ref_or(elem, "elem")?;
        let d = slice(disps, n, "disps")?;
        let b = slice(blocklens, n, "blocklens")?;
        let blocks = d
            .iter()
            .zip(b)
            .map(|(&disp, &blocklen)| Block { disp, blocklen })
            .collect();
        pattern_out(out, Pattern::hindexed(blocks, &e.0))
    })
}

/// Fields at byte displacements, each `blocklens[i]` copies of `elems[i]` (MPI struct).
#[no_mangle]
pub extern "C" fn atomio_pattern_struct(
    n: usize,
    disps: *const u64,
    blocklens: *const u64,
    elems: *const *const AtomioPattern,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let d = slice(disps, n, "disps")?;
        let b = slice(blocklens, n, "blocklens")?;
        let e = slice(elems, n, "elems")?;
        let pats = e
            .iter()
            .map(|&p| ref_or(p, "element"))
            .collect::<Result<Vec<_>, _>>()?;
        let fields: Vec<(u64, u64, &Pattern)> = (0..n).map(|i| (d[i], b[i], &pats[i].0)).collect();
        pattern_out(out, Pattern::structure(&fields))
    })
}

/// The same data as `elem` with its extent replaced (MPI resized with lower bound 0).
#[no_mangle]
pub extern "C" fn atomio_pattern_resized(
    extent: u64,
    elem: *const AtomioPattern,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let e = ref_or(elem, "elem")?;
        pattern_out(out, Pattern::resized(extent, &e.0))
    })
}

/// An `ndims`-dimensional subarray of `elem` (MPI subarray); `fortran` selects column-major.
#[no_mangle]
pub extern "C" fn atomio_pattern_subarray(
    ndims: usize,
    sizes: *const u64,
    subsizes: *const u64,
    starts: *const u64,
    fortran: c_int,
    elem: *const AtomioPattern,
    out: *mut *mut AtomioPattern,
) -> c_int {
    call(|| {
        let e = ref_or(elem, "elem")?;
        let order = if fortran != 0 {
            Order::Fortran
        } else {
            Order::C
        };
        pattern_out(
            out,
            Pattern::subarray(
                slice(sizes, ndims, "sizes")?,
                slice(subsizes, ndims, "subsizes")?,
                slice(starts, ndims, "starts")?,
                order,
                &e.0,
            ),
        )
    })
}

/// Facts about a pattern: bytes selected, extent, data upper bound, node count, and
/// whether it is monotone (usable as a file view).
#[no_mangle]
pub extern "C" fn atomio_pattern_info(
    p: *const AtomioPattern,
    size: *mut u64,
    extent: *mut u64,
    data_end: *mut u64,
    nodes: *mut u64,
    monotone: *mut c_int,
) -> c_int {
    call(|| {
        let p = &ref_or(p, "pattern")?.0;
        let put_u64 = |dst: *mut u64, v: u64| {
            if let Ok(d) = mut_or(dst, "out") {
                *d = v;
            }
        };
        put_u64(size, p.size());
        put_u64(extent, p.extent());
        put_u64(data_end, p.data_bounds().map_or(0, |(_, ub)| ub));
        put_u64(nodes, p.nodes().len() as u64);
        if let Ok(m) = mut_or(monotone, "monotone") {
            *m = c_int::from(p.monotone());
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn atomio_pattern_free(p: *mut AtomioPattern) {
    if !p.is_null() {
        // SAFETY: `p` came from an `atomio_pattern_*` constructor and is freed once here.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(p) })));
    }
}

/// `count` copies of `memtype` in a buffer of `span` bytes, as one pattern whose runs are the
/// memory pieces in typemap order; checked up front (bytes `len`, last byte inside `span`) so
/// nothing is copied when the call is refused.
fn memory_pattern(
    memtype: &Pattern,
    count: u64,
    span: usize,
    len: usize,
) -> Result<Pattern, WireError> {
    let all = Pattern::hvector(count, 1, memtype.extent(), memtype)?;
    if all.size() != len as u64 {
        return Err(err(
            ErrorCode::InvalidArgument,
            format!(
                "{count} × the memory type is {} bytes, the packed buffer {len}",
                all.size()
            ),
        ));
    }
    if let Some((_, end)) = all.data_bounds().filter(|&(_, end)| end > span as u64) {
        return Err(err(
            ErrorCode::InvalidArgument,
            format!("the memory type reaches byte {end} of a {span}-byte buffer"),
        ));
    }
    Ok(all)
}

/// `memory_pattern` checked the bounds: a run past them is a bug, reported, not a panic.
fn packing(e: atomio_layout::copy::OutOfBounds) -> WireError {
    err(
        ErrorCode::Internal,
        format!("the memory type's runs pass its buffers: {e:?}"),
    )
}

/// Packs `count` copies of `memtype` from `base` (a buffer of `span` bytes) into `out`
/// (`out_len` = count × type size).
#[no_mangle]
pub extern "C" fn atomio_gather(
    memtype: *const AtomioPattern,
    count: u64,
    base: *const c_void,
    span: usize,
    out: *mut c_void,
    out_len: usize,
) -> c_int {
    call(|| {
        let t = &ref_or(memtype, "memtype")?.0;
        let src = slice(base.cast::<u8>(), span, "base")?;
        let dst = slice_mut(out, out_len, "out")?;
        let all = memory_pattern(t, count, span, out_len)?;
        atomio_layout::copy::gather(&all, src, dst).map_err(packing)?;
        Ok(())
    })
}

/// Unpacks `in_len` bytes into `count` copies of `memtype` at `base` (`span` bytes).
#[no_mangle]
pub extern "C" fn atomio_scatter(
    memtype: *const AtomioPattern,
    count: u64,
    input: *const c_void,
    in_len: usize,
    base: *mut c_void,
    span: usize,
) -> c_int {
    call(|| {
        let t = &ref_or(memtype, "memtype")?.0;
        let src = slice(input.cast::<u8>(), in_len, "input")?;
        let dst = slice_mut(base, span, "base")?;
        let all = memory_pattern(t, count, span, in_len)?;
        atomio_layout::copy::scatter(&all, src, dst).map_err(packing)?;
        Ok(())
    })
}

// ----- files -------------------------------------------------------------------------------

/// An open file: on a cluster's data servers, or the user's own file (direct placement).
pub struct AtomioFile {
    /// The lock service (and data servers); `None` for a direct file opened without one.
    client: Option<Arc<Mutex<ClientInner>>>,
    /// Runs the calls of a file without a client (they never wait on the network).
    local_rt: Option<tokio::runtime::Runtime>,
    file: File,
}

/// Opens (with `ATOMIO_CREATE`, creates) the file at `path`. Stripe size and count apply at
/// creation (0 for the defaults: 64 KiB, every server).
#[no_mangle]
pub extern "C" fn atomio_open(
    client: *mut AtomioClient,
    path: *const c_char,
    flags: u32,
    stripe_size: u64,
    stripe_count: u32,
    out: *mut *mut AtomioFile,
) -> c_int {
    call(|| {
        let c = ref_or(client, "client")?;
        let path = str_or(path, "path")?;
        let inner = c.inner.clone();
        let mut g = lock(&inner);
        let ClientInner { rt, client } = &mut *g;
        let info = if flags & ATOMIO_CREATE != 0 {
            let ss = if stripe_size == 0 {
                atomio_layout::DEFAULT_STRIPE_SIZE
            } else {
                stripe_size
            };
            let sc = if stripe_count == 0 {
                client.servers() as u32
            } else {
                stripe_count
            };
            rt.block_on(client.create(path, ss, sc, flags & ATOMIO_EXCL != 0))?
        } else {
            rt.block_on(client.open(path))?
        };
        drop(g);
        put(
            out,
            AtomioFile {
                client: Some(inner),
                local_rt: None,
                file: File::from_info(info),
            },
        )
    })
}

/// `atomio_open_direct` flag: treat the file system's clients as caching without coherence
/// (NFS, FUSE), whatever detection found: flush before every release, drop cached pages and
/// fetch the size after every acquire, never map. Without any `ATOMIO_CACHES_*` flag the
/// file system is detected (see `atomio_fs_caches`).
pub const ATOMIO_CACHES_PRIVATE: u32 = 4;
/// `atomio_open_direct` flag: open the file read-only.
pub const ATOMIO_RDONLY: u32 = 8;
/// `atomio_open_direct` flag: take the file's locks in this host's shared lock table, not
/// on the lock servers (no round trip per call). Every process that opens the file must run
/// on this host and pass it too: the table and the servers do not see each other's locks.
pub const ATOMIO_HOST_LOCKS: u32 = 16;
/// `atomio_open_direct` flag: treat the file system's client caches as kept coherent by the
/// file system (Lustre, GPFS), whatever detection found: no mapping, no flushes or drops.
pub const ATOMIO_CACHES_COHERENT: u32 = 32;
/// `atomio_open_direct` flag: treat the file as one page cache shared by every process
/// (a local file system), whatever detection found: small pieces may go through a mapping.
pub const ATOMIO_CACHES_SHARED: u32 = 64;

/// `atomio_fs_caches` result: one page cache for every process (local file systems).
pub const ATOMIO_FS_SHARED: c_int = 0;
/// `atomio_fs_caches` result: per-client caches the file system keeps coherent.
pub const ATOMIO_FS_COHERENT: c_int = 1;
/// `atomio_fs_caches` result: per-client caches without coherence (NFS, FUSE, unknown).
pub const ATOMIO_FS_PRIVATE: c_int = 2;

fn caches_code(c: Caches) -> c_int {
    match c {
        Caches::Shared => ATOMIO_FS_SHARED,
        Caches::Coherent => ATOMIO_FS_COHERENT,
        Caches::Private => ATOMIO_FS_PRIVATE,
    }
}

/// The override an `atomio_open_direct` flag asks for, if any.
fn caches_flag(flags: u32) -> Option<Caches> {
    if flags & ATOMIO_CACHES_PRIVATE != 0 {
        Some(Caches::Private)
    } else if flags & ATOMIO_CACHES_COHERENT != 0 {
        Some(Caches::Coherent)
    } else if flags & ATOMIO_CACHES_SHARED != 0 {
        Some(Caches::Shared)
    } else {
        None
    }
}

/// Forgets this client's cached pages of the open file `fd` that hold any byte of
/// `[start, start + len)` (`len` 0: to the end) and fetches its size from the file system,
/// as a reader must on a file system whose clients cache privately (see
/// `atomio_fs_caches`) before trusting what it reads.
#[no_mangle]
pub extern "C" fn atomio_forget_cached(fd: c_int, start: u64, len: u64) -> c_int {
    call(|| {
        let f = borrowed_fd(fd)?;
        atomio_client::fs_caches::forget_cached(&f, start, len)
            .map(|_| ())
            .map_err(|e| err(ErrorCode::Io, format!("forgetting cached pages: {e}")))
    })
}

/// What the open file `fd` lives on: `*caches` = `ATOMIO_FS_SHARED|COHERENT|PRIVATE` and, if
/// `name` is not NULL, the file system's name (`ext4`, `fuse.glusterfs`, …) as a
/// NUL-terminated string in `name[0..name_len]` (cut to fit). `override_` (NULL: none; else
/// `shared`, `coherent` or `private`) wins over the environment's `ATOMIO_FS_CACHES`, which
/// wins over detection.
#[no_mangle]
pub extern "C" fn atomio_fs_caches(
    fd: c_int,
    override_: *const c_char,
    caches: *mut c_int,
    name: *mut c_char,
    name_len: usize,
) -> c_int {
    call(|| {
        let f = borrowed_fd(fd)?;
        let forced = if override_.is_null() {
            None
        } else {
            Some(str_or(override_, "override")?)
        };
        if let Some(v) = forced {
            if Caches::parse(v).is_none() {
                return Err(err(
                    ErrorCode::InvalidArgument,
                    format!("file system caches \"{v}\": want shared, coherent or private"),
                ));
            }
        }
        let info = match forced {
            Some(v) => atomio_client::fs_caches::detect(&f, Some(v)),
            None => atomio_client::fs_caches::detect_env(&f),
        };
        *mut_or(caches, "caches")? = caches_code(info.caches);
        if !name.is_null() && name_len > 0 {
            let bytes = info.name.as_bytes();
            let n = bytes.len().min(name_len - 1);
            let out = slice_mut(name.cast::<c_void>(), name_len, "name")?;
            out[..n].copy_from_slice(&bytes[..n]);
            out[n] = 0;
        }
        Ok(())
    })
}

/// Opens (with `ATOMIO_CREATE`, creates) the user's ordinary file at `path` in direct
/// mode: its bytes stay in that file, written with positioned I/O under atomio's locks;
/// `client` provides the lock service (NULL for strategies that need none: "none",
/// "posix-fcntl", "romio"). Nothing is copied at open or close.
#[no_mangle]
pub extern "C" fn atomio_open_direct(
    client: *mut AtomioClient,
    path: *const c_char,
    flags: u32,
    out: *mut *mut AtomioFile,
) -> c_int {
    call(|| {
        let path = str_or(path, "path")?;
        let client = if client.is_null() {
            None
        } else {
            Some(ref_or(client, "client")?.inner.clone())
        };
        let local_rt = match client {
            Some(_) => None,
            None => Some(
                tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|e| err(ErrorCode::Io, e.to_string()))?,
            ),
        };
        let mut data = DirectData::open_mode(
            std::path::Path::new(path),
            flags & ATOMIO_CREATE != 0,
            flags & ATOMIO_RDONLY == 0,
        )?;
        if let Some(c) = caches_flag(flags) {
            data.set_caches(c);
        }
        let mut file = File::direct(data);
        if flags & ATOMIO_HOST_LOCKS != 0 {
            file.use_host_locks()?;
        }
        put(
            out,
            AtomioFile {
                client,
                local_rt,
                file,
            },
        )
    })
}

/// Whether the server file's atomic writes are all-or-nothing (`on` != 0, the default:
/// staged at every server, committed at one, so a writer killed mid-call leaves its write
/// whole or absent). Turn it off only for a copy whose bytes count once a collective step
/// exports them (see `File::set_all_or_nothing`). Direct files: no effect.
#[no_mangle]
pub extern "C" fn atomio_set_all_or_nothing(file: *mut AtomioFile, on: c_int) -> c_int {
    call(|| {
        mut_or(file, "file")?.file.set_all_or_nothing(on != 0);
        Ok(())
    })
}

/// Closes (frees) the file handle.
#[no_mangle]
pub extern "C" fn atomio_close(file: *mut AtomioFile) -> c_int {
    call(|| {
        if !file.is_null() {
            // SAFETY: `file` came from `atomio_open` and is freed exactly once here.
            drop(unsafe { Box::from_raw(file) });
        }
        Ok(())
    })
}

/// Whether strategy `name` runs on the user's own file (direct placement): `*out` = 1, or
/// 0 when it runs only on atomio's data servers (the cached-lock DLMs: `seqdlm…`,
/// `dlm-basic`, `dlm-lustre`). An unknown name is `ATOMIO_EINVAL`.
#[no_mangle]
pub extern "C" fn atomio_strategy_direct(name: *const c_char, out: *mut c_int) -> c_int {
    call(|| {
        let s = str_or(name, "strategy")?
            .parse::<Strategy>()
            .map_err(|e| err(ErrorCode::InvalidArgument, e))?;
        *mut_or(out, "out")? = c_int::from(s.supports(atomio_client::PlacementKind::Direct));
        Ok(())
    })
}

/// Atomic mode with a strategy by name ("ching:datatype:one-try", …); NULL or "none": off.
#[no_mangle]
pub extern "C" fn atomio_set_atomic(file: *mut AtomioFile, strategy: *const c_char) -> c_int {
    call(|| {
        let f = mut_or(file, "file")?;
        let s = if strategy.is_null() {
            None
        } else {
            Some(
                str_or(strategy, "strategy")?
                    .parse::<Strategy>()
                    .map_err(|e| err(ErrorCode::InvalidArgument, e))?,
            )
        };
        f.file.set_atomic(s)
    })
}

/// 1 if atomic mode is on, else 0.
#[no_mangle]
pub extern "C" fn atomio_get_atomic(file: *const AtomioFile) -> c_int {
    ref_or(file, "file").map_or(0, |f| c_int::from(f.file.atomic().is_some()))
}

fn with_file<T>(
    file: *mut AtomioFile,
    f: impl AsyncFnOnce(&mut File, Option<&mut ClusterClient>) -> Result<T, WireError>,
) -> Result<T, WireError> {
    let h = mut_or(file, "file")?;
    match (&h.client, &h.local_rt) {
        (Some(inner), _) => {
            let inner = inner.clone();
            let mut g = lock(&inner);
            let ClientInner { rt, client } = &mut *g;
            rt.block_on(f(&mut h.file, Some(client)))
        }
        (None, Some(rt)) => rt.block_on(f(&mut h.file, None)),
        (None, None) => Err(err(
            ErrorCode::Internal,
            "a file with neither client nor runtime",
        )),
    }
}

fn list_access(n: usize, offsets: *const u64, lengths: *const u64) -> Result<Access, WireError> {
    let o = slice(offsets, n, "offsets")?;
    let l = slice(lengths, n, "lengths")?;
    let ranges = o
        .iter()
        .zip(l)
        .map(|(&off, &len)| ByteRange::at(off, len))
        .collect::<Result<Vec<_>, _>>()?;
    let list = atomio_layout::RangeList::from_disjoint_sorted(&ranges)?;
    if list.is_empty() {
        return Err(err(
            ErrorCode::InvalidArgument,
            "an I/O call needs at least one range",
        ));
    }
    Ok(Access::from_list(&list)?)
}

/// Writes `len` bytes to the ranges (offsets[i], lengths[i]) — non-empty, increasing,
/// non-overlapping — atomically in atomic mode.
#[no_mangle]
pub extern "C" fn atomio_write_list(
    file: *mut AtomioFile,
    n: usize,
    offsets: *const u64,
    lengths: *const u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = list_access(n, offsets, lengths)?;
        let data = slice(buf.cast::<u8>(), len, "buf")?;
        with_file(file, async |f, c| f.write_via(c, &a, data).await)
    })
}

/// Reads the ranges into `buf` (`len` bytes), atomically in atomic mode.
#[no_mangle]
pub extern "C" fn atomio_read_list(
    file: *mut AtomioFile,
    n: usize,
    offsets: *const u64,
    lengths: *const u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = list_access(n, offsets, lengths)?;
        let out = slice_mut(buf, len, "buf")?;
        with_file(file, async |f, c| f.read_via(c, &a, out).await)
    })
}

fn view(
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    len: usize,
) -> Result<Access, WireError> {
    let t = &ref_or(filetype, "filetype")?.0;
    Ok(Access::view_window(disp, t, skip, len as u64)?)
}

/// Writes `len` bytes at data offset `skip` of the file view (`disp`, `filetype` tiled):
/// the bytes of one MPI-IO call, structure kept.
#[no_mangle]
pub extern "C" fn atomio_write_view(
    file: *mut AtomioFile,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let data = slice(buf.cast::<u8>(), len, "buf")?;
        with_file(file, async |f, c| f.write_via(c, &a, data).await)
    })
}

/// Reads `len` bytes at data offset `skip` of the file view into `buf`.
#[no_mangle]
pub extern "C" fn atomio_read_view(
    file: *mut AtomioFile,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let out = slice_mut(buf, len, "buf")?;
        with_file(file, async |f, c| f.read_via(c, &a, out).await)
    })
}

/// Makes the file durable on every server.
#[no_mangle]
pub extern "C" fn atomio_sync(file: *mut AtomioFile) -> c_int {
    call(|| with_file(file, async |f, c| f.sync(c).await))
}

/// Gives back every cached lock of this process's cached-lock DLM client (`seqdlm`,
/// `dlm-basic`, `dlm-lustre`), its cached bytes flushed to the servers first; nothing to do
/// for other strategies. Readers that take no DLM locks (an export) see those bytes only
/// after every writer did this.
#[no_mangle]
pub extern "C" fn atomio_flush(file: *mut AtomioFile) -> c_int {
    call(|| with_file(file, async |f, _c| f.flush_cache().await))
}

/// The file's strategy is `versioning` (`what` names the call in the error otherwise).
fn versioning(f: &File, what: &str) -> Result<(), WireError> {
    if f.atomic().is_some_and(|s| s.is_versioning()) {
        return Ok(());
    }
    Err(err(
        ErrorCode::InvalidArgument,
        format!("{what}: snapshots exist only for files in atomic mode with strategy versioning"),
    ))
}

/// `versioning`: writes the newest published snapshot's bytes into the file's base (the
/// user's file in direct placement, the server file's objects otherwise), so that the base
/// alone holds the file as every version made it. Nothing to do for other strategies (or
/// with atomic mode off). Idempotent. Run it in ONE process after every writer's calls
/// returned (like an export): two materializations running at once may leave the older
/// snapshot's bytes in the base. Snapshots older than the one written become unreadable.
#[no_mangle]
pub extern "C" fn atomio_materialize(file: *mut AtomioFile) -> c_int {
    call(|| {
        with_file(file, async |f, c| {
            if versioning(f, "atomio_materialize").is_err() {
                return Ok(());
            }
            let c = c.ok_or_else(|| {
                err(
                    ErrorCode::InvalidArgument,
                    "atomio_materialize: versioning needs a connection to atomio servers",
                )
            })?;
            f.materialize(c).await
        })
    })
}

/// `versioning`: reads the ranges (as `atomio_read_list`) as published snapshot `version`
/// has them — any version still kept, not only the newest. Version 0 (the file before any
/// version) is not a snapshot: `ATOMIO_EINVAL`. A version that was garbage-collected, is
/// older than the one last materialized (the base no longer holds its unwritten bytes), is
/// not assigned yet, or is still in flight: `ATOMIO_ENOTFOUND`; one that was aborted:
/// `ATOMIO_EABORTED` (the message says which). Other strategies: `ATOMIO_EINVAL`.
#[no_mangle]
pub extern "C" fn atomio_read_version(
    file: *mut AtomioFile,
    version: u64,
    n: usize,
    offsets: *const u64,
    lengths: *const u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        if version == 0 {
            return Err(err(
                ErrorCode::InvalidArgument,
                "atomio_read_version: version 0 is the file before any version, not a \
                 snapshot (versions start at 1)",
            ));
        }
        let a = list_access(n, offsets, lengths)?;
        let out = slice_mut(buf, len, "buf")?;
        with_file(file, async |f, c| {
            versioning(f, "atomio_read_version")?;
            let c = c.ok_or_else(|| {
                err(
                    ErrorCode::InvalidArgument,
                    "atomio_read_version: versioning needs a connection to atomio servers",
                )
            })?;
            f.read_snapshot(c, Some(version), &a, out, false).await
        })
    })
}

/// `versioning`: the newest published version (0: none yet) into `*out`. Later versions
/// may be in flight; every write call that returned before this call began is in it or
/// below it. Other strategies: `ATOMIO_EINVAL`.
#[no_mangle]
pub extern "C" fn atomio_latest_version(file: *mut AtomioFile, out: *mut u64) -> c_int {
    call(|| {
        let out = mut_or(out, "out")?;
        let v = with_file(file, async |f, c| {
            versioning(f, "atomio_latest_version")?;
            let c = c.ok_or_else(|| {
                err(
                    ErrorCode::InvalidArgument,
                    "atomio_latest_version: versioning needs a connection to atomio servers",
                )
            })?;
            // Published in order, so the newest published record is the published version
            // (garbage collection always keeps it).
            Ok(f.list_versions(c)
                .await?
                .iter()
                .filter(|r| r.state == atomio_version::VersionState::Published)
                .map(|r| r.version)
                .max()
                .unwrap_or(0))
        })?;
        *out = v;
        Ok(())
    })
}

/// The file's size in bytes.
#[no_mangle]
pub extern "C" fn atomio_size(file: *mut AtomioFile, out: *mut u64) -> c_int {
    call(|| {
        let size = with_file(file, async |f, c| f.size(c).await)?;
        *mut_or(out, "out")? = size;
        Ok(())
    })
}

/// Truncates or zero-extends the file to `size` bytes.
#[no_mangle]
pub extern "C" fn atomio_set_size(file: *mut AtomioFile, size: u64) -> c_int {
    call(|| with_file(file, async |f, c| f.set_size(c, size).await))
}

/// The newest published snapshot of a `versioning` file (version, size), or `None` when the
/// file is not versioned or has no version yet (its base is then all of it).
async fn newest_snapshot(
    f: &mut File,
    c: &mut ClusterClient,
) -> Result<Option<(u64, u64)>, WireError> {
    if versioning(f, "export").is_err() {
        return Ok(None);
    }
    let newest = f
        .list_versions(c)
        .await?
        .into_iter()
        .filter(|r| r.state == atomio_version::VersionState::Published)
        .max_by_key(|r| r.version);
    let Some(r) = newest else { return Ok(None) };
    let base = match f.placement() {
        Placement::Direct(d) => d.size()?,
        Placement::Servers(info) => c.size(info).await?,
    };
    Ok(Some((r.version, r.size.max(base))))
}

/// Writes `size` bytes of snapshot `version` to the new ordinary file `path`.
async fn export_snapshot(
    f: &mut File,
    c: &mut ClusterClient,
    version: u64,
    size: u64,
    path: &str,
) -> Result<(), WireError> {
    let out =
        std::fs::File::create(path).map_err(|e| err(ErrorCode::Io, format!("{path}: {e}")))?;
    out.set_len(size)
        .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
    const CHUNK: u64 = 64 << 20;
    let mut at = 0;
    while at < size {
        let end = (at + CHUNK).min(size);
        let mut buf = vec![0u8; (end - at) as usize];
        let a = Access::contiguous(ByteRange::new(at, end)?)?;
        f.read_snapshot(c, Some(version), &a, &mut buf, true)
            .await?;
        out.write_all_at(&buf, at)
            .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
        at = end;
    }
    out.sync_all()
        .map_err(|e| err(ErrorCode::Io, e.to_string()))
}

/// Writes the file's logical bytes to `out_path` as one ordinary file. For a `versioning`
/// file: its newest published snapshot (one version throughout, whatever is written
/// meanwhile), the base under what no version wrote.
#[no_mangle]
pub extern "C" fn atomio_export(file: *mut AtomioFile, out_path: *const c_char) -> c_int {
    call(|| {
        let path = str_or(out_path, "out_path")?.to_string();
        with_file(file, async |f, mut c| {
            if let Placement::Direct(d) = f.placement() {
                let same = std::fs::canonicalize(&path)
                    .ok()
                    .zip(std::fs::canonicalize(d.path()).ok())
                    .is_some_and(|(a, b)| a == b);
                if same {
                    return Err(err(
                        ErrorCode::InvalidArgument,
                        format!(
                            "exporting {path} onto itself (atomio_materialize writes a \
                                 versioning file's snapshot into it)"
                        ),
                    ));
                }
            }
            if let Some(c) = c.as_deref_mut() {
                if let Some((version, size)) = newest_snapshot(f, c).await? {
                    return export_snapshot(f, c, version, size, &path).await;
                }
            }
            let info = match f.placement() {
                Placement::Direct(d) => {
                    std::fs::copy(d.path(), &path)
                        .map_err(|e| err(ErrorCode::Io, format!("{path}: {e}")))?;
                    return Ok(());
                }
                Placement::Servers(info) => info.clone(),
            };
            // What a DLM client still caches is part of the file.
            f.flush_cache().await?;
            let c = c.ok_or_else(|| err(ErrorCode::Internal, "a server file without a client"))?;
            let size = c.size(&info).await?;
            let out = std::fs::File::create(&path)
                .map_err(|e| err(ErrorCode::Io, format!("{path}: {e}")))?;
            out.set_len(size)
                .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
            const CHUNK: u64 = 64 << 20;
            let mut at = 0;
            while at < size {
                let end = (at + CHUNK).min(size);
                let mut buf = vec![0u8; (end - at) as usize];
                c.read_ranges(&info, std::iter::once(ByteRange::new(at, end)?), &mut buf)
                    .await?;
                out.write_all_at(&buf, at)
                    .map_err(|e| err(ErrorCode::Io, e.to_string()))?;
                at = end;
            }
            out.sync_all()
                .map_err(|e| err(ErrorCode::Io, e.to_string()))
        })
    })
}

fn borrowed_fd(fd: c_int) -> Result<std::mem::ManuallyDrop<std::fs::File>, WireError> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(err(
            ErrorCode::InvalidArgument,
            format!("file descriptor {fd}"),
        ));
    }
    // SAFETY: the caller owns `fd` and keeps it open for the call; ManuallyDrop never closes it.
    Ok(std::mem::ManuallyDrop::new(unsafe {
        std::fs::File::from_raw_fd(fd)
    }))
}

/// For strategies that need no servers (rma): `pwrite`s `len` bytes of one MPI-IO call,
/// at data offset `skip` of the view (`disp`, `filetype`), into the ordinary file `fd`, one
/// `pwrite` per contiguous run (the caller holds whatever lock the strategy needs; see
/// `atomio_view_hull`).
#[no_mangle]
pub extern "C" fn atomio_posix_write_view(
    fd: c_int,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    buf: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let data = slice(buf.cast::<u8>(), len, "buf")?;
        let f = borrowed_fd(fd)?;
        let mut at = 0usize;
        for r in a.ranges() {
            let n = r.len() as usize;
            f.write_all_at(&data[at..at + n], r.start)
                .map_err(|e| err(ErrorCode::Io, format!("pwrite at {}: {e}", r.start)))?;
            at += n;
        }
        Ok(())
    })
}

/// `pread`s `len` bytes of one MPI-IO call at data offset `skip` of the view from `fd`;
/// bytes past the end of the file read as zero.
#[no_mangle]
pub extern "C" fn atomio_posix_read_view(
    fd: c_int,
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    buf: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let out = slice_mut(buf, len, "buf")?;
        let f = borrowed_fd(fd)?;
        let mut at = 0usize;
        for r in a.ranges() {
            let n = r.len() as usize;
            let dst = &mut out[at..at + n];
            let mut done = 0;
            while done < n {
                match f.read_at(&mut dst[done..], r.start + done as u64) {
                    Ok(0) => {
                        dst[done..].fill(0);
                        break;
                    }
                    Ok(k) => done += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(err(ErrorCode::Io, format!("pread at {}: {e}", r.start))),
                }
            }
            at += n;
        }
        Ok(())
    })
}

/// The first and one-past-last byte a view call touches (what the rma strategy locks).
#[no_mangle]
pub extern "C" fn atomio_view_hull(
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    len: usize,
    start: *mut u64,
    end: *mut u64,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let h = a
            .hull()
            .ok_or_else(|| err(ErrorCode::InvalidArgument, "empty call"))?;
        *mut_or(start, "start")? = h.start;
        *mut_or(end, "end")? = h.end;
        Ok(())
    })
}

/// The file ranges of one MPI-IO call (data bytes `[skip, skip + len)` of the view), in
/// increasing order, adjacent ranges merged: the first `cap` go to `offsets`/`lengths` and
/// `*n` is how many there are (call again with `cap >= *n` if it is larger).
#[no_mangle]
pub extern "C" fn atomio_view_runs(
    disp: u64,
    filetype: *const AtomioPattern,
    skip: u64,
    len: usize,
    offsets: *mut u64,
    lengths: *mut u64,
    cap: usize,
    n: *mut usize,
) -> c_int {
    call(|| {
        let a = view(disp, filetype, skip, len)?;
        let bytes = cap
            .checked_mul(8)
            .ok_or_else(|| err(ErrorCode::InvalidArgument, "cap overflows"))?;
        let offs = slice_mut(offsets.cast(), bytes, "offsets")?;
        let lens = slice_mut(lengths.cast(), bytes, "lengths")?;
        let mut count = 0usize;
        let mut last: Option<(u64, u64)> = None;
        let mut emit = |(s, e): (u64, u64), count: &mut usize| {
            if *count < cap {
                offs[*count * 8..*count * 8 + 8].copy_from_slice(&s.to_ne_bytes());
                lens[*count * 8..*count * 8 + 8].copy_from_slice(&(e - s).to_ne_bytes());
            }
            *count += 1;
        };
        for r in a.ranges() {
            last = match last {
                Some((s, e)) if e == r.start => Some((s, r.end)),
                Some(run) => {
                    emit(run, &mut count);
                    Some((r.start, r.end))
                }
                None => Some((r.start, r.end)),
            };
        }
        if let Some(run) = last {
            emit(run, &mut count);
        }
        *mut_or(n, "n")? = count;
        Ok(())
    })
}

/// How many data bytes of the view (`disp`, `filetype` tiled) lie at file offsets below
/// `limit` (MPI-IO's end-of-file position in a view: `MPI_SEEK_END`, `MPI_MODE_APPEND`,
/// the count of a read that reaches the end of the file). Arithmetic, not iteration.
#[no_mangle]
pub extern "C" fn atomio_view_data_before(
    disp: u64,
    filetype: *const AtomioPattern,
    limit: u64,
    out: *mut u64,
) -> c_int {
    call(|| {
        let t = &ref_or(filetype, "filetype")?.0;
        let n = Access::view_data_before(disp, t, limit)?;
        *mut_or(out, "out")? = n;
        Ok(())
    })
}
