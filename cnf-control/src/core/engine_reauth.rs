//! A changed subscriber store put in force for the sessions already admitted: a record's new
//! plan reaches its subscriber's session, a subscriber who was captive because unknown is
//! admitted once a record names it (the portal's sign-up), and one whose record is gone is
//! treated as unknown (walled garden, or ended when unknown subscribers are rejected).
//!
//! The sessions are walked in chunks from the engine's tick, so that a file of a million
//! records reread under a million sessions never holds the engine's thread for long. A change
//! that comes while a walk runs makes it walk once more from the start, so that the sessions
//! already passed see it too. With RADIUS the store is not the AAA and nothing is walked.
//!
//! The address a record asks for is not moved under a bound session (its client holds the
//! lease): a session captive because the record's address was unavailable stays so until its
//! next admission, and a changed address applies there.

use super::super::SessionId;
use super::super::aaa::{Authorization, Identity};
use super::super::licence::Admit;
use super::super::session::{Event, Grant, State};
use super::{Engine, Output, UnknownPolicy};

/// Sessions looked at per tick (every 20 ms in the service): some 50,000 a second, each one
/// subscriber lookup.
pub(super) const SWEEP_CHUNK: usize = 1024;

/// Where a walk over the sessions stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sweep {
    /// The lowest session id not yet looked at.
    next: SessionId,
    /// The store changed again after this walk started.
    again: bool,
}

impl Engine {
    /// The subscriber store changed (a reread file, the API's import or removal, a restart's
    /// restore): the sessions are walked to apply it.
    pub fn subscribers_changed(&mut self) {
        if self.cfg.external_auth {
            return;
        }
        match &mut self.sweep {
            Some(s) => s.again = true,
            None => {
                self.sweep = Some(Sweep {
                    next: 0,
                    again: false,
                })
            }
        }
    }

    /// Whether a walk is under way (status reports it).
    pub fn reauthorizing(&self) -> bool {
        self.sweep.is_some()
    }

    /// One chunk of the walk, from the tick.
    pub(super) fn sweep_step(&mut self, now_ns: u64, out: &mut Vec<Output>) {
        let Some(sweep) = self.sweep else {
            return;
        };
        let ids: Vec<SessionId> = self
            .sessions
            .from_id(sweep.next)
            .take(SWEEP_CHUNK)
            .map(|s| s.id)
            .collect();
        for &id in &ids {
            self.reauthorize(id, now_ns, out);
        }
        self.sweep = match ids.last() {
            Some(&last) if ids.len() == SWEEP_CHUNK => Some(Sweep {
                next: last + 1,
                ..sweep
            }),
            _ if sweep.again => Some(Sweep {
                next: 0,
                again: false,
            }),
            _ => {
                self.count("subscriber store applied to sessions");
                None
            }
        };
    }

    /// Session `id` granted what the store says of its subscriber now.
    fn reauthorize(&mut self, id: SessionId, now_ns: u64, out: &mut Vec<Output>) {
        let Some(s) = self.sessions.get(&id) else {
            return;
        };
        let (grant, ip) = match &s.state {
            State::Offered { grant, ip, .. } => (*grant, *ip),
            st => match st.bound() {
                Some((lease, grant)) => (grant, lease.ip),
                None => return,
            },
        };
        let identity = Identity {
            mac: s.mac,
            circuit_id: s.circuit_id.clone(),
            remote_id: s.remote_id.clone(),
        };
        let auth = self.subscribers.lookup(&identity, self.by_circuit());
        let known_before = !matches!(
            grant,
            Grant::Captive {
                over_cap: false,
                ..
            }
        );
        let new = match auth {
            Authorization::Known { plan, address } => {
                let plan_id = self.plan_id(plan.as_deref());
                match grant {
                    Grant::Active { .. } => Grant::Active { plan_id },
                    Grant::Captive { over_cap: true, .. } => Grant::Captive {
                        plan_id,
                        over_cap: true,
                    },
                    // The relay's server chose the address; the ask is not applied there.
                    Grant::Captive { .. }
                        if self.relay.is_none() && !self.satisfies(ip, &address) =>
                    {
                        return;
                    }
                    Grant::Captive { .. } => match self.admission.admit(id) {
                        Admit::Active => Grant::Active { plan_id },
                        Admit::Captive => Grant::Captive {
                            plan_id,
                            over_cap: true,
                        },
                    },
                }
            }
            Authorization::Unknown if !known_before => return,
            Authorization::Unknown => {
                if self.cfg.unknown == UnknownPolicy::Reject {
                    self.count("disconnected: subscriber record removed");
                    self.event(id, Event::Disconnect, now_ns, out);
                    return;
                }
                let promoted = self.admission.release(id);
                let g = Grant::Captive {
                    plan_id: self.cfg.captive_plan,
                    over_cap: false,
                };
                self.regrant(id, grant, g, now_ns, out);
                for p in promoted {
                    self.event(p, Event::Promote, now_ns, out);
                }
                return;
            }
        };
        self.regrant(id, grant, new, now_ns, out);
    }

    fn regrant(
        &mut self,
        id: SessionId,
        old: Grant,
        new: Grant,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        if old == new {
            return;
        }
        self.count(match (old, new) {
            (
                Grant::Captive {
                    over_cap: false, ..
                },
                _,
            ) => "admitted: subscriber record added",
            (
                _,
                Grant::Captive {
                    over_cap: false, ..
                },
            ) => "walled: subscriber record removed",
            _ => "plan changed: subscriber record changed",
        });
        self.event(id, Event::Regranted(new), now_ns, out);
    }
}
