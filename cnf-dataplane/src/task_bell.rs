//! Wake-ups from a worker to a task on the control thread's tokio runtime, without a lock or
//! an allocation on the worker: a worker that emptied its command ring tells the gRPC call
//! waiting for "installed on every core", and a worker that punted tells the punt pump.
//!
//! A task could otherwise only poll. The waiting install call used to yield in a loop for up
//! to 2 ms: on the DHCP bench's two shared vCPUs a worker woken from its idle sleep often
//! waited for a CPU while the control thread spun, and that spinning was a third of the
//! dataplane's CPU per DORA. A tokio `Notify` or waker would take the scheduler's mutex on the
//! worker.
//!
//! The signal is a datagram on a Unix socket pair (standard library): the worker sends one
//! byte without blocking, and the task awaits the socket's readability. Datagrams queue, so a
//! signal sent before the task starts waiting is not lost; a stale one only costs a re-check.
//! The task re-checks at least every [`RECHECK`] regardless, so a dropped signal (a full
//! socket buffer) delays work, never stalls it.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use tokio::time::Instant;

/// The longest a waiter sleeps before looking at the workers' counters again.
pub const RECHECK: Duration = Duration::from_millis(5);

/// A worker's end.
#[derive(Debug)]
pub struct TaskBell(UnixDatagram);

impl TaskBell {
    /// Signal the waiter; never blocks. A full socket buffer means signals are already
    /// pending, so this one is not needed and is dropped.
    #[inline]
    pub fn ring(&self) {
        let _ = self.0.send(&[1]);
    }
}

/// The task's end.
#[derive(Debug)]
pub struct TaskWait {
    /// Until first awaited: a tokio socket can only be made inside the runtime.
    std: Option<UnixDatagram>,
    sock: Option<tokio::net::UnixDatagram>,
}

/// A connected pair; [`TaskBells::bell`] makes one bell per worker.
pub fn pair() -> io::Result<(TaskWait, TaskBells)> {
    let (wait, bell) = UnixDatagram::pair()?;
    wait.set_nonblocking(true)?;
    bell.set_nonblocking(true)?;
    Ok((
        TaskWait {
            std: Some(wait),
            sock: None,
        },
        TaskBells(bell),
    ))
}

/// Makes bells that all reach one [`TaskWait`].
#[derive(Debug)]
pub struct TaskBells(UnixDatagram);

impl TaskBells {
    /// A bell for one more worker.
    pub fn bell(&self) -> io::Result<TaskBell> {
        Ok(TaskBell(self.0.try_clone()?))
    }
}

impl TaskWait {
    /// Wait until a worker signals, [`RECHECK`] passes, or `deadline`, whichever is first,
    /// then discard every other pending signal (the caller re-checks what it waits for).
    pub async fn wait(&mut self, deadline: Instant) {
        self.wait_with(deadline, RECHECK).await;
    }

    /// [`TaskWait::wait`] with `recheck` in place of [`RECHECK`]; whether a signal ended it.
    /// The tests pass a long `recheck`, so that what ended a wait is told by the result rather
    /// than by a few milliseconds of wall clock that a loaded machine does not keep.
    pub(crate) async fn wait_with(&mut self, deadline: Instant, recheck: Duration) -> bool {
        let until = deadline.min(Instant::now() + recheck);
        let Some(sock) = self.socket() else {
            tokio::time::sleep_until(until).await;
            return false;
        };
        let mut buf = [0u8; 8];
        let rang = matches!(
            tokio::time::timeout_at(until, sock.recv(&mut buf)).await,
            Ok(Ok(_))
        );
        while sock.try_recv(&mut buf).is_ok() {}
        rang
    }

    fn socket(&mut self) -> Option<&tokio::net::UnixDatagram> {
        if self.sock.is_none() {
            let std = self.std.take()?;
            match tokio::net::UnixDatagram::from_std(std) {
                Ok(s) => self.sock = Some(s),
                Err(e) => tracing::warn!("a worker wake-up falls back to polling: {e}"),
            }
        }
        self.sock.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Longer than any scheduling delay of a loaded test machine, far below the test timeout.
    const PATIENT: Duration = Duration::from_secs(20);

    #[tokio::test]
    async fn a_ring_ends_the_wait_long_before_the_recheck() {
        let (mut wait, bells) = pair().unwrap();
        let bell = bells.bell().unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let t = std::time::Instant::now();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1));
            bell.ring();
        });
        // The ringer thread may wait for a CPU for longer than RECHECK on a loaded machine,
        // so the wait is given a recheck it cannot reach: only the ring can end it.
        let rang = wait.wait_with(far, PATIENT).await;
        ringer.join().unwrap();
        assert!(
            rang,
            "the wait ended without the ring after {:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < PATIENT / 2, "woke after {:?}", t.elapsed());
    }

    #[tokio::test]
    async fn without_a_ring_the_wait_ends_at_the_recheck_or_the_deadline() {
        let (mut wait, _bells) = pair().unwrap();
        let t = std::time::Instant::now();
        let rang = wait
            .wait_with(Instant::now() + Duration::from_secs(60), RECHECK)
            .await;
        assert!(
            !rang && t.elapsed() >= RECHECK,
            "woke after {:?}",
            t.elapsed()
        );
        // The deadline, not the recheck, ends this one: a delay of the runtime thread can
        // lengthen it, but never to the recheck.
        let t = std::time::Instant::now();
        let rang = wait
            .wait_with(Instant::now() + Duration::from_millis(1), PATIENT)
            .await;
        assert!(
            !rang && t.elapsed() < PATIENT / 2,
            "the deadline was ignored: {:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn pending_rings_are_consumed_by_one_wait() {
        let (mut wait, bells) = pair().unwrap();
        let bell = bells.bell().unwrap();
        for _ in 0..100 {
            bell.ring();
        }
        wait.wait(Instant::now() + Duration::from_secs(60)).await;
        let t = std::time::Instant::now();
        wait.wait(Instant::now() + Duration::from_millis(20)).await;
        assert!(
            t.elapsed() >= Duration::from_millis(5),
            "a stale ring ended the second wait at once"
        );
    }

    #[tokio::test]
    async fn ringing_with_nobody_reading_never_blocks() {
        let (mut wait, bells) = pair().unwrap();
        let bell = bells.bell().unwrap();
        // Far more rings than the socket buffer holds: the surplus is dropped, not waited on
        // (a blocking send would hang here, and the test with it).
        let t = std::time::Instant::now();
        for _ in 0..100_000 {
            bell.ring();
        }
        assert!(t.elapsed() < PATIENT / 2, "rang for {:?}", t.elapsed());
        let far = Instant::now() + Duration::from_secs(60);
        assert!(
            wait.wait_with(far, PATIENT).await,
            "the rings that fit are seen"
        );
        let near = Instant::now() + Duration::from_millis(1);
        assert!(
            !wait.wait_with(near, PATIENT).await,
            "all consumed by one wait"
        );
    }
}
