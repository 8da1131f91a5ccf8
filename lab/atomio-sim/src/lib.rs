//! Seeded simulations of atomio's protocols as the product runs them: the product's own
//! state machines (`CallOp`, `DlmClient`, `LockServer`, `DataService`, the SeqDLM resource)
//! over a simulated network whose every delivery a seeded RNG picks, checked by the verifier.
//! A failure names its seed; `atomio-lab sim … --seed N` replays it.
//!
//! * `stack`: whole atomic calls, locks and data, every lock technique, client crashes.
//! * `dlm`: the cached-lock DLMs (SeqDLM, `dlm-basic`, `dlm-lustre`) as the product runs them.
//! * `seqdlm`: the SeqDLM rules on their own (resources, write caches, extent caches).
//!
//! **Invariant:** the lab depends on the product, never the other way; nothing here is a
//! second copy of a rule the product runs, except where `seqdlm` models a client's rules
//! directly (see its module doc).

pub mod dlm;
pub mod seqdlm;
pub mod stack;
