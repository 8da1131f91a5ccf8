//! `File`'s cached-lock DLMs (SeqDLM, DLM-Lustre): calls through the DLM client's
//! write-back cache, its flush, and its statistics and lock log.
//!
//! **Invariants:** a DLM file's bytes move only through its client's cache under its cached
//! locks; a flush gives every cached lock back with its bytes before it returns.

use super::*;

impl File {
    /// Steps 1–3 by a cached-lock DLM's client: locks taken (or found cached) and the
    /// bytes moved through its write-back cache.
    pub(super) async fn cached_io(
        &mut self,
        c: &mut ClusterClient,
        access: &Access,
        op: Op<'_>,
        spec: crate::dlm::DlmSpec,
    ) -> Result<(), WireError> {
        let Placement::Servers(info) = &self.placement else {
            return Err(WireError::new(
                ErrorCode::InvalidArgument,
                format!("{} runs on atomio's servers only", spec.name()),
            ));
        };
        let (id, layout) = (info.id(), info.layout.clone());
        if self.dlm.is_none() {
            let log = self.dlm_log;
            self.dlm = Some(crate::dlm::agent::DlmAgent::start(c.servers_spec(), log).await?);
        }
        let agent = self.dlm.as_ref().expect("started above");
        let ranges: Vec<atomio_layout::ByteRange> = access.ranges().collect();
        match op {
            Op::Write(data) => {
                let data = crate::dlm::pool::copy(data);
                agent.write(id, layout, ranges, data, spec).await
            }
            Op::Read { out, holes_ok } => {
                let got = agent.read(id, layout, ranges, out.len(), spec).await?;
                crate::check_len("read", got.data.len(), out.len() as u64)?;
                out.copy_from_slice(&got.data);
                if !holes_ok {
                    // The file reaches at least as far as this client's own cached bytes.
                    let info = info.clone();
                    check_size_beyond(c, &info, access, got.cached_end).await?;
                }
                Ok(())
            }
        }
    }

    /// Flushes what this file's DLM client caches (every cached lock given back with its
    /// bytes); nothing to do for other techniques.
    pub async fn flush_cache(&mut self) -> Result<(), WireError> {
        self.flush_interval_cache()?;
        match &self.dlm {
            Some(agent) => agent.flush(None, false).await,
            None => Ok(()),
        }
    }

    /// What this file's DLM client did (`None` when no DLM call was made).
    pub async fn dlm_stats(&self) -> Option<crate::dlm::machine::DlmClientStats> {
        match &self.dlm {
            Some(agent) => agent.stats().await.ok(),
            None => None,
        }
    }

    /// Keep a record of every DLM lock's life (`dlm_log`); before the first call.
    pub fn keep_dlm_log(&mut self) {
        self.dlm_log = true;
    }

    /// Every lock's life in this file's DLM client (see `keep_dlm_log`).
    pub async fn dlm_log(&self) -> Vec<crate::dlm::machine::LockRecord> {
        match &self.dlm {
            Some(agent) => agent.lock_log().await.unwrap_or_default(),
            None => Vec::new(),
        }
    }
}
