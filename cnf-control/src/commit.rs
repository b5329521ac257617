//! The commit stage between the engine task and the outside world: each batch of the engine's
//! effects waits here, in the order the engine made it, until its store changes are durable;
//! then its dataplane commands, watch events and replies are released.
//!
//! ```text
//!  engine task ──Effects (FIFO, bounded)──▶ commit thread: group ──▶ one redb transaction
//!   (next batch                                 (every batch queued)     (Durability::Immediate)
//!    meanwhile)                                                          │ then, in batch order:
//!                                              dataplane tasks, watch ◀──┘ sends, watch, replies
//! ```
//!
//! Why a stage of its own: a redb commit ends in an fdatasync, which takes 1–10 ms on this kind
//! of virtual disk. Done inline, the engine task did nothing else meanwhile, so every batch paid
//! a whole sync and onboarding stalled at a few hundred DORA/s. Here the engine carries on with
//! the next batch while one commits, and every batch that queued during a sync shares the next
//! one (group commit): the cost of a sync is spread over the whole queue.
//!
//! Invariants kept:
//! - Nothing of a batch leaves before its store changes are committed, so no client holds a
//!   lease the store lacks.
//! - Batches are released in the order the engine made them, including batches that changed
//!   nothing in the store (an OFFER waits behind an earlier ACK's commit): dataplane commands
//!   for one session (remove, then a new install) are never reordered.
//! - Every commit is `Durability::Immediate`: when an ACK leaves, its lease survives a power
//!   loss, not only a process crash. Grouping, not weaker durability, is what buys the rate;
//!   `Durability::None` would let a crash of the machine forget leases clients hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{broadcast, mpsc};

use crate::core::SessionId;
use crate::dataplane::DpCmd;
use crate::service::WatchEvent;
use crate::store::{Store, StoreOp};

/// Batches waiting for the commit thread; beyond this the engine task waits, and with it the
/// punt streams (whose own bounds then drop and count).
pub const QUEUE_BATCHES: usize = 1024;

/// Most store changes in one transaction (a larger group is split).
pub const GROUP_OPS_MAX: usize = 50_000;

/// A reply to an operator command, run once its batch is released.
pub type Reply = Box<dyn FnOnce() + Send>;

/// One engine batch's effects.
#[derive(Default)]
pub struct Effects {
    pub store: Vec<StoreOp>,
    /// The engine's next session id after this batch (stored with the changes).
    pub next_id: SessionId,
    pub sends: Vec<(u32, DpCmd)>,
    pub watch: Vec<WatchEvent>,
    pub replies: Vec<Reply>,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("store", &self.store.len())
            .field("next_id", &self.next_id)
            .field("sends", &self.sends.len())
            .field("watch", &self.watch.len())
            .field("replies", &self.replies.len())
            .finish()
    }
}

impl Effects {
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
            && self.sends.is_empty()
            && self.watch.is_empty()
            && self.replies.is_empty()
    }
}

/// Where the engine task hands its batches.
#[derive(Debug, Clone)]
pub struct Committer {
    tx: mpsc::Sender<Effects>,
    /// Failed commits so far (their batches were released anyway; see [`run`]).
    pub errors: Arc<AtomicU64>,
}

impl Committer {
    /// Start the commit thread over `store`, releasing to `dps` and `watch`.
    pub fn start(
        store: Arc<Store>,
        dps: Vec<mpsc::UnboundedSender<DpCmd>>,
        watch: broadcast::Sender<WatchEvent>,
    ) -> std::io::Result<Committer> {
        let (tx, rx) = mpsc::channel(QUEUE_BATCHES);
        let errors = Arc::new(AtomicU64::new(0));
        let e = Arc::clone(&errors);
        std::thread::Builder::new()
            .name("kbng-commit".into())
            .spawn(move || run(store, rx, &dps, &watch, &e))?;
        Ok(Committer { tx, errors })
    }

    /// Queue a batch (waits while the queue is full). `false` once the commit thread is gone.
    pub async fn submit(&self, fx: Effects) -> bool {
        self.tx.send(fx).await.is_ok()
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// The commit thread: until the engine task drops its sender, take every batch queued, commit
/// their store changes together, release them in order.
fn run(
    store: Arc<Store>,
    mut rx: mpsc::Receiver<Effects>,
    dps: &[mpsc::UnboundedSender<DpCmd>],
    watch: &broadcast::Sender<WatchEvent>,
    errors: &AtomicU64,
) {
    let mut group: Vec<Effects> = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut ops = first.store.len();
        group.push(first);
        while ops < GROUP_OPS_MAX {
            match rx.try_recv() {
                Ok(fx) => {
                    ops += fx.store.len();
                    group.push(fx);
                }
                Err(_) => break,
            }
        }
        if ops > 0 {
            let changes: Vec<&[StoreOp]> = group.iter().map(|fx| fx.store.as_slice()).collect();
            let next_id = group.iter().map(|fx| fx.next_id).max().unwrap_or(0);
            if let Err(e) = store.apply_all(&changes, next_id) {
                // Kept as before this stage existed: the engine already acted on the batch, so
                // its replies still leave; the failure is counted and reported in the status.
                errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!("store commit failed: {e}");
            }
        }
        for fx in group.drain(..) {
            release(fx, dps, watch);
        }
    }
}

fn release(
    fx: Effects,
    dps: &[mpsc::UnboundedSender<DpCmd>],
    watch: &broadcast::Sender<WatchEvent>,
) {
    for (dp, cmd) in fx.sends {
        if let Some(tx) = dps.get(dp as usize) {
            let _ = tx.send(cmd);
        }
    }
    for w in fx.watch {
        let _ = watch.send(w);
    }
    for r in fx.replies {
        r();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::session;

    /// Replies run only once the store holds the batch, and batches (with store changes or
    /// without) are released in the order they were made.
    #[test]
    fn replies_follow_the_commit_in_batch_order() {
        let path = std::env::temp_dir().join(format!("kbng-commit-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Arc::new(Store::open(&path).expect("open"));
        let (dp_tx, mut dp_rx) = mpsc::unbounded_channel();
        let (watch, _) = broadcast::channel(16);
        let c = Committer::start(Arc::clone(&store), vec![dp_tx], watch).expect("start");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        rt.block_on(async {
            for i in 1..=20u64 {
                let seen = seen_tx.clone();
                let check = Arc::clone(&store);
                // Every third batch changes nothing in the store: it is still released in turn.
                let stored = i % 3 != 0;
                let fx = Effects {
                    store: if stored {
                        vec![StoreOp::Put(Box::new(session(i)))]
                    } else {
                        Vec::new()
                    },
                    next_id: i + 1,
                    sends: vec![(
                        0,
                        DpCmd::Inject {
                            port: 0,
                            frame: vec![i as u8],
                        },
                    )],
                    watch: Vec::new(),
                    replies: vec![Box::new(move || {
                        // A read of the committed store already finds session i.
                        let held = !stored
                            || check
                                .load()
                                .is_ok_and(|(all, next)| next > i && all.iter().any(|s| s.id == i));
                        let _ = seen.send((i, held));
                    })],
                };
                assert!(c.submit(fx).await);
            }
        });
        drop(c);
        let seen: Vec<(u64, bool)> = (0..20)
            .map(|_| {
                seen_rx
                    .recv_timeout(std::time::Duration::from_secs(10))
                    .expect("reply")
            })
            .collect();
        assert_eq!(
            seen.iter().map(|s| s.0).collect::<Vec<_>>(),
            (1..=20).collect::<Vec<_>>()
        );
        assert!(seen.iter().all(|s| s.1), "a reply ran before its commit");
        let frames: Vec<u8> = std::iter::from_fn(|| dp_rx.try_recv().ok())
            .filter_map(|c| match c {
                DpCmd::Inject { frame, .. } => frame.first().copied(),
                _ => None,
            })
            .collect();
        assert_eq!(frames, (1..=20).collect::<Vec<u8>>());
        let _ = std::fs::remove_file(&path);
    }
}
