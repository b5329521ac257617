//! What arrives for a session that is still releasing: a DISCOVER from a client that released
//! and at once came back, or, with option 82 or line identity, from a CPE swapped on the line
//! whose DISCOVER ended the old device's session; in relay mode, the server's ACK for such a
//! CPE, on the address the old session still holds (a reservation by circuit-id). The address
//! and the line are free only once the dataplane confirms the removal, a few milliseconds
//! later; a client left unanswered until then waits out its retransmission (four seconds or
//! more, RFC 2131 §4.1), so what came is held and handled when the removal is confirmed.

use super::super::dhcp::Inbound;
use super::super::relay::Relayed;
use super::super::session::State;
use super::super::{Line, SessionId};
use super::{Engine, NS_PER_SEC, Output};

/// A held message older than this when the removal is confirmed is dropped: the client has
/// retransmitted by then (the newer one replaces it), or given up.
const HELD_MAX_AGE_NS: u64 = 10 * NS_PER_SEC;

#[derive(Debug)]
pub(super) struct Held {
    what: Waiting,
    at_ns: u64,
}

#[derive(Debug)]
enum Waiting {
    Discover {
        line: Line,
        inb: Box<Inbound>,
    },
    /// A server's ACK, and its frame for the client.
    RelayAck {
        r: Box<Relayed>,
        frame: Vec<u8>,
    },
}

impl Engine {
    /// Whether session `id` waits for the dataplane to confirm its removal.
    pub(super) fn releasing(&self, id: SessionId) -> bool {
        self.sessions
            .get(&id)
            .is_some_and(|s| matches!(s.state, State::Releasing { .. }))
    }

    /// Holds `inb`, a DISCOVER for releasing session `id`, in place of anything held before.
    pub(super) fn hold_discover(&mut self, id: SessionId, line: Line, inb: Inbound, now_ns: u64) {
        self.count("DISCOVER while releasing: answered once removed");
        let what = Waiting::Discover {
            line,
            inb: Box::new(inb),
        };
        self.after_removal.insert(
            id,
            Held {
                what,
                at_ns: now_ns,
            },
        );
    }

    /// Holds `r`, a server's ACK on the address of releasing session `id`, in place of
    /// anything held before.
    pub(super) fn hold_relay_ack(
        &mut self,
        id: SessionId,
        r: Relayed,
        frame: Vec<u8>,
        now_ns: u64,
    ) {
        self.count("relay: ACK held until the old session is removed");
        let what = Waiting::RelayAck {
            r: Box::new(r),
            frame,
        };
        self.after_removal.insert(
            id,
            Held {
                what,
                at_ns: now_ns,
            },
        );
    }

    /// Handles `held`, its session being gone.
    pub(super) fn replay_held(&mut self, held: Held, now_ns: u64, out: &mut Vec<Output>) {
        if now_ns.saturating_sub(held.at_ns) > HELD_MAX_AGE_NS {
            self.count("held while releasing: too old once removed");
            return;
        }
        match held.what {
            Waiting::Discover { line, inb } => {
                let key = self.key_of(line, &inb);
                let existing = self.by_key.get(&key).copied();
                self.discover(existing, key, line, *inb, now_ns, out);
            }
            Waiting::RelayAck { r, frame } => self.relay_bind(*r, frame, now_ns, out),
        }
    }
}
