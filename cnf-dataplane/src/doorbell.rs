//! Wake-ups of a worker from the control thread, so that a worker in idle back-off waits for
//! a frame the control plane injected or a command it queued instead of polling on a timer.
//! (The other direction, a worker waking a task on the control thread, is [`crate::task_bell`].)
//!
//! Ringing is `Thread::unpark`: an atomic swap, and a futex wake only when the owner is
//! actually parked. Waiting is `park_timeout`, which may return early (a ring that came
//! while the owner was running, or a spurious wake-up): every owner re-checks its rings.

use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

/// A wake-up for one thread, the first to call [`Doorbell::answer_here`].
#[derive(Debug, Clone, Default)]
pub struct Doorbell(Arc<OnceLock<Thread>>);

impl Doorbell {
    /// Make the calling thread the one this doorbell wakes (the first caller stays).
    pub fn answer_here(&self) {
        let _ = self.0.set(std::thread::current());
    }

    /// Wake the owner if it waits; before anyone answers, nothing happens.
    #[inline]
    pub fn ring(&self) {
        if let Some(t) = self.0.get() {
            t.unpark();
        }
    }

    /// Wait until rung or for `timeout`, whichever comes first; the caller must be the owner.
    pub fn wait(&self, timeout: Duration) {
        std::thread::park_timeout(timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_ring_ends_the_wait_long_before_the_timeout() {
        let bell = Doorbell::default();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let b = bell.clone();
        let waiter = std::thread::spawn(move || {
            b.answer_here();
            ready_tx.send(()).unwrap();
            let t = Instant::now();
            // A ring may come before the park: then the wait returns at once.
            b.wait(Duration::from_secs(20));
            t.elapsed()
        });
        ready_rx.recv().unwrap();
        bell.ring();
        let waited = waiter.join().unwrap();
        assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    }

    #[test]
    fn ringing_before_anyone_answers_does_nothing() {
        let bell = Doorbell::default();
        bell.ring();
        // Had that ring reached a thread, its unpark token would end this wait at once.
        let b = bell.clone();
        let waited = std::thread::spawn(move || {
            b.answer_here();
            let t = Instant::now();
            b.wait(Duration::from_millis(50));
            t.elapsed()
        })
        .join()
        .unwrap();
        assert!(waited >= Duration::from_millis(40), "waited {waited:?}");
    }
}
