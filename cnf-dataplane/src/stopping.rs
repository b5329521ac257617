//! A stop that lets the control read the counters one last time.
//!
//! The control keeps a session's accounting totals from its readings of the dataplane's
//! counters (RADIUS interims, every few minutes). A dataplane that stops takes with it what
//! its counters gathered since the last reading: a restart for an upgrade would drop minutes
//! of every subscriber's traffic from accounting. So on SIGTERM the dataplane tells the
//! control on the Punt stream (`PuntedFrame.stopping`), goes on serving its gRPC, and stops
//! once the control has read (GetCounters calls came and then went quiet for [`QUIET`]), or
//! after its grace (`--stop-grace-ms`) at the latest. Only traffic forwarded after that last
//! read goes unaccounted.

use std::time::Duration;

use tokio::time::Instant;

/// After the control's reads begin, this long without another means it has read all it
/// wanted (it asks for a thousand sessions per call, back to back).
pub const QUIET: Duration = Duration::from_millis(200);

/// How often the count of reads is looked at.
const POLL: Duration = Duration::from_millis(20);

/// Why the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The control read the counters, then went quiet.
    Read,
    /// The grace ran out first.
    Grace,
}

/// Waits, after the control was told, until its counter reads (`reads()` counts the calls
/// served) have come and gone quiet, or `grace` has passed.
pub async fn wait_for_last_reads(reads: impl Fn() -> u64, grace: Duration) -> Ended {
    let start = Instant::now();
    let before = reads();
    let (mut seen, mut changed_at) = (before, start);
    loop {
        let now = Instant::now();
        let n = reads();
        if n != seen {
            (seen, changed_at) = (n, now);
        }
        if seen != before && now.duration_since(changed_at) >= QUIET {
            return Ended::Read;
        }
        if now.duration_since(start) >= grace {
            return Ended::Grace;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_once_the_reads_go_quiet_or_at_the_grace() {
        let reads = Arc::new(AtomicU64::new(7));
        let count = {
            let r = Arc::clone(&reads);
            move || r.load(Ordering::Relaxed)
        };
        // No read at all: the whole grace.
        let t = Instant::now();
        let ended = wait_for_last_reads(count.clone(), Duration::from_secs(2)).await;
        assert_eq!(ended, Ended::Grace);
        assert!(t.elapsed() >= Duration::from_secs(2));

        // Reads at 100, 300 and 450 ms: quiet from 450, done by about 650 ms.
        let r = Arc::clone(&reads);
        tokio::spawn(async move {
            for at in [100, 200, 150] {
                tokio::time::sleep(Duration::from_millis(at)).await;
                r.fetch_add(1, Ordering::Relaxed);
            }
        });
        let t = Instant::now();
        let ended = wait_for_last_reads(count, Duration::from_secs(2)).await;
        assert_eq!(ended, Ended::Read);
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(650) && took < Duration::from_millis(700),
            "{took:?}"
        );
    }
}
