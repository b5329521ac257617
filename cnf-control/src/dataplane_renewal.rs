//! When a dataplane's connection is reopened after the control's TLS files change: dataplane
//! `i` waits `i` × [`SPACING`] first, so that a renewal does not drop every punt stream at
//! once and reconcile every dataplane at the same moment (each reconnect lists the
//! dataplane's sessions). The old connection serves meanwhile; the certificate it was opened
//! with stays valid for days after a renewal.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Between two dataplanes' reconnects after a renewal.
pub const SPACING: Duration = Duration::from_secs(2);

/// A dataplane's view of the TLS files' changes.
#[derive(Debug)]
pub struct Renewal {
    /// Changes when the files do; `None` without TLS or once the watcher is gone.
    files: Option<watch::Receiver<Option<u64>>>,
    /// This dataplane's wait after a change.
    delay: Duration,
    /// When the connection is to be reopened for a change already seen. Kept here, not in
    /// the future that waits for it, because that future is dropped at every turn of the
    /// connection's loop.
    due: Option<Instant>,
}

impl Renewal {
    pub fn new(files: Option<watch::Receiver<Option<u64>>>, index: u32) -> Self {
        Renewal {
            files,
            delay: SPACING.saturating_mul(index),
            due: None,
        }
    }

    /// A connection is being opened with the files as they are now: changes from here on
    /// reopen it.
    pub fn mark(&mut self) {
        if let Some(r) = self.files.as_mut() {
            r.borrow_and_update();
        }
        self.due = None;
    }

    /// Ready when the connection is to be reopened; never without TLS, or once the watcher
    /// is gone. Cancel-safe: a change seen by a dropped call is waited for by the next.
    pub async fn due(&mut self) {
        if self.due.is_none() {
            let changed = match self.files.as_mut() {
                Some(r) => r.changed().await.is_ok(),
                None => false,
            };
            if !changed {
                self.files = None;
                std::future::pending::<()>().await;
            }
            self.due = Some(Instant::now() + self.delay);
        }
        if let Some(at) = self.due {
            tokio::time::sleep_until(at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `r.due()` completes within `within` of (paused) time.
    async fn ready_within(r: &mut Renewal, within: Duration) -> bool {
        tokio::time::timeout(within, r.due()).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn each_dataplane_reconnects_its_own_spacing_after_a_change() {
        let (tx, rx) = watch::channel(None);
        let mut first = Renewal::new(Some(rx.clone()), 0);
        let mut third = Renewal::new(Some(rx), 2);
        first.mark();
        third.mark();
        assert!(!ready_within(&mut first, Duration::from_secs(60)).await);
        tx.send_replace(Some(1));
        assert!(ready_within(&mut first, Duration::from_millis(1)).await);
        // Polled and dropped over and over, as the connection's loop does: the change is not
        // lost and the wait does not start again.
        let start = Instant::now();
        for _ in 0..3 {
            assert!(!ready_within(&mut third, Duration::from_secs(1)).await);
        }
        assert!(ready_within(&mut third, Duration::from_secs(2)).await);
        let waited = start.elapsed();
        assert!(waited >= SPACING * 2 && waited < SPACING * 2 + Duration::from_millis(10));
        // Reopened: quiet until the next change.
        third.mark();
        assert!(!ready_within(&mut third, Duration::from_secs(60)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn without_tls_or_once_the_watcher_is_gone_never() {
        assert!(!ready_within(&mut Renewal::new(None, 0), Duration::from_secs(60)).await);
        let (tx, rx) = watch::channel(None);
        let mut r = Renewal::new(Some(rx), 0);
        r.mark();
        drop(tx);
        assert!(!ready_within(&mut r, Duration::from_secs(60)).await);
    }
}
