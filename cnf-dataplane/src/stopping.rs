//! A stop that lets the control read the counters one last time.
//!
//! The control keeps a session's accounting totals from its readings of the dataplane's
//! counters (RADIUS interims, reads between them). A dataplane that stops takes with it what
//! its counters gathered since the last reading: a restart for an upgrade would drop that
//! much of every subscriber's traffic from accounting. So on SIGTERM the dataplane tells the
//! control on the Punt stream (`PuntedFrame.stopping`), goes on serving its gRPC, and stops
//! once the control's last read (`GetCountersRequest.last_read`, sent after it has read every
//! session it wanted) is answered, or after its grace (`--stop-grace-ms`) at the latest. Only
//! traffic forwarded after that last read goes unaccounted.
//!
//! The end is told, not guessed from reads going quiet: the control also reads counters for
//! interims, idle checks and the reads between interims, and one of those could have been
//! taken for the last read.

use std::future::Future;
use std::time::Duration;

/// Why the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The control's last read was answered.
    Read,
    /// The grace ran out first.
    Grace,
}

/// Waits, after the control was told, until `last_read` (the service's
/// `last_read_served`) completes, or `grace` has passed.
pub async fn wait_for_last_read(last_read: impl Future<Output = ()>, grace: Duration) -> Ended {
    match tokio::time::timeout(grace, last_read).await {
        Ok(()) => Ended::Read,
        Err(_) => Ended::Grace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Notify;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_at_the_last_read_or_at_the_grace() {
        let told = Arc::new(Notify::new());
        // No last read: the whole grace, whatever other reads come.
        let t = Instant::now();
        let ended = wait_for_last_read(told.notified(), Duration::from_secs(2)).await;
        assert_eq!(ended, Ended::Grace);
        assert!(t.elapsed() >= Duration::from_secs(2));

        // The last read at 300 ms: done then, not at the grace.
        let n = Arc::clone(&told);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            n.notify_one();
        });
        let t = Instant::now();
        let ended = wait_for_last_read(told.notified(), Duration::from_secs(2)).await;
        assert_eq!(ended, Ended::Read);
        assert_eq!(t.elapsed(), Duration::from_millis(300));
    }
}
