//! The plan a workload produces: every client's ordered I/O calls, and the builder that
//! enforces the plan invariants while workloads fill it.
//!
//! **Invariants** (established by [`PlanBuilder`], relied on by the harness):
//! * `clients[i].rank == i`, and the client count is in `1..=MAX_CLIENTS`;
//! * in each client, `calls[k].op == k` (ops numbered 0, 1, 2, … per client, syncs included);
//! * `Write`/`Read` calls carry an access with at least one byte; `Sync` calls carry none;
//! * `file_bytes` is the end of the highest byte any write touches (0 when nothing is written);
//! * the whole plan holds at most `MAX_CALLS` calls, so a plan always fits in memory.
//!
//! The data of a call, in the order the harness fills its buffer, is the access's bytes in
//! increasing file offset (every `Access` is monotone).

use crate::error::{Ctx, Result};
use atomio_layout::Access;
use serde::{Deserialize, Serialize};

/// Most clients a plan may have (the lock service's own client limit).
pub const MAX_CLIENTS: u32 = 4096;
/// Most calls (writes, reads and syncs of all clients together) one plan may hold.
pub const MAX_CALLS: u64 = 1 << 21;

/// What a call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallKind {
    /// Write the access's bytes (MPI_File_write at the access, atomic mode).
    Write,
    /// Read the access's bytes.
    Read,
    /// Flush this client's writes to storage (MPI_File_sync); carries no access.
    Sync,
}

/// One I/O call of one client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub kind: CallKind,
    /// The bytes touched; `None` exactly for `Sync`.
    pub access: Option<Access>,
    /// Per-client sequence number: the call's index in its client's `calls`.
    pub op: u32,
}

impl Call {
    /// Bytes moved by the call (0 for `Sync`).
    pub fn bytes(&self) -> u64 {
        self.access.as_ref().map_or(0, Access::size)
    }
}

/// Everything one client (MPI rank) does, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientPlan {
    pub rank: u32,
    pub calls: Vec<Call>,
}

impl ClientPlan {
    /// The accesses of this client's calls of `kind`, in call order.
    pub fn accesses(&self, kind: CallKind) -> impl Iterator<Item = &Access> + '_ {
        self.calls
            .iter()
            .filter(move |c| c.kind == kind)
            .filter_map(|c| c.access.as_ref())
    }

    /// Bytes this client writes (bytes written twice count twice).
    pub fn write_bytes(&self) -> u64 {
        self.accesses(CallKind::Write).map(Access::size).sum()
    }
}

/// A workload instantiated for a client count: what every client does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadPlan {
    /// "ior-segmented", "ior-strided", "tile", "row", "s3d", "s3asim", "flash", "regions" or
    /// "vpic".
    pub workload: String,
    /// The parameters used, with every defaulted or derived value filled in (tile grid,
    /// process grid, segment count, …), so this JSON alone reproduces the plan.
    pub params: serde_json::Value,
    pub clients: Vec<ClientPlan>,
    /// Logical file size after the run: the end of the highest byte written.
    pub file_bytes: u64,
    /// Whether writes of different clients overlap (stated by the workload's definition;
    /// the tests check it against the expanded byte ranges).
    pub overlapping: bool,
}

impl WorkloadPlan {
    /// Bytes written by all clients (overlapping bytes counted once per writer).
    pub fn write_bytes(&self) -> u64 {
        self.clients.iter().map(ClientPlan::write_bytes).sum()
    }

    /// Bytes read by all clients.
    pub fn read_bytes(&self) -> u64 {
        self.clients
            .iter()
            .flat_map(|c| c.accesses(CallKind::Read))
            .map(Access::size)
            .sum()
    }

    /// Calls of all clients.
    pub fn call_count(&self) -> u64 {
        self.clients.iter().map(|c| c.calls.len() as u64).sum()
    }
}

/// Fills a plan while keeping its invariants.
pub(crate) struct PlanBuilder {
    ctx: Ctx,
    clients: Vec<ClientPlan>,
    calls: u64,
    file_end: u64,
}

impl PlanBuilder {
    pub fn new(ctx: Ctx, clients: u32) -> Result<Self> {
        if clients == 0 {
            return Err(ctx.clients(0, "at least one client is needed"));
        }
        if clients > MAX_CLIENTS {
            return Err(ctx.clients(clients, format!("at most {MAX_CLIENTS} are supported")));
        }
        Ok(Self {
            ctx,
            clients: (0..clients)
                .map(|rank| ClientPlan {
                    rank,
                    calls: Vec::new(),
                })
                .collect(),
            calls: 0,
            file_end: 0,
        })
    }

    /// Fails early when a plan would hold more than `MAX_CALLS` calls.
    pub fn expect_calls(&self, total: Option<u64>) -> Result<()> {
        let total = total.ok_or(self.ctx.overflow("the number of calls"))?;
        self.ctx.at_most(total, MAX_CALLS, "the number of calls")?;
        Ok(())
    }

    fn push(&mut self, rank: u32, kind: CallKind, access: Option<Access>) -> Result<()> {
        self.calls += 1;
        self.ctx
            .at_most(self.calls, MAX_CALLS, "the number of calls")?;
        let client = &mut self.clients[rank as usize];
        let op = client.calls.len() as u32;
        client.calls.push(Call { kind, access, op });
        Ok(())
    }

    fn io(&mut self, rank: u32, kind: CallKind, access: Access) -> Result<()> {
        let Some(hull) = access.hull() else {
            return Err(self.ctx.invalid(format!(
                "client {rank} would issue an empty {kind:?} (a parameter leaves it no bytes)"
            )));
        };
        if kind == CallKind::Write {
            self.file_end = self.file_end.max(hull.end);
        }
        self.push(rank, kind, Some(access))
    }

    pub fn write(&mut self, rank: u32, access: Access) -> Result<()> {
        self.io(rank, CallKind::Write, access)
    }

    pub fn read(&mut self, rank: u32, access: Access) -> Result<()> {
        self.io(rank, CallKind::Read, access)
    }

    pub fn sync(&mut self, rank: u32) -> Result<()> {
        self.push(rank, CallKind::Sync, None)
    }

    pub fn finish(self, params: &impl Serialize, overlapping: bool) -> Result<WorkloadPlan> {
        let params = serde_json::to_value(params).map_err(|e| {
            self.ctx
                .invalid(format!("parameters do not serialize: {e}"))
        })?;
        Ok(WorkloadPlan {
            workload: self.ctx.name().to_string(),
            params,
            clients: self.clients,
            file_bytes: self.file_end,
            overlapping,
        })
    }
}
