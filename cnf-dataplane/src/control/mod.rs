//! The control side of the dataplane (runs on the main lcore, never on a worker): the shadow
//! tables, the command rings to the workers, and read-only views of the workers' counters.

pub mod convert;
pub mod shadow;

use std::time::Duration;

use kbng_api::ApiError;
use tokio::time::Instant;

use crate::command::{Command, CommandSender};
use crate::counters::{SessionCounts, WorkerStats};
use crate::doorbell::Doorbell;
use crate::pipeline::PipelineCounters;
use crate::tables::SessionCounterArray;
use crate::task_bell::TaskWait;
use shadow::Shadow;

/// Most commands one request may generate (ring capacity is twice this).
pub const MAX_BATCH: usize = 32_768;

/// How long a request waits for workers to make room or acknowledge.
pub const WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// What the control thread sees of one worker.
#[derive(Debug)]
pub struct WorkerView {
    /// Lcore the worker runs on.
    pub core: u32,
    /// Command ring.
    pub commands: CommandSender,
    /// Per-slot session counters.
    pub sessions: SessionCounterArray,
    /// Node counters.
    pub nodes: PipelineCounters,
    /// Loop statistics.
    pub stats: std::sync::Arc<WorkerStats>,
    /// Wakes the worker from an idle back-off once commands are queued for it.
    pub wake: Doorbell,
}

/// Control-side state.
#[derive(Debug)]
pub struct Control {
    /// The shadow tables.
    pub shadow: Shadow,
    /// The workers.
    pub workers: Vec<WorkerView>,
    /// TSC frequency (for meter profiles).
    pub tsc_hz: u64,
    /// Counters of the next-hop resolver (main core), when the next hop is resolved by ARP.
    pub resolver: Option<crate::counters::NodeCounters<crate::neighbour::ResolverCounter>>,
    /// Rung by a worker that emptied its command ring: what [`Self::reserve`] and
    /// [`Self::commit`] sleep on.
    pub applied: TaskWait,
    /// The ports' own counters (access, uplink).
    pub ports: Vec<crate::port_counters::PortCounters>,
}

impl Control {
    /// Wait (bounded) until every worker's ring has room for `n` commands.
    pub async fn reserve(&mut self, n: usize) -> Result<(), ApiError> {
        if n > MAX_BATCH {
            return Err(ApiError::invalid(
                "batch",
                format!("{n} changes in one request, at most {MAX_BATCH}"),
            ));
        }
        let deadline = Instant::now() + WORKER_TIMEOUT;
        while self.workers.iter().any(|w| w.commands.free_slots() < n) {
            self.wake_all();
            if Instant::now() > deadline {
                return Err(ApiError::Unavailable(
                    "workers are not draining their command rings".into(),
                ));
            }
            self.applied.wait(deadline).await;
        }
        Ok(())
    }

    /// Push commands to every worker (room was reserved) and wait until all have applied them.
    pub async fn commit(&mut self, cmds: &[Command]) -> Result<(), ApiError> {
        for w in &mut self.workers {
            for c in cmds {
                if !w.commands.try_send(*c) {
                    return Err(ApiError::Internal(
                        "command ring full after reservation".into(),
                    ));
                }
            }
        }
        // A worker in idle back-off would otherwise apply them only when its sleep ends, while
        // the wait below spins on this thread.
        self.wake_all();
        let deadline = Instant::now() + WORKER_TIMEOUT;
        while !self.workers.iter().all(|w| w.commands.caught_up()) {
            if Instant::now() > deadline {
                return Err(ApiError::Unavailable(
                    "workers did not acknowledge in time; the change is queued".into(),
                ));
            }
            self.applied.wait(deadline).await;
        }
        Ok(())
    }

    fn wake_all(&self) {
        for w in &self.workers {
            w.wake.ring();
        }
    }

    /// A session's counters summed over workers.
    pub fn session_counts(&self, slot: u32) -> SessionCounts {
        let mut total = SessionCounts::default();
        for w in &self.workers {
            if let Some(c) = w.sessions.get(slot as usize) {
                total.merge(&c.read());
            }
        }
        total
    }

    /// Node counters summed over workers, in node order.
    pub fn node_counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut total: Vec<(&'static str, &'static str, u64)> = Vec::new();
        for w in &self.workers {
            for (i, (n, c, v)) in w.nodes.snapshot_with_runtime().into_iter().enumerate() {
                match total.get_mut(i) {
                    Some(t) => t.2 += v,
                    None => total.push((n, c, v)),
                }
            }
        }
        if let Some(r) = &self.resolver {
            r.snapshot(&mut total);
        }
        for p in &self.ports {
            p.snapshot(&mut total);
        }
        total
    }
}
