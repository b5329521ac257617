//! RADIUS Idle-Timeout (RFC 2865 §5.28): a session whose subscriber sends nothing for that
//! many seconds ends, Acct-Terminate-Cause Idle-Timeout.
//!
//! Idle means no upstream packet. Downstream traffic does not count: anyone on the Internet
//! can send a subscriber packets (scans), and they would keep an abandoned session alive.
//! The dataplane counts per session but does not timestamp, so activity is seen by reading
//! the counters: a session is read every half Idle-Timeout, and at the moment its idle time
//! would reach the limit. Activity is dated when its growth is first seen, which is never
//! before the last packet, so a session never ends early; it ends at most half its
//! Idle-Timeout late. Interim readings count as sightings too. The last sighting is kept in
//! the accounting file, so that a control restart does not start a session's idle count
//! afresh: a session still at that sighting's packets when first read after the restart has
//! been idle since it.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::core::SessionId;

/// The last sighting of a session's upstream traffic.
#[derive(Debug, Clone, Copy)]
struct Seen {
    limit: Duration,
    packets: u64,
    at: Instant,
}

/// What a reading says of a watched session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Active within its limit: read again later.
    Watching,
    /// Idle for at least its Idle-Timeout: end it (and it is no longer watched).
    Idle,
    /// Not watched (no Idle-Timeout, or already ended).
    Unwatched,
}

/// The sessions with an Idle-Timeout and when each is next read.
#[derive(Debug, Default)]
pub struct IdleWatch {
    seen: HashMap<SessionId, Seen>,
    /// An entry of a session no longer watched, or read since, is skipped when it comes up.
    due: BTreeSet<(Instant, SessionId)>,
}

impl IdleWatch {
    /// Watch session `id`, whose upstream packets so far are `packets`, for `secs` seconds
    /// of idleness from `now` (a Start, or a CoA's Idle-Timeout).
    pub fn watch(&mut self, id: SessionId, secs: u32, packets: u64, now: Instant) {
        self.watch_since(id, secs, packets, now, now);
    }

    /// [`Self::watch`] for a session last seen active at `since` (a restore: its kept
    /// sighting), with `packets` as it had then; read first at once if half its Idle-Timeout
    /// has passed since then.
    pub fn watch_since(
        &mut self,
        id: SessionId,
        secs: u32,
        packets: u64,
        since: Instant,
        now: Instant,
    ) {
        if secs == 0 {
            return;
        }
        let limit = Duration::from_secs(u64::from(secs));
        let at = since.min(now);
        self.seen.insert(id, Seen { limit, packets, at });
        self.due.insert(((at + half(limit)).max(now), id));
    }

    pub fn forget(&mut self, id: SessionId) {
        self.seen.remove(&id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }

    /// The watched sessions due to be read at `now`.
    pub fn due(&mut self, now: Instant) -> Vec<SessionId> {
        let mut ids = Vec::new();
        while let Some(&(t, id)) = self.due.first() {
            if t > now {
                break;
            }
            self.due.pop_first();
            if self.seen.contains_key(&id) {
                ids.push(id);
            }
        }
        ids
    }

    /// A reading of session `id`'s upstream packets (`None`: its counters could not be read)
    /// taken at `now` for its idle check; and whether it was a new sighting (see [`Self::note`]).
    pub fn read(&mut self, id: SessionId, packets: Option<u64>, now: Instant) -> (Verdict, bool) {
        let sighted = self.note(id, packets, now);
        (self.verdict(id, packets, now), sighted)
    }

    fn verdict(&mut self, id: SessionId, packets: Option<u64>, now: Instant) -> Verdict {
        let Some(s) = self.seen.get(&id) else {
            return Verdict::Unwatched;
        };
        let idle_for = now.saturating_duration_since(s.at);
        if packets.is_some() && idle_for >= s.limit {
            self.seen.remove(&id);
            return Verdict::Idle;
        }
        // Unread counters tell nothing: try again, as for an active session.
        let next = (s.at + s.limit)
            .min(now + half(s.limit))
            .max(now + MIN_STEP);
        self.due.insert((next, id));
        Verdict::Watching
    }

    /// Any other reading (an interim's): dates the activity, schedules nothing. True when it
    /// was a new sighting of activity (a watched session's packets moved): the caller keeps it.
    pub fn note(&mut self, id: SessionId, packets: Option<u64>, now: Instant) -> bool {
        if let (Some(s), Some(p)) = (self.seen.get_mut(&id), packets)
            && p != s.packets
        {
            s.packets = p;
            s.at = now;
            return true;
        }
        false
    }
}

/// Reads of one session are at least this far apart, however short its Idle-Timeout.
const MIN_STEP: Duration = Duration::from_millis(500);

fn half(limit: Duration) -> Duration {
    (limit / 2).max(MIN_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_session_ends_after_its_limit_and_not_before() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = IdleWatch::default();
        w.watch(1, 10, 100, t0);
        w.watch(2, 0, 0, t0);
        assert_eq!(w.len(), 1, "no Idle-Timeout, no watch");
        assert!(w.due(s(4)).is_empty());
        assert_eq!(w.due(s(5)), [1]);
        assert_eq!(w.read(1, Some(100), s(5)).0, Verdict::Watching);
        // Next read exactly when the limit is reached.
        assert!(w.due(s(9)).is_empty());
        assert_eq!(w.due(s(10)), [1]);
        assert_eq!(w.read(1, Some(100), s(10)).0, Verdict::Idle);
        assert_eq!(w.len(), 0);
        assert_eq!(w.read(1, Some(100), s(11)).0, Verdict::Unwatched);
    }

    #[test]
    fn upstream_traffic_or_an_unreadable_counter_keeps_it() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = IdleWatch::default();
        w.watch(1, 10, 100, t0);
        assert_eq!(w.due(s(5)), [1]);
        assert_eq!(w.read(1, Some(101), s(5)), (Verdict::Watching, true));
        // Active at 5 s: idle only from then, so at 10 s it is not yet.
        assert_eq!(w.due(s(10)), [1]);
        assert_eq!(w.read(1, Some(101), s(10)), (Verdict::Watching, false));
        assert_eq!(w.due(s(14)), Vec::<SessionId>::new());
        assert_eq!(w.due(s(15)), [1]);
        assert_eq!(
            w.read(1, None, s(15)),
            (Verdict::Watching, false),
            "unread: cannot tell"
        );
        // An interim reading saw traffic at 16 s.
        assert!(w.note(1, Some(150), s(16)));
        assert_eq!(w.due(s(20)), [1]);
        assert_eq!(w.read(1, Some(150), s(20)).0, Verdict::Watching);
        assert_eq!(w.due(s(26)), [1]);
        assert_eq!(w.read(1, Some(150), s(26)).0, Verdict::Idle);
    }

    #[test]
    fn a_restored_session_counts_from_its_kept_sighting() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = IdleWatch::default();
        // Last seen active at 0 s; the control restarted and restores it at 6 s.
        w.watch_since(1, 8, 100, s(0), s(6));
        assert_eq!(w.due(s(6)), [1], "half its limit has passed: read at once");
        assert_eq!(w.read(1, Some(100), s(6)), (Verdict::Watching, false));
        assert!(w.due(s(7)).is_empty());
        assert_eq!(
            w.due(s(8)),
            [1],
            "read when 8 s from the sighting have passed"
        );
        assert_eq!(w.read(1, Some(100), s(8)).0, Verdict::Idle);
        // Active since the sighting: counted from the reading that saw it.
        w.watch_since(2, 8, 100, s(0), s(6));
        assert_eq!(w.due(s(6)), [2]);
        assert_eq!(w.read(2, Some(120), s(6)), (Verdict::Watching, true));
        assert_eq!(w.due(s(10)), [2]);
        assert_eq!(w.read(2, Some(120), s(10)).0, Verdict::Watching);
        assert!(w.due(s(13)).is_empty());
        assert_eq!(w.due(s(14)), [2]);
        assert_eq!(w.read(2, Some(120), s(14)).0, Verdict::Idle);
        // A sighting "later" than now (a clock stepped back) counts from now.
        w.watch_since(3, 8, 0, s(30), s(20));
        assert!(w.due(s(23)).is_empty());
        assert_eq!(w.due(s(24)), [3]);
    }

    #[test]
    fn a_forgotten_session_is_not_read() {
        let t0 = Instant::now();
        let mut w = IdleWatch::default();
        w.watch(1, 1, 0, t0);
        w.forget(1);
        assert!(w.due(t0 + Duration::from_secs(5)).is_empty());
    }
}
