//! Licence cap and admission: at most `cap` sessions are active; known subscribers beyond it are
//! admitted captive and wait in arrival order; when capacity frees (a release, a raised cap) the
//! oldest waiting ones are promoted.
//!
//! Lowering the cap never demotes a session that is already active: it only stops admissions
//! until the count falls below the new cap (an operator lowering a licence should not cut
//! subscribers off mid-session).

use std::collections::{BTreeSet, HashSet, VecDeque};

use serde::Serialize;

use super::SessionId;

/// Where the cap came from, reported truly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum CapSource {
    /// A verified licence grant.
    Licence { licence_id: String },
    /// No valid licence: the free baseline.
    FreeBaseline { reason: String },
    /// A file holding the evaluated cap (written by the operator from the Licence status).
    File { path: String },
}

/// Cap and source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cap {
    pub max_sessions: u64,
    pub source: CapSource,
}

/// Admission decision for a known subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Active,
    /// Over the cap; waiting for promotion.
    Captive,
}

/// The admission ledger.
#[derive(Debug, Clone)]
pub struct Admission {
    cap: Cap,
    active: HashSet<SessionId>,
    /// Waiting known subscribers, oldest first. Lazy deletion via `waiting_set`.
    queue: VecDeque<SessionId>,
    waiting_set: BTreeSet<SessionId>,
}

impl Admission {
    pub fn new(cap: Cap) -> Self {
        Admission {
            cap,
            active: HashSet::new(),
            queue: VecDeque::new(),
            waiting_set: BTreeSet::new(),
        }
    }

    pub fn cap(&self) -> &Cap {
        &self.cap
    }

    pub fn active(&self) -> usize {
        self.active.len()
    }

    pub fn waiting(&self) -> usize {
        self.waiting_set.len()
    }

    fn has_room(&self) -> bool {
        (self.active.len() as u64) < self.cap.max_sessions
    }

    /// Admit `id` (idempotent).
    pub fn admit(&mut self, id: SessionId) -> Admit {
        if self.active.contains(&id) {
            return Admit::Active;
        }
        if self.waiting_set.contains(&id) {
            return Admit::Captive;
        }
        if self.has_room() && self.waiting_set.is_empty() {
            self.active.insert(id);
            Admit::Active
        } else {
            self.queue.push_back(id);
            self.waiting_set.insert(id);
            Admit::Captive
        }
    }

    /// Count `id` as active without checking the cap (restore of a persisted active session).
    pub fn restore_active(&mut self, id: SessionId) {
        self.active.insert(id);
    }

    /// Forget `id`; returns the sessions promoted into the freed capacity, oldest first.
    pub fn release(&mut self, id: SessionId) -> Vec<SessionId> {
        self.active.remove(&id);
        self.waiting_set.remove(&id);
        self.promote()
    }

    /// A new cap; returns the sessions promoted by a raise.
    pub fn set_cap(&mut self, cap: Cap) -> Vec<SessionId> {
        self.cap = cap;
        self.promote()
    }

    fn promote(&mut self) -> Vec<SessionId> {
        let mut out = Vec::new();
        while self.has_room() {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            if self.waiting_set.remove(&id) {
                self.active.insert(id);
                out.push(id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(n: u64) -> Cap {
        Cap {
            max_sessions: n,
            source: CapSource::FreeBaseline {
                reason: "test".into(),
            },
        }
    }

    #[test]
    fn cap_reached_then_promoted_in_order() {
        let mut a = Admission::new(cap(2));
        assert_eq!(a.admit(1), Admit::Active);
        assert_eq!(a.admit(2), Admit::Active);
        assert_eq!(a.admit(3), Admit::Captive);
        assert_eq!(a.admit(4), Admit::Captive);
        assert_eq!(a.admit(3), Admit::Captive, "idempotent");
        assert!(
            a.release(4).is_empty(),
            "a waiting one leaving frees nothing"
        );
        assert_eq!(a.admit(5), Admit::Captive);
        assert_eq!(a.release(1), vec![3]);
        assert_eq!(a.set_cap(cap(10)), vec![5]);
        assert_eq!((a.active(), a.waiting()), (3, 0));
    }

    #[test]
    fn lowering_the_cap_demotes_nobody() {
        let mut a = Admission::new(cap(3));
        for id in 1..=3 {
            a.admit(id);
        }
        assert!(a.set_cap(cap(1)).is_empty());
        assert_eq!(a.active(), 3);
        assert_eq!(a.admit(9), Admit::Captive);
        assert!(a.release(1).is_empty());
        assert!(a.release(2).is_empty());
        assert_eq!(a.release(3), vec![9], "room only once below the new cap");
    }
}
