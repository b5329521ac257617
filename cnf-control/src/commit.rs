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
//! - Every commit is `Durability::Immediate`: when an ACK leaves, its lease is in the file and
//!   survives a crash of the process. By default (`crate::store::sync`) the commit also ends
//!   in an fdatasync, so the lease survives a power loss too; grouping, not weaker durability,
//!   is what buys the rate. An operator may trade the second guarantee for CPU and latency
//!   with a sync interval (`storeSyncIntervalMs`); this thread then syncs a quiet store once
//!   it has waited an interval for work.
//!
//! A batch that changes nothing in the store, submitted while no earlier batch is still queued
//! or committing, is released by the submitter itself: it has nothing to make durable and
//! nothing ahead of it, so both invariants hold, and the commit thread is not woken for it
//! (an OFFER batch's watch events were a wake-up of this thread each).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{broadcast, mpsc};

use crate::core::SessionId;
use crate::dataplane::DpCmd;
use crate::service::WatchEvent;
use crate::store::sync::SyncPolicy;
use crate::store::{Store, StoreOp};

/// Batches waiting for the commit thread; beyond this the engine task waits, and with it the
/// punt streams (whose own bounds then drop and count).
pub const QUEUE_BATCHES: usize = 1024;

/// Most store changes in one transaction (a larger group is split).
pub const GROUP_OPS_MAX: usize = 50_000;

/// A group with fewer store changes than this waits up to [`GATHER_WINDOW`] for more batches
/// before it commits. A commit costs about 400 µs of CPU whatever its size (redb's page writes
/// and bookkeeping, then the fdatasync), measured with perf at 1,500 DORA/s: ~430 commits/s of
/// 3-4 changes each, 45% of the control's CPU. Waiting 2 ms lets each commit carry about twice
/// as many at the cost of those 2 ms on the ACKs of a small group; groups this large form by
/// themselves at higher rates (while the previous commit syncs) and do not wait.
///
/// Measured again with protobuf rows at 6,816 DORA/s (Kea's zero-drop rate in the bench), two
/// runs each: with the 2 ms window the ACK p50 was 3.3 ms and kbng spent 36-38 µs of control
/// and 39 µs of dataplane CPU per DORA; without it 1.25 ms, but 81-84 and 55-57 µs (twice the
/// commits, and smaller bursts for the dataplane). On 2 vCPUs shared with the load generator
/// that CPU is the zero-drop rate, so the window stays.
pub const GATHER_OPS: usize = 256;
pub const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(2);

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
    /// Batches handed to the commit thread and not yet released by it.
    pending: Arc<AtomicU64>,
    dps: Vec<mpsc::UnboundedSender<DpCmd>>,
    watch: broadcast::Sender<WatchEvent>,
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
        let pending = Arc::new(AtomicU64::new(0));
        let (e, p) = (Arc::clone(&errors), Arc::clone(&pending));
        let (d, w) = (dps.clone(), watch.clone());
        std::thread::Builder::new()
            .name("kbng-commit".into())
            .spawn(move || run(store, rx, &d, &w, &e, &p))?;
        Ok(Committer {
            tx,
            errors,
            pending,
            dps,
            watch,
        })
    }

    /// Queue a batch (waits while the queue is full), or release it at once when it changes
    /// nothing in the store and nothing submitted earlier is still held (see the module
    /// comment). `false` once the commit thread is gone. One submitter at a time (the engine
    /// task): the check and the release are not atomic against a second one.
    pub async fn submit(&self, fx: Effects) -> bool {
        // Acquire pairs with the commit thread's Release after it released a group: seeing 0
        // means every earlier batch's sends, watch events and replies have been made.
        if fx.store.is_empty() && self.pending.load(Ordering::Acquire) == 0 {
            release(fx, &self.dps, &self.watch);
            return !self.tx.is_closed();
        }
        self.pending.fetch_add(1, Ordering::Relaxed);
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
    pending: &AtomicU64,
) {
    let mut group: Vec<Effects> = Vec::new();
    // The receive with a timeout of an interval sync policy needs a timer of its own.
    let idle = match store.sync().policy() {
        SyncPolicy::EveryCommit => None,
        SyncPolicy::Interval(every) => tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .inspect_err(|e| {
                tracing::error!(
                    "commit thread: no timer ({e}); quiet stores sync at their next commit only"
                )
            })
            .ok()
            .map(|rt| (every, rt)),
    };
    while let Some(first) = next_batch(&store, &mut rx, idle.as_ref()) {
        let mut ops = first.store.len();
        group.push(first);
        take_queued(&mut rx, &mut group, &mut ops);
        if ops > 0 && ops < GATHER_OPS {
            std::thread::sleep(GATHER_WINDOW);
            take_queued(&mut rx, &mut group, &mut ops);
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
        let released = group.len() as u64;
        for fx in group.drain(..) {
            release(fx, dps, watch);
        }
        pending.fetch_sub(released, Ordering::Release);
    }
}

/// The next batch, or `None` once the engine task is gone. With `idle` (an interval sync
/// policy: the interval and a timer), a wait longer than the interval first syncs the commits it left unsynced, so that a quiet
/// store is on the disk one interval after its last commit.
fn next_batch(
    store: &Store,
    rx: &mut mpsc::Receiver<Effects>,
    idle: Option<&(std::time::Duration, tokio::runtime::Runtime)>,
) -> Option<Effects> {
    let Some((every, rt)) = idle else {
        return rx.blocking_recv();
    };
    loop {
        match rt.block_on(async { tokio::time::timeout(*every, rx.recv()).await }) {
            Ok(fx) => return fx,
            Err(_) => {
                if let Err(e) = store.sync().sync_if_pending() {
                    tracing::error!("store sync failed: {e}");
                }
            }
        }
    }
}

/// Move every batch already queued into `group`, counting its store changes into `ops`, up
/// to [`GROUP_OPS_MAX`].
fn take_queued(rx: &mut mpsc::Receiver<Effects>, group: &mut Vec<Effects>, ops: &mut usize) {
    while *ops < GROUP_OPS_MAX {
        match rx.try_recv() {
            Ok(fx) => {
                *ops += fx.store.len();
                group.push(fx);
            }
            Err(_) => break,
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
                            announces: None,
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

    /// Under an interval policy the commit thread syncs a commit left pending once it has
    /// waited an interval for more work.
    #[test]
    fn a_quiet_store_syncs_after_an_interval() {
        let path = std::env::temp_dir().join(format!("kbng-commit-sync-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        // Long enough that the two batches below land within one interval even on a loaded
        // machine: at 100 ms that was left to the scheduler.
        let every = std::time::Duration::from_secs(1);
        let store = Arc::new(Store::open_with(&path, SyncPolicy::Interval(every)).expect("open"));
        let (watch, _) = broadcast::channel(16);
        let c = Committer::start(Arc::clone(&store), Vec::new(), watch).expect("start");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        rt.block_on(async {
            for i in 1..=2u64 {
                let done = done_tx.clone();
                let fx = Effects {
                    store: vec![StoreOp::Put(Box::new(session(i)))],
                    next_id: i + 1,
                    replies: vec![Box::new(move || {
                        let _ = done.send(i);
                    })],
                    ..Effects::default()
                };
                assert!(c.submit(fx).await);
            }
        });
        for _ in 1..=2 {
            done_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("released");
        }
        // The opening commit synced; the two batches were committed within one interval of
        // it, so at most one more sync happened with them.
        let after_commits = store.sync().syncs();
        assert!(after_commits <= 2, "{after_commits} syncs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.sync().syncs() == after_commits && std::time::Instant::now() < deadline {
            std::thread::sleep(every / 10);
        }
        assert_eq!(
            store.sync().syncs(),
            after_commits + 1,
            "the idle commit thread synced"
        );
        drop(c);
        let _ = std::fs::remove_file(&path);
    }

    /// A batch without store changes leaves at once when nothing is pending, and waits behind
    /// an earlier batch that is still committing.
    #[test]
    fn an_unstored_batch_overtakes_nothing() {
        let path = std::env::temp_dir().join(format!("kbng-commit-idle-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Arc::new(Store::open(&path).expect("open"));
        let (dp_tx, _dp_rx) = mpsc::unbounded_channel();
        let (watch, _) = broadcast::channel(16);
        let c = Committer::start(store, vec![dp_tx], watch).expect("start");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let note = |n: u32| -> Reply {
            let o = Arc::clone(&order);
            Box::new(move || o.lock().expect("order").push(n))
        };
        rt.block_on(async {
            let idle = Effects {
                replies: vec![note(1)],
                ..Effects::default()
            };
            assert!(c.submit(idle).await);
            // Nothing was pending: released by submit itself, no commit thread involved.
            assert_eq!(*order.lock().expect("order"), vec![1]);
            let stored = Effects {
                store: vec![StoreOp::Put(Box::new(session(7)))],
                next_id: 8,
                replies: vec![note(2)],
                ..Effects::default()
            };
            assert!(c.submit(stored).await);
            let behind = Effects {
                replies: vec![note(3)],
                ..Effects::default()
            };
            assert!(c.submit(behind).await);
        });
        drop(c);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while order.lock().expect("order").len() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(*order.lock().expect("order"), vec![1, 2, 3]);
        let _ = std::fs::remove_file(&path);
    }
}
