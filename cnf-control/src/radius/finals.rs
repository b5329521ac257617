//! Final counters for accounting Stop, read from the dataplane just before it removes a session.
//!
//! The dataplane forgets a session's counters when it removes it, and the removal is queued in
//! the same engine batch that asks for the Stop, so a Stop that read the counters on its own
//! would race the removal (and lose, leaving it up to one interim behind). Instead:
//! 1. the engine task, forwarding the Stop ([`super::Link::forward`]), marks the session as
//!    waiting for its final counters, before the removal is even handed to the dataplane task;
//! 2. the dataplane adapter calls [`before_removal`] ahead of each RemoveSessions; it reads the
//!    marked sessions of that batch over the adapter's own connection and hands the counters to
//!    the RADIUS task, which then sends the Stop.
//!
//! Removals of sessions nobody waits for (no accounting, captive without a Start) cost one
//! lock and no RPC. Traffic between this read and the removal, one round trip later, is not
//! counted; returning the counters from RemoveSessions would close that gap but changes the
//! dataplane contract. A dataplane that is unreachable never calls here: the RADIUS task gives
//! up waiting after a deadline and sends the last interim's counters, counted as such.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kbng_api::v1::dataplane_client::DataplaneClient;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use super::RadiusCmd;
use super::accounting::read_counters;
use crate::core::SessionId;

/// Sessions whose Stop waits for their counters, and where to send them. Process-wide because
/// the dataplane adapter knows nothing of RADIUS; one RADIUS task runs per process.
struct Waiting {
    tx: Option<mpsc::UnboundedSender<RadiusCmd>>,
    ids: BTreeSet<SessionId>,
}

static WAITING: Mutex<Waiting> = Mutex::new(Waiting {
    tx: None,
    ids: BTreeSet::new(),
});

fn with<T>(f: impl FnOnce(&mut Waiting) -> T) -> Option<T> {
    WAITING.lock().ok().map(|mut w| f(&mut w))
}

/// The RADIUS task's command channel receives the counters from now on. Ids already waited
/// for stay (ids are never reused, so they cannot be mistaken for new ones).
pub(super) fn register(tx: mpsc::UnboundedSender<RadiusCmd>) {
    with(|w| w.tx = Some(tx));
}

/// Session `id`'s Stop waits for its final counters.
pub(super) fn expect(id: SessionId) {
    with(|w| w.ids.insert(id));
}

/// Stop waiting for `id` (its deadline passed).
pub(super) fn forget(id: SessionId) {
    with(|w| w.ids.remove(&id));
}

/// Which of `ids` are waited for; they are waited for no longer.
fn take(ids: &[SessionId]) -> Option<(Vec<SessionId>, mpsc::UnboundedSender<RadiusCmd>)> {
    with(|w| {
        if w.ids.is_empty() {
            return None;
        }
        let tx = w.tx.clone()?;
        let asked: Vec<SessionId> = ids.iter().copied().filter(|i| w.ids.remove(i)).collect();
        (!asked.is_empty()).then_some((asked, tx))
    })
    .flatten()
}

/// Called by the dataplane adapter just before it removes `ids`: reads the counters of those a
/// Stop waits for and hands them to the RADIUS task.
pub async fn before_removal(c: &mut DataplaneClient<Channel>, ids: &[SessionId]) {
    let Some((asked, tx)) = take(ids) else {
        return;
    };
    let counts = read_counters(c, &asked).await;
    let _ = tx.send(RadiusCmd::Finals { asked, counts });
}

#[cfg(test)]
mod tests {
    use super::*;

    // The task test registers too; ids here are ones no other test waits for.
    #[test]
    fn only_waited_for_sessions_are_taken_once_each() {
        let (tx, _rx) = mpsc::unbounded_channel();
        register(tx);
        assert!(take(&[1, 2, 3]).is_none(), "nothing waited for");
        expect(2);
        expect(7);
        expect(9);
        let (asked, _) = take(&[1, 2, 3, 7]).unwrap();
        assert_eq!(asked, vec![2, 7]);
        assert!(take(&[2, 7]).is_none(), "taken once");
        forget(9);
        assert!(take(&[9]).is_none(), "forgotten after its deadline");
    }
}
