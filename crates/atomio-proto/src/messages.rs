//! The messages of the wire protocol.
//!
//! Wire types are *raw*: they decode whatever numbers a peer sent, and the receiver
//! validates them with `validate` methods that return a precise `WireError`. (Validating
//! inside the decoder would reduce every bad value to "malformed frame".)
//!
//! Every client frame carries a `tag` chosen by the client; the reply to it carries the same
//! tag, however much later it comes (a blocked lock acquire is answered when granted).
//! Server-initiated messages (revocations, in later protocols) use tags the client never
//! issued, so both directions are first-class.

mod desc;

pub use desc::*;

use crate::error::WireError;
use atomio_layout::{ByteRange, RangeList, ServerId};
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub u64);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}#{}", stringify!($name), self.0)
            }
        }
    };
}

id_type!(
    /// A file, as the lock and data services name it.
    FileId
);
id_type!(
    /// A lock request at one server, assigned by that server.
    LockId
);
id_type!(
    /// A client session (one connection) at one server, assigned by the server's driver.
    ClientId
);

/// Shared-reader / single-writer byte-range lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockMode {
    Read,
    Write,
}

impl LockMode {
    pub fn conflicts_with(self, other: LockMode) -> bool {
        matches!((self, other), (LockMode::Write, _) | (_, LockMode::Write))
    }
}

/// How far an acquire may go and whether it may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wait {
    /// Grant in offset order as far as possible without waiting; reply at once.
    NonBlocking,
    /// Grant every byte of the request below this absolute offset, waiting for conflicting
    /// locks as needed; reply when done.
    Until(u64),
    /// Grant the whole request, waiting as needed; reply when done.
    All,
}

/// Client → server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Open a new lock request and acquire as `wait` says.
    LockNew {
        file: FileId,
        mode: LockMode,
        desc: LockDesc,
        wait: Wait,
    },
    /// Continue acquiring an existing request.
    LockMore { lock: LockId, wait: Wait },
    /// Release the request's locks at and after `from` (partial release: the request stays
    /// open), or all of them and close it (`from: None`).
    LockRelease { lock: LockId, from: Option<u64> },
    /// Liveness check.
    Ping { nonce: u64 },
    /// Opens a lease session on this connection: answered `Session` (the client id the
    /// server gave this connection, the proof that renews it, the lease length).
    Hello,
    /// Renews `client`'s lease (sent by a client's lease keeper on a connection of its own,
    /// so renewals go on while the client's main thread is busy in local I/O). `proof` is
    /// what `Session` returned; a lapsed lease is never renewed.
    Renew { client: ClientId, proof: u64 },
    /// Create a file (sent to its metadata server). Returns the existing file unless
    /// `exclusive`, in which case an existing path is an error.
    Create {
        path: String,
        stripe_size: u64,
        #[serde(deserialize_with = "crate::bounded::servers")]
        object_servers: Vec<ServerId>,
        exclusive: bool,
    },
    /// Look a file up by path (at its metadata server).
    Open { path: String },
    /// Forget a file's metadata (at its metadata server).
    Remove { path: String },
    /// Delete every object of a file held by this server.
    DropObjects { file: FileId },
    /// Write `data` into the pieces of one object, in order.
    /// `striping`: how the file maps onto its objects, so the server can check the write
    /// against the locks other clients hold (mandatory locks).
    Write {
        file: FileId,
        object: u32,
        striping: crate::data::Striping,
        #[serde(deserialize_with = "crate::bounded::pieces")]
        pieces: Vec<crate::data::ObjPiece>,
        data: crate::data::Bytes,
    },
    /// Read the pieces of one object (holes read as zeros).
    Read {
        file: FileId,
        object: u32,
        #[serde(deserialize_with = "crate::bounded::pieces")]
        pieces: Vec<crate::data::ObjPiece>,
    },
    /// Make every object of the file held by this server durable (fsync).
    Sync { file: FileId },
    /// Sizes of the file's objects held by this server.
    ObjectSizes { file: FileId },
    /// Truncate or extend (with zeros) one object to `size` bytes.
    SetObjectSize {
        file: FileId,
        object: u32,
        size: u64,
    },
    /// Where this server keeps object files, for clients on the same host that move bytes
    /// through the files themselves instead of messages (answered `Located`).
    Locate,
    /// Opens authentication on a new connection (its first frame when the client has a
    /// token): answered `Challenge` by a server that requires a token, `Done` by one that
    /// does not.
    AuthStart,
    /// Answers `Challenge`: HMAC-SHA256 of the challenge under the shared token; answered
    /// `Done`, or `Unauthorized` and the connection is closed.
    Auth { mac: [u8; 32] },
    /// The server's state for operators (answered `Stats`): lock table, waiters, leases,
    /// queue depths. Served by the lock actor, so it answers even while data I/O is slow.
    Stats,
    // Appended (existing variants keep their wire numbers):
    /// All-or-nothing write, step 1 at every participant: keep `data` for the pieces of one
    /// object *staged* (durable, invisible) under `txn`. `decider`: the server that decides
    /// the write, `None` at the decider itself. Answered `Written`.
    Stage {
        txn: crate::data::TxnId,
        decider: Option<ServerId>,
        file: FileId,
        object: u32,
        striping: crate::data::Striping,
        #[serde(deserialize_with = "crate::bounded::pieces")]
        pieces: Vec<crate::data::ObjPiece>,
        data: crate::data::Bytes,
    },
    /// Step 2, at the decider once every participant staged: record the commit (the
    /// write's commit point) and apply the decider's own staged bytes; answered `Done`, or
    /// `Aborted` if the write was already resolved as aborted. `settled_below`: every
    /// write of the same origin with a lower `seq` is finished everywhere, so its decision
    /// can be forgotten.
    Decide {
        txn: crate::data::TxnId,
        settled_below: u64,
    },
    /// Step 3 at the other participants (also how a resolver hands down a decision):
    /// apply, drop, or leave in doubt what `txn` staged here. Answered `Done`.
    Finish {
        txn: crate::data::TxnId,
        outcome: crate::data::TxnOutcome,
    },
    /// At a write's decider: its outcome (answered `Outcome`). A write not yet committed
    /// is recorded aborted first, so its writer's late `Decide` fails.
    Resolve { txn: crate::data::TxnId },
    /// Cached-lock DLMs (see `dlm`): a lock on `range` (object offsets) of `object` of
    /// `file` at its lock resource on this server, which runs `policy`. Answered
    /// `DlmGrant` on this tag once granted, however much later.
    DlmLock {
        file: FileId,
        object: u32,
        policy: crate::dlm::DlmPolicy,
        mode: crate::dlm::DlmMode,
        range: ByteRange,
    },
    /// The holder's answer to `DlmRevoke` (or to a grant sent CANCELING): lock `id` is
    /// CANCELING — no new I/O under it — and, with `downgrade`, converted to that mode
    /// (SeqDLM, Fig. 9) before its bytes are flushed. Answered only if refused.
    DlmCancel {
        file: FileId,
        object: u32,
        id: u64,
        downgrade: Option<crate::dlm::DlmMode>,
    },
    /// Gives lock `id` back (its dirty bytes flushed and acknowledged). Answered only if
    /// refused.
    DlmRelease { file: FileId, object: u32, id: u64 },
    /// Flushes dirty bytes of one object written under DLM locks: `blocks` (object
    /// offsets, each with the SN of its lock) with their bytes back to back in `data`. The
    /// data server applies every byte whose SN is not older than what it applied there
    /// (its extent cache) and answers `Written`. `msn` is set by the server's lock service
    /// when it admits the flush (clients send 0).
    SeqWrite {
        file: FileId,
        object: u32,
        #[serde(deserialize_with = "crate::bounded::pieces")]
        blocks: Vec<crate::dlm::SnBlock>,
        data: crate::data::Bytes,
        msn: u64,
    },
    /// Versioning (see `atomio_version`), at the file's version manager (its metadata
    /// server): opens the file's versions — made with `geometry` if new; `None` opens only
    /// existing ones — and numbers a new writer. Answered `VersionWriter`.
    VersionOpen {
        file: FileId,
        geometry: Option<atomio_version::Geometry>,
    },
    /// A writer whose chunks are stored asks for a version. Answered `Assigned`.
    VersionAssign {
        file: FileId,
        writer: u64,
        #[serde(deserialize_with = "crate::bounded::regions")]
        regions: RangeList,
    },
    /// The writer of `version` put every node of its tree. Answered `Published` once the
    /// version is published (after every lower one), or `Aborted` if it was aborted.
    VersionComplete { file: FileId, version: u64 },
    /// A published snapshot (`None`: the newest). Answered `Snapshot`.
    VersionSnapshot { file: FileId, version: Option<u64> },
    /// Every version's record. Answered `Versions`.
    VersionList { file: FileId },
    /// Plans a garbage collection (answered `GcPlan`); `VersionGcDone` reports it done.
    VersionGcPlan {
        file: FileId,
        keep_last: u64,
        newer_than_ms: Option<u64>,
    },
    VersionGcDone {
        file: FileId,
        plan: atomio_version::GcPlan,
    },
    /// Segment-tree nodes, at the server the DHT places each on (answered `Done`).
    NodePut {
        file: FileId,
        #[serde(deserialize_with = "crate::bounded::nodes")]
        nodes: Vec<(atomio_version::NodeKey, crate::data::Bytes)>,
    },
    /// Answered `Nodes`, one entry per key (`None`: not stored).
    NodeGet {
        file: FileId,
        #[serde(deserialize_with = "crate::bounded::nodes")]
        keys: Vec<atomio_version::NodeKey>,
    },
    /// Frees nodes (answered `Done`).
    NodeDrop {
        file: FileId,
        #[serde(deserialize_with = "crate::bounded::nodes")]
        keys: Vec<atomio_version::NodeKey>,
    },
    /// Frees every node of aborted versions held by this server (answered `Done`).
    NodeDropVersions {
        file: FileId,
        #[serde(deserialize_with = "crate::bounded::nodes")]
        versions: Vec<u64>,
    },
    /// Frees stored bytes of one object (a hole reads as zeros; the size stays). `Done`.
    Punch {
        file: FileId,
        object: u32,
        #[serde(deserialize_with = "crate::bounded::pieces")]
        ranges: Vec<ByteRange>,
    },
    /// Materialization of snapshot `version` into the file's base: before it starts
    /// (`done: false`) older snapshots are refused — their unwritten bytes are about to
    /// change in the base; once it is done (`done: true`) the base *is* that snapshot, and
    /// snapshots up to it read from the base alone. `Done`.
    VersionBase {
        file: FileId,
        version: u64,
        done: bool,
    },
}

/// A server's object files, as a client on the same host can reach them: the directory,
/// and the id written in its `.atomio-store-id` file (a client that reads the same id there
/// sees the same file system).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalObjects {
    pub dir: String,
    pub id: String,
}

/// Which service a request is for: the lock service, the data path (object bytes), or
/// file metadata. Servers run each class on its own actor, so data I/O never delays locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestClass {
    Lock,
    Data,
    Meta,
}

impl Request {
    /// Data requests that change bytes or objects: a server's lock service admits them
    /// first (mandatory locks: refused when they touch bytes another client holds a lock
    /// on), then hands them to the data service.
    pub fn needs_admission(&self) -> bool {
        matches!(
            self,
            Request::Write { .. }
                | Request::Stage { .. }
                | Request::SeqWrite { .. }
                | Request::SetObjectSize { .. }
                | Request::DropObjects { .. }
        )
    }

    /// Data-actor requests that move bytes or work on storage (a `pwrite`, an `fsync`, a
    /// hole punched, objects dropped): they may take milliseconds. The rest of what the
    /// data actor serves (versions, tree nodes, create and open) is in-memory bookkeeping
    /// or a metadata call, microseconds, and may be served ahead of other clients' bulk
    /// requests (`atomio-net`'s data actor).
    pub fn is_bulk(&self) -> bool {
        self.needs_admission()
            || matches!(
                self,
                Request::Decide { .. }
                    | Request::Finish { .. }
                    | Request::Resolve { .. }
                    | Request::Read { .. }
                    | Request::Sync { .. }
                    | Request::Punch { .. }
                    | Request::VersionBase { .. }
            )
    }

    pub fn class(&self) -> RequestClass {
        match self {
            Request::LockNew { .. }
            | Request::LockMore { .. }
            | Request::LockRelease { .. }
            | Request::Ping { .. }
            | Request::Hello
            | Request::Renew { .. }
            | Request::Stats
            | Request::AuthStart
            | Request::Auth { .. }
            | Request::DlmLock { .. }
            | Request::DlmCancel { .. }
            | Request::DlmRelease { .. } => RequestClass::Lock,
            Request::Write { .. }
            | Request::SeqWrite { .. }
            | Request::Stage { .. }
            | Request::Decide { .. }
            | Request::Finish { .. }
            | Request::Resolve { .. }
            | Request::Read { .. }
            | Request::Sync { .. }
            | Request::ObjectSizes { .. }
            | Request::SetObjectSize { .. }
            | Request::DropObjects { .. }
            | Request::Locate => RequestClass::Data,
            Request::NodePut { .. }
            | Request::NodeGet { .. }
            | Request::NodeDrop { .. }
            | Request::NodeDropVersions { .. }
            | Request::Punch { .. } => RequestClass::Data,
            Request::Create { .. }
            | Request::Open { .. }
            | Request::Remove { .. }
            | Request::VersionOpen { .. }
            | Request::VersionAssign { .. }
            | Request::VersionComplete { .. }
            | Request::VersionSnapshot { .. }
            | Request::VersionList { .. }
            | Request::VersionGcPlan { .. }
            | Request::VersionGcDone { .. }
            | Request::VersionBase { .. } => RequestClass::Meta,
        }
    }
}

/// A request's progress: every byte of it below `next_abs_offset` is granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockProgress {
    pub lock: LockId,
    /// One past the highest byte granted (0 when nothing is).
    pub last_abs_offset: u64,
    /// The first byte not yet granted; `None` when the whole request is granted (or, after
    /// a full release, when the request is closed).
    pub next_abs_offset: Option<u64>,
}

/// Server → client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Answer to `LockNew` / `LockMore`.
    Lock(LockProgress),
    /// Answer to `LockRelease`.
    Released(LockProgress),
    Pong {
        nonce: u64,
    },
    /// Answer to `Hello`. `lease_ms` 0: this server keeps no leases (locks end only when
    /// the connection closes).
    Session {
        client: ClientId,
        proof: u64,
        lease_ms: u64,
    },
    /// Answer to `Renew`.
    Renewed,
    Error(WireError),
    /// Answer to `Create` / `Open`.
    File(crate::data::FileMeta),
    /// Answer to `Write`: bytes written.
    Written {
        bytes: u64,
    },
    /// Answer to `Read`: the pieces' bytes, in order.
    Data(crate::data::Bytes),
    /// Answer to `Remove`, `DropObjects`, `Sync`.
    Done,
    /// Answer to `ObjectSizes`: (object, size) for each object this server holds.
    Sizes(Vec<(u32, u64)>),
    /// Answer to `Locate`: the object files, or `None` (objects in memory).
    Located(Option<LocalObjects>),
    /// Answer to `Stats`.
    Stats(ServerReport),
    /// Answer to `AuthStart` at a server that requires a token: prove it with `Auth`.
    Challenge {
        nonce: [u8; 32],
    },
    // Appended (existing variants keep their wire numbers):
    /// Answer to `Resolve`: whether the write committed.
    Outcome {
        committed: bool,
    },
    /// Answer to an access that touches bytes a vanished writer staged and left in doubt:
    /// ask `decider` (`Resolve`), pass the outcome down (`Finish`), then try again.
    InDoubt {
        txn: crate::data::TxnId,
        decider: ServerId,
    },
    /// Answer to `DlmLock`: granted as lock `id` in `mode` over `range` (object offsets,
    /// expanded past the request as the DLM's policy allows) with sequence number `sn`;
    /// `canceling`: give it back right after use (early revocation); `absorbed`: this
    /// client's own locks the grant replaced (an upgrade: their cached bytes now belong to
    /// it, under `sn`).
    DlmGrant {
        id: u64,
        mode: crate::dlm::DlmMode,
        range: ByteRange,
        canceling: bool,
        sn: u64,
        absorbed: Vec<u64>,
    },
    /// Server-initiated (tag `DLM_CALLBACK_TAG`): give lock `id` of `object` of `file`
    /// back — answer `DlmCancel`, flush its bytes, then `DlmRelease`.
    DlmRevoke {
        file: FileId,
        object: u32,
        id: u64,
    },
    /// Answer to `VersionOpen`: the writer's number (its chunk object) and the trees' shape.
    VersionWriter {
        object: u32,
        geometry: atomio_version::Geometry,
    },
    /// Answer to `VersionAssign`.
    Assigned(atomio_version::Assigned),
    /// Answer to `VersionComplete`: `version` is published.
    Published {
        version: u64,
    },
    /// Answer to `VersionSnapshot`. `base`: the newest snapshot the file's base holds
    /// (materialized); a snapshot at or below it reads from the base alone.
    Snapshot {
        version: u64,
        size: u64,
        geometry: atomio_version::Geometry,
        base: u64,
    },
    /// Answer to `VersionList`.
    Versions(Vec<atomio_version::VersionRecord>),
    /// Answer to `VersionGcPlan`.
    GcPlan(atomio_version::GcPlan),
    /// Answer to `NodeGet`.
    Nodes(Vec<Option<crate::data::Bytes>>),
}

/// What `Stats` reports. Gauges are the state at the moment of the request; counters run
/// from the server's start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerReport {
    /// Clients connected to this server.
    pub connections: u64,
    /// Clients holding or waiting for at least one lock.
    pub lock_clients: u64,
    /// Files with at least one open lock request.
    pub files: u64,
    /// Open lock requests, and how many of them wait for a conflicting lock.
    pub open_requests: u64,
    pub waiting: u64,
    /// Lock index entries (write hulls + read ranges): what the lock memory limit counts.
    pub index_entries: u64,
    /// Lease length in ms (0: no leases), leases that lapsed, lapsed clients whose fencing
    /// at the data actor is still pending.
    pub lease_ms: u64,
    pub leases_lapsed: u64,
    pub fencing_pending: u64,
    /// Events queued at the lock actor and at the data actor; reply frames queued to
    /// clients and not yet written.
    pub lock_queue: u64,
    pub data_queue: u64,
    pub replies_queued: u64,
    /// Counters: lock requests opened, ranges granted, releases, acquires that waited.
    pub requests_opened: u64,
    pub ranges_granted: u64,
    pub releases: u64,
    pub waits: u64,
    /// Mandatory locks: changes of bytes admitted, and refused because they reached into
    /// another client's lock.
    pub changes_admitted: u64,
    pub changes_refused: u64,
    /// Cached-lock DLMs: lock resources, locks held and requests waiting (gauges); grants,
    /// of which sent CANCELING (early revocation), and revocations sent (counters).
    pub dlm_resources: u64,
    pub dlm_locks: u64,
    pub dlm_waiting: u64,
    pub dlm_grants: u64,
    pub dlm_early_revocations: u64,
    pub dlm_revocations: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientFrame {
    pub tag: u64,
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerFrame {
    pub tag: u64,
    pub reply: Reply,
}
