//! Every bound atomio enforces on input, in one place. Servers check these before doing
//! work, so a hostile or buggy peer gets an error instead of an unbounded queue or loop.

/// Largest frame (version byte + body) accepted in either direction.
pub const MAX_FRAME_BYTES: usize = 64 << 20;
/// Most explicit ranges in one lock request (the list method splits at 64 by default).
pub const MAX_RANGES_PER_REQUEST: usize = 4096;
/// Most contiguous runs a structured (datatype) lock description may expand to.
pub const MAX_RUNS_PER_PATTERN: u64 = 1 << 24;
/// Most live lock requests one client may have at one server (the posix method makes one
/// request per contiguous piece: 128Ki in the paper's lock test).
pub const MAX_REQUESTS_PER_CLIENT: usize = 1 << 20;
/// Most requests blocked in a server's wait queues at once.
pub const MAX_WAITING_REQUESTS: usize = 1 << 16;
/// Most of those one client may have: a lock operation waits at one sub-request at a time,
/// so a client needs few; the cap keeps one client from taking every wait slot.
pub const MAX_WAITING_PER_CLIENT: usize = 1 << 10;
/// Most granted byte-range locks a server holds at once (about 60 B of memory each).
pub const MAX_LOCKS_PER_SERVER: usize = 1 << 25;
/// Most of those one client may hold at one server (~250 MiB): a read lock over a
/// structured access holds one entry per separate range, so without a share one client's
/// few requests could take the whole table (and gigabytes). Write locks rarely come near:
/// a request's touching grants share one entry.
pub const MAX_LOCKS_PER_CLIENT: usize = 1 << 21;
/// Most client connections a server serves at once.
pub const MAX_CLIENTS_PER_SERVER: usize = 4096;
/// Most TCP connections from one host (IP address) a server serves at once, so one host
/// cannot take every slot (a process needs two per server: requests and lease renewals;
/// 1024 is 512 processes per node). `ATOMIO_MAX_CONNECTIONS_PER_HOST` lowers or raises it.
pub const MAX_CONNECTIONS_PER_HOST: usize = 1024;
/// Bytes of replies one TCP client may have coming (expected for requests in progress, or
/// queued unwritten) before the server stops reading its requests until it reads its
/// replies: a client that never reads costs the server at most this (`reply_budget` in
/// atomio-net). Two full frames, so one client still keeps a read in flight while the
/// previous reply drains.
pub const MAX_QUEUED_REPLY_BYTES: usize = 2 * MAX_FRAME_BYTES;
/// Most object pieces in one data request.
pub const MAX_PIECES_PER_REQUEST: usize = 1 << 16;
/// Longest file path accepted.
pub const MAX_PATH_BYTES: usize = 4096;
/// Most staged (not yet decided) write pieces one client may have at one server: an
/// all-or-nothing write stages one record per object message, so a client needs a few per
/// call in flight; the cap keeps one client from filling a server's staging area.
pub const MAX_STAGED_PER_CLIENT: usize = 1 << 14;
/// Most decisions a server keeps for the writes it decides. Committed ones are forgotten
/// once their writer says they are settled; `Resolve` of a write never decided records it
/// aborted (needed: its writer may still be staging it), so without a bound any peer could
/// grow the table by asking about made-up writes. Past it, such a `Resolve` is refused.
pub const MAX_DECISIONS_PER_SERVER: usize = 1 << 20;
/// Most cached DLM locks (granted or requested) one client may have at one server: a
/// client caches a few locks per object it writes, so the bound only stops a client that
/// never gives locks back from growing the server's tables.
pub const MAX_DLM_GRANTS_PER_CLIENT: usize = 1 << 16;
/// Most DLM lock resources (objects with locks) a server keeps at once.
pub const MAX_DLM_RESOURCES: usize = 1 << 18;
/// Most items in one list of a message that carries no payload of its own: tree nodes put,
/// node keys asked or dropped, versions, a pattern's nodes (`MAX_PATTERN_ITEMS`). Checked
/// while decoding (`bounded`), from the list's length, before anything is allocated.
pub const MAX_NODES_PER_REQUEST: usize = atomio_layout::MAX_PATTERN_ITEMS;
/// Most object servers one layout names (`atomio_layout::MAX_STRIPE_COUNT`).
pub const MAX_OBJECT_SERVERS: usize = atomio_layout::MAX_STRIPE_COUNT;
/// Largest frame of each kind, checked from its first bytes before the rest is buffered
/// (`frame::max_request_frame`): messages with payload (writes, staged writes, flushes,
/// tree nodes) may fill `MAX_FRAME_BYTES`; lock requests (a pattern of up to 2^20 items)
/// and lists of node keys or ranges `MAX_LIST_FRAME_BYTES`; everything else
/// `MAX_CONTROL_FRAME_BYTES` (a read of 2^16 pieces is ~1.3 MB).
pub const MAX_LIST_FRAME_BYTES: usize = 24 << 20;
pub const MAX_CONTROL_FRAME_BYTES: usize = 4 << 20;
