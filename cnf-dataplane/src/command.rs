//! Control-to-worker hand-off: plain `Copy` commands on one lock-free SPSC ring per worker,
//! and a per-worker "applied" counter the control thread waits on.
//!
//! The control thread validates a request against its shadow tables, updates the shadow and
//! pushes the same commands to every worker, in the same order. A worker drains its ring once
//! per poll-loop iteration (bounded per iteration, so a big batch cannot stall forwarding),
//! applies each command to its own tables without allocating, then publishes how many it has
//! applied with a release store. The control thread replies to the gRPC call only when every
//! worker's applied count has reached the number it pushed, so "installed" means installed
//! on every core.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rtrb::{Consumer, Producer, RingBuffer};

use crate::nodes::walled_garden::WalledGardenRule;
use crate::pipeline::Tables;
use crate::tables::{Plan, Session};
use crate::task_bell::TaskBell;

/// One table update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Install or replace the session in a slot.
    UpsertSession {
        /// Slot (allocated by the control thread's shadow).
        slot: u32,
        /// The session.
        session: Session,
    },
    /// Free a slot.
    RemoveSession {
        /// Slot.
        slot: u32,
    },
    /// Install or replace a plan.
    SetPlan {
        /// Plan slot.
        slot: u16,
        /// The plan.
        plan: Plan,
    },
    /// Start a new access configuration (staged until commit).
    AccessBegin,
    /// Add a gateway address to the staged configuration.
    AccessGateway(u32),
    /// Add a walled-garden rule to the staged configuration.
    AccessRule(WalledGardenRule),
    /// Put the staged configuration in force.
    AccessCommit {
        /// Punt captive HTTP for the portal redirect.
        redirect_http: bool,
    },
}

/// Apply one command to a worker's tables at TSC time `now`.
pub fn apply(tables: &mut Tables, cmd: &Command, now: u64) {
    match *cmd {
        Command::UpsertSession { slot, session } => {
            tables.sessions.upsert(slot, session, &tables.plans, now);
        }
        Command::RemoveSession { slot } => {
            tables.sessions.remove(slot);
        }
        Command::SetPlan { slot, plan } => tables.plans.set(slot, plan),
        Command::AccessBegin => tables.staged_access.clear(),
        Command::AccessGateway(ip) => tables.staged_access.add_gateway(ip),
        Command::AccessRule(r) => tables.staged_access.add_rule(r),
        Command::AccessCommit { redirect_http } => {
            tables.staged_access.set_redirect_http(redirect_http);
            std::mem::swap(&mut tables.access, &mut tables.staged_access);
        }
    }
}

/// Control side of one worker's command ring.
#[derive(Debug)]
pub struct CommandSender {
    producer: Producer<Command>,
    pushed: u64,
    applied: Arc<AtomicU64>,
}

/// Worker side of a command ring.
#[derive(Debug)]
pub struct CommandReceiver {
    consumer: Consumer<Command>,
    applied: Arc<AtomicU64>,
    count: u64,
    bell: Option<TaskBell>,
}

/// A command ring of `capacity` commands.
pub fn channel(capacity: usize) -> (CommandSender, CommandReceiver) {
    let (producer, consumer) = RingBuffer::new(capacity.max(1));
    let applied = Arc::new(AtomicU64::new(0));
    (
        CommandSender {
            producer,
            pushed: 0,
            applied: Arc::clone(&applied),
        },
        CommandReceiver {
            consumer,
            applied,
            count: 0,
            bell: None,
        },
    )
}

impl CommandSender {
    /// Queue a command; `false` if the ring is full (nothing queued).
    pub fn try_send(&mut self, cmd: Command) -> bool {
        match self.producer.push(cmd) {
            Ok(()) => {
                self.pushed += 1;
                true
            }
            Err(rtrb::PushError::Full(_)) => false,
        }
    }
    /// Free places in the ring.
    pub fn free_slots(&self) -> usize {
        self.producer.slots()
    }
    /// Commands queued so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }
    /// Commands the worker has applied so far.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }
    /// Has the worker applied everything queued?
    pub fn caught_up(&self) -> bool {
        self.applied() >= self.pushed
    }
}

impl CommandReceiver {
    /// Ring `bell` after every drain that leaves the ring empty, so that the control thread
    /// waiting for this worker sleeps until then instead of polling.
    pub fn with_bell(mut self, bell: TaskBell) -> Self {
        self.bell = Some(bell);
        self
    }

    /// Apply at most `max` queued commands; returns how many were applied.
    pub fn drain(&mut self, tables: &mut Tables, now: u64, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.consumer.pop() {
                Ok(cmd) => {
                    apply(tables, &cmd, now);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        if n > 0 {
            self.count += n as u64;
            self.applied.store(self.count, Ordering::Release);
            if let Some(bell) = &self.bell
                && self.consumer.is_empty()
            {
                bell.ring();
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task_bell;
    use std::time::Duration;
    use tokio::time::Instant;

    #[tokio::test]
    async fn the_bell_rings_once_the_ring_is_empty_not_after_a_partial_drain() {
        let (mut wait, bells) = task_bell::pair().unwrap();
        let (mut tx, rx) = channel(16);
        let mut rx = rx.with_bell(bells.bell().unwrap());
        let mut tables = Tables::new(16, 4, 1);
        for _ in 0..3 {
            assert!(tx.try_send(Command::AccessBegin));
        }
        assert_eq!(rx.drain(&mut tables, 0, 2), 2);
        assert!(!tx.caught_up());
        let t = std::time::Instant::now();
        wait.wait(Instant::now() + Duration::from_millis(3)).await;
        assert!(
            t.elapsed() >= Duration::from_millis(3),
            "rang with a command still queued"
        );
        assert_eq!(rx.drain(&mut tables, 0, 2), 1);
        assert!(tx.caught_up());
        // The ring is already queued; a long recheck keeps a slow runtime thread from being
        // mistaken for a missing ring.
        assert!(
            wait.wait_with(
                Instant::now() + Duration::from_secs(60),
                Duration::from_secs(20)
            )
            .await,
            "no ring after the last drain"
        );
    }
}
