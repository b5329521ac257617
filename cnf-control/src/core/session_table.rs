//! The engine's sessions by id: a hash map for the lookups (several per DHCP message) and an
//! ordered set of the ids for the listings that page through them in id order.
//!
//! A B-tree map did both, and its lookups were the largest single cost of the engine per
//! DORA (each a search down the tree, some 150 instructions among 4,000 sessions and more
//! among a million). The set costs one insert and one removal per session's life.

use std::collections::BTreeSet;

use super::engine::Session;
use super::{FastMap, SessionId};

#[derive(Debug, Default)]
pub struct SessionTable {
    /// Boxed: the table moves entries as it grows; a box moves as one pointer, and the
    /// sessions stay where they were allocated.
    by_id: FastMap<SessionId, Box<Session>>,
    order: BTreeSet<SessionId>,
}

impl SessionTable {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn get(&self, id: &SessionId) -> Option<&Session> {
        self.by_id.get(id).map(|s| &**s)
    }

    pub fn get_mut(&mut self, id: &SessionId) -> Option<&mut Session> {
        self.by_id.get_mut(id).map(|s| &mut **s)
    }

    pub fn contains_key(&self, id: &SessionId) -> bool {
        self.by_id.contains_key(id)
    }

    /// Adds (or replaces) the session with this id.
    pub fn insert(&mut self, id: SessionId, s: Session) {
        self.order.insert(id);
        self.by_id.insert(id, Box::new(s));
    }

    pub fn remove(&mut self, id: &SessionId) -> Option<Box<Session>> {
        self.order.remove(id);
        self.by_id.remove(id)
    }

    /// Sessions with an id of at least `from`, in id order.
    pub fn from_id(&self, from: SessionId) -> impl Iterator<Item = &Session> {
        self.order
            .range(from..)
            .filter_map(|id| self.by_id.get(id).map(|s| &**s))
    }

    /// Every session, in id order.
    pub fn values(&self) -> impl Iterator<Item = &Session> {
        self.from_id(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::session;

    #[test]
    fn lookups_and_listings_agree_through_inserts_and_removals() {
        let mut t = SessionTable::default();
        for id in [5, 1, 9, 3, 7] {
            t.insert(id, session(id));
        }
        assert!(t.remove(&9).is_some() && t.remove(&9).is_none());
        t.insert(3, session(3));
        let ids = |it: &mut dyn Iterator<Item = &Session>| it.map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(&mut t.values()), [1, 3, 5, 7]);
        assert_eq!(ids(&mut t.from_id(4)), [5, 7]);
        assert_eq!(t.len(), 4);
        assert!(t.contains_key(&7) && !t.contains_key(&9));
        t.get_mut(&7).unwrap().mac = [9; 6];
        assert_eq!(t.get(&7).unwrap().mac, [9; 6]);
    }
}
