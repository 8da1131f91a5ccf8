//! atomio's byte-range distributed lock manager, after Ching et al. (SC'07), as sans-IO
//! state machines: the server side (`server`, over the interval indexes in `index`) and the
//! client side (`plan` turns an access into lock requests by method; `protocol` drives them
//! with the two-phase, one-try or alt-try protocol). `sim` runs many of both in a seeded,
//! deterministic network that delivers messages in random order and checks safety and
//! liveness as it goes.

pub mod chain;
pub mod index;
pub mod lease;
pub mod plan;
pub mod protocol;
pub mod seqdlm;
pub mod server;
pub mod sim;

pub use lease::LeaseConfig;
pub use plan::{plan, Method, SubRequest, DEFAULT_LIST_RANGES};
pub use protocol::{Contention, LockOp, OpStats, Protocol, Send, Start, Status};
pub use server::{LockServer, Outgoing, ServerStats, DEFAULT_WORK_SLICE};
