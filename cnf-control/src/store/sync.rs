//! When the store's writes reach the disk: redb's file backend with a sync policy in front.
//!
//! Every commit writes its pages to the file (the kernel's page cache) before the commit
//! returns, whatever the policy, so a session survives a crash or `kill -9` of the control
//! the moment its ACK leaves. The policy decides when those pages are forced to the disk,
//! which is what a crash of the machine (power, kernel) needs:
//! - [`SyncPolicy::EveryCommit`] (the default): each commit ends in an `fdatasync`, so an ACK
//!   never leaves before its lease would survive a power loss.
//! - [`SyncPolicy::Interval`]: at most one `fdatasync` per interval; a commit in between
//!   returns once its pages are written. A machine crash can lose the leases of the last
//!   interval (their clients keep their addresses and the reconciliation after the restart
//!   does not know them). Kea's memfile backend, the bench's baseline, never syncs its lease
//!   file; this is the same guarantee with a bound on the loss.
//!
//! The sync the interval skipped is made when the next commit comes after the interval or,
//! with no further commit, by [`SyncHandle::sync_if_pending`], which the commit thread calls
//! once it has waited an interval for work. redb's commit protocol (a checksummed header
//! naming the new root) keeps the file consistent when a machine crash cuts in between.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

// redb's I/O error type without its `experimental-api-5` feature.
type BackendIoError = std::io::Error;

/// When commits are forced to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// `fdatasync` at the end of every commit.
    #[default]
    EveryCommit,
    /// At most one `fdatasync` per this interval.
    Interval(Duration),
}

#[derive(Debug)]
struct SyncState {
    policy: SyncPolicy,
    /// When the last `fdatasync` started (`None`: never, so the first commit syncs).
    last: Mutex<Option<Instant>>,
    /// A commit has been written and not yet synced.
    pending: AtomicBool,
    syncs: AtomicU64,
}

/// The commit thread's hold on the backend that redb owns.
#[derive(Debug, Clone)]
pub struct SyncHandle {
    state: Arc<SyncState>,
    backend: Arc<FileBackend>,
}

impl SyncHandle {
    /// The policy in force.
    pub fn policy(&self) -> SyncPolicy {
        self.state.policy
    }

    /// `fdatasync` calls made so far.
    pub fn syncs(&self) -> u64 {
        self.state.syncs.load(Ordering::Relaxed)
    }

    /// Sync now if a commit is waiting for its sync (interval policy, nothing committed
    /// since).
    pub fn sync_if_pending(&self) -> Result<(), BackendIoError> {
        if self.state.pending.swap(false, Ordering::AcqRel) {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), BackendIoError> {
        if let Ok(mut last) = self.state.last.lock() {
            *last = Some(Instant::now());
        }
        self.state.syncs.fetch_add(1, Ordering::Relaxed);
        self.backend.sync_data()
    }
}

/// redb's [`FileBackend`] whose `sync_data` follows a [`SyncPolicy`].
#[derive(Debug)]
pub struct PolicyBackend {
    handle: SyncHandle,
}

impl PolicyBackend {
    /// A backend over `file` with `policy`, and the handle for the commit thread.
    pub fn new(
        file: std::fs::File,
        policy: SyncPolicy,
    ) -> Result<(PolicyBackend, SyncHandle), redb::DatabaseError> {
        let backend = Arc::new(FileBackend::new(file)?);
        let handle = SyncHandle {
            state: Arc::new(SyncState {
                policy,
                last: Mutex::new(None),
                pending: AtomicBool::new(false),
                syncs: AtomicU64::new(0),
            }),
            backend,
        };
        Ok((
            PolicyBackend {
                handle: handle.clone(),
            },
            handle,
        ))
    }

    fn inner(&self) -> &FileBackend {
        &self.handle.backend
    }
}

impl StorageBackend for PolicyBackend {
    fn len(&self) -> Result<u64, BackendIoError> {
        self.inner().len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), BackendIoError> {
        self.inner().read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), BackendIoError> {
        self.inner().set_len(len)
    }

    fn sync_data(&self) -> Result<(), BackendIoError> {
        let h = &self.handle;
        match h.state.policy {
            SyncPolicy::EveryCommit => h.sync(),
            SyncPolicy::Interval(every) => {
                let due = h
                    .state
                    .last
                    .lock()
                    .map_or(true, |l| l.is_none_or(|t| t.elapsed() >= every));
                if due {
                    h.state.pending.store(false, Ordering::Release);
                    h.sync()
                } else {
                    h.state.pending.store(true, Ordering::Release);
                    Ok(())
                }
            }
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), BackendIoError> {
        self.inner().write(offset, data)
    }

    fn close(&self) -> Result<(), BackendIoError> {
        // A clean shutdown leaves nothing unsynced.
        self.handle.sync_if_pending()?;
        self.inner().close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner().try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner().try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner().lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner().lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner().unlock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::session;
    use crate::store::{Store, StoreOp};

    fn temp(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("kbng-sync-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    fn put(store: &Store, id: u64) {
        let op = [StoreOp::Put(Box::new(session(id)))];
        store.apply_all(&[&op], id + 1).expect("commit");
    }

    #[test]
    fn every_commit_syncs() {
        let path = temp("every");
        let store = Store::open(&path).expect("open");
        let before = store.sync().syncs();
        for id in 1..=3 {
            put(&store, id);
        }
        assert!(
            store.sync().syncs() >= before + 3,
            "one sync per commit at least"
        );
        let _ = std::fs::remove_file(&path);
    }

    /// Within an interval commits are written, not synced; the pending sync is made on demand
    /// and on close, and what was committed is there after a reopen.
    #[test]
    fn interval_syncs_once_per_interval_and_on_close() {
        let path = temp("interval");
        let policy = SyncPolicy::Interval(Duration::from_secs(3600));
        let store = Store::open_with(&path, policy).expect("open");
        // Opening commits the tables: the first commit of the process syncs.
        let first = store.sync().syncs();
        assert_eq!(first, 1);
        for id in 1..=5 {
            put(&store, id);
        }
        assert_eq!(store.sync().syncs(), first, "no sync within the interval");
        store.sync().sync_if_pending().expect("sync");
        assert_eq!(store.sync().syncs(), first + 1);
        store.sync().sync_if_pending().expect("nothing pending");
        assert_eq!(store.sync().syncs(), first + 1, "nothing left to sync");
        put(&store, 6);
        let handle = store.sync().clone();
        drop(store);
        assert_eq!(handle.syncs(), first + 2, "closing synced the last commit");
        let reopened = Store::open_with(&path, policy).expect("reopen");
        let (all, next) = reopened.load().expect("load");
        assert_eq!(all.len(), 6);
        assert_eq!(next, 7);
        let _ = std::fs::remove_file(&path);
    }
}
