//! MAC -> the session holding it, for RFC 5176 requests that name a session by
//! Calling-Station-Id or a MAC User-Name only. Without it `Engine::find` walked every session
//! on the engine's thread (about 1.5 ms at 300,000 sessions), so a policy server sending such
//! requests in bulk stalled DHCP.
//!
//! A MAC is not unique across access lines, so the index counts the sessions holding each
//! one; it names the session only while exactly one holds it, and otherwise says so and the
//! caller walks (the rare case: the same MAC on two lines at once).

use super::{FastMap, MacAddr, SessionId};

/// Who holds a MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacHolder {
    /// No session.
    None,
    /// Exactly this session.
    One(SessionId),
    /// More than one session (walk them to choose).
    Several,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Holders {
    count: u32,
    /// The holder, while `count` is 1 and it is known which session that is.
    one: Option<SessionId>,
}

/// The index; see the module documentation.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MacIndex(FastMap<MacAddr, Holders>);

impl MacIndex {
    /// Session `id` holds `mac` from now on.
    pub fn add(&mut self, mac: MacAddr, id: SessionId) {
        let h = self.0.entry(mac).or_insert(Holders {
            count: 0,
            one: None,
        });
        h.count += 1;
        h.one = (h.count == 1).then_some(id);
    }

    /// A session holding `mac` no longer does. When one holder remains of several, which one
    /// is not known here: a lookup walks until the last one goes.
    pub fn remove(&mut self, mac: MacAddr) {
        let Some(h) = self.0.get_mut(&mac) else {
            return;
        };
        h.count = h.count.saturating_sub(1);
        if h.count == 0 {
            self.0.remove(&mac);
        }
    }

    /// Who holds `mac`.
    pub fn get(&self, mac: &MacAddr) -> MacHolder {
        match self.0.get(mac) {
            None => MacHolder::None,
            Some(Holders {
                count: 1,
                one: Some(id),
            }) => MacHolder::One(*id),
            Some(_) => MacHolder::Several,
        }
    }

    /// Room for `sessions` in all without rehashing.
    pub fn reserve(&mut self, sessions: usize) {
        self.0.reserve(sessions.saturating_sub(self.0.len()));
    }

    /// Entries it can hold without rehashing.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = [2, 0, 0, 0, 0, 1];
    const B: MacAddr = [2, 0, 0, 0, 0, 2];

    #[test]
    fn names_a_sole_holder_and_says_when_there_are_several() {
        let mut ix = MacIndex::default();
        assert_eq!(ix.get(&A), MacHolder::None);
        ix.add(A, 7);
        ix.add(B, 8);
        assert_eq!(
            (ix.get(&A), ix.get(&B)),
            (MacHolder::One(7), MacHolder::One(8))
        );
        // The same MAC on a second line.
        ix.add(A, 9);
        assert_eq!(ix.get(&A), MacHolder::Several);
        // One of the two leaves: which one remains is not known, so still a walk.
        ix.remove(A);
        assert_eq!(ix.get(&A), MacHolder::Several);
        ix.remove(A);
        assert_eq!(ix.get(&A), MacHolder::None);
        // Back to one holder after the entry went: named again.
        ix.add(A, 10);
        assert_eq!(ix.get(&A), MacHolder::One(10));
        ix.remove(B);
        ix.remove(B);
        assert_eq!(
            ix.get(&B),
            MacHolder::None,
            "a stray removal changes nothing"
        );
        assert_eq!(ix.get(&A), MacHolder::One(10));
    }
}
