//! A DISCOVER that finds its session still releasing: a client that released and at once
//! came back, or, with option 82 or line identity, a CPE swapped on the line, whose DISCOVER
//! ended the old device's session. The address and the line are free only once the dataplane
//! confirms the removal, a few milliseconds later; a client left unanswered until then waits
//! out its retransmission (four seconds or more, RFC 2131 §4.1), so the DISCOVER is held and
//! answered when the removal is confirmed.

use super::super::dhcp::Inbound;
use super::super::{Line, SessionId};
use super::{Engine, NS_PER_SEC, Output};

/// A held DISCOVER older than this when the removal is confirmed is not answered: the client
/// has retransmitted by then (the newer one replaces it), or given up.
const HELD_MAX_AGE_NS: u64 = 10 * NS_PER_SEC;

#[derive(Debug)]
pub(super) struct HeldDiscover {
    line: Line,
    inb: Box<Inbound>,
    at_ns: u64,
}

impl Engine {
    /// Holds `inb`, a DISCOVER for releasing session `id`, in place of any held before.
    pub(super) fn hold_discover(&mut self, id: SessionId, line: Line, inb: Inbound, now_ns: u64) {
        self.count("DISCOVER while releasing: answered once removed");
        let held = HeldDiscover {
            line,
            inb: Box::new(inb),
            at_ns: now_ns,
        };
        self.after_removal.insert(id, held);
    }

    /// Answers `held` as a new DISCOVER, its session being gone.
    pub(super) fn replay_discover(
        &mut self,
        held: HeldDiscover,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        if now_ns.saturating_sub(held.at_ns) > HELD_MAX_AGE_NS {
            self.count("DISCOVER while releasing: too old once removed");
            return;
        }
        let key = self.key_of(held.line, &held.inb);
        let existing = self.by_key.get(&key).copied();
        self.discover(existing, key, held.line, *held.inb, now_ns, out);
    }
}
