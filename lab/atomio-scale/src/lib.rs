//! atomio's calibrated scale model: a discrete-event simulation of atomio's
//! protocols whose costs are measured on this machine, checked against real runs here,
//! then run to thousands of clients on the papers' clusters.
//!
//! * `engine` — virtual time, hosts with shared cores, single-threaded actors, links;
//! * `costs` — the cost file `atomio-lab sim calibrate` writes; `calibrate` measures it;
//! * `platform` — this machine, or a paper's cluster (a host per process, its network);
//! * `lock_service` — the product's `LockServer` and `LockOp`, charged per step;
//! * `held` — the safety check: no two clients act on conflicting bytes at once;
//! * `lockbench` — `bench locks` (Ching §6.1) in the model;
//! * `workload` — `bench <workload>` with lock strategies on a direct file;
//! * `dlm` — SeqDLM vs the traditional cached DLMs on atomio's data servers;
//! * `versioning` — lock-free snapshots (Tran et al.) with the product's version manager;
//!
//! * `project` — the papers' workloads to 4,096 clients × 64 servers (`atomio-lab sim --scale`).
//!
//! What is modelled and what is not: docs/scale-model.md.

pub mod calibrate;
pub mod costs;
pub mod dlm;
pub mod engine;
pub mod held;
pub mod lock_service;
pub mod lockbench;
pub mod platform;
pub mod project;
pub mod quiet;
pub mod versioning;
pub mod workload;

pub use costs::Costs;
pub use platform::Platform;
