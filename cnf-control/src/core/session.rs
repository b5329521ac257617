//! The per-subscriber session state machine: one pure [`step`] from (state, event, now) to
//! (state, actions). No I/O, no clock: time arrives as `now_ns` (Unix nanoseconds, so persisted
//! timestamps stay meaningful across restarts) and timeouts arrive as [`Event::Tick`], after which
//! the state itself decides which of its deadlines has passed (a stale tick changes nothing).
//!
//! ```text
//!  DISCOVER ─▶ Discovering ─auth─▶ Offered ─REQUEST─▶ Active | Captive ─T1─▶ Renewing ─expiry─▶ Expired
//!                 │ reject            │ timeout          │  ▲ promote/CoA      │ REQUEST ▲
//!                 ▼                   ▼                  ▼  │                  └─────────┘
//!              Expired             Expired          RELEASE/Disconnect ─▶ Releasing ─removed─▶ Expired
//!  REQUEST (no offer, e.g. after a restart lost it) ─▶ Authenticating ─auth─▶ Active | Captive (ACK)
//! ```

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// How long an OFFER holds its address (RFC 2131 leaves it to the server).
pub const OFFER_HOLD_NS: u64 = 30 * NS_PER_SEC;
/// How long an authorization may take before the attempt is dropped.
pub const AUTH_TIMEOUT_NS: u64 = 10 * NS_PER_SEC;
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// What the subscriber was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Grant {
    /// Full service with a plan.
    Active { plan_id: u32 },
    /// Walled garden only: an unknown subscriber, or a known one beyond the licence cap
    /// (`over_cap`, promoted to its plan when capacity frees).
    Captive { plan_id: u32, over_cap: bool },
}

impl Grant {
    pub fn plan_id(&self) -> u32 {
        match self {
            Grant::Active { plan_id } | Grant::Captive { plan_id, .. } => *plan_id,
        }
    }
    pub fn captive(&self) -> bool {
        matches!(self, Grant::Captive { .. })
    }
}

/// A bound lease. `bound_at_ns` is the first bind and never changes for the session's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub ip: Ipv4Addr,
    pub lease_secs: u32,
    pub bound_at_ns: u64,
    pub renewed_at_ns: u64,
}

impl Lease {
    /// T1 = 0.5 × lease, T2 = 0.875 × lease (RFC 2131 §4.4.5).
    pub fn t1_ns(&self) -> u64 {
        self.renewed_at_ns + u64::from(self.lease_secs) * NS_PER_SEC / 2
    }
    pub fn t2_ns(&self) -> u64 {
        self.renewed_at_ns + u64::from(self.lease_secs) * NS_PER_SEC * 7 / 8
    }
    pub fn expires_ns(&self) -> u64 {
        self.renewed_at_ns + u64::from(self.lease_secs) * NS_PER_SEC
    }
}

/// Which renewal deadline the client has passed without renewing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RenewPhase {
    /// Past T1: the client should be unicasting REQUESTs (RENEWING).
    Renewing,
    /// Past T2: the client should be broadcasting (REBINDING).
    Rebinding,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EndReason {
    Released,
    LeaseExpired,
    Declined,
    OfferTimeout,
    Rejected,
    AuthTimeout,
    Disconnected,
    /// Ended by the NAS itself: an operator drain.
    Drained,
    /// Ended by the NAS itself: a dataplane would not install it (its tables full, or a line
    /// or address it holds for another session).
    Refused,
    /// No traffic from the subscriber for as long as its RADIUS Idle-Timeout allows.
    IdleTimeout,
    /// Its Session-Timeout (from the Access-Accept or a CoA) passed.
    SessionTimeout,
    /// Another device (MAC) came with the subscriber's identity (its option 82 or its line):
    /// a CPE swapped. The session held the old one's MAC, which the dataplane checks.
    Replaced,
}

/// The session's state; each variant carries what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum State {
    /// DISCOVER seen, address reserved, authorization pending.
    Discovering {
        xid: u32,
        ip: Ipv4Addr,
        since_ns: u64,
    },
    /// OFFER sent, waiting for the REQUEST.
    Offered {
        xid: u32,
        ip: Ipv4Addr,
        grant: Grant,
        until_ns: u64,
    },
    /// A REQUEST without an offer (INIT-REBOOT after the control lost it): authorize, then ACK.
    Authenticating {
        xid: u32,
        ip: Ipv4Addr,
        since_ns: u64,
    },
    Active {
        lease: Lease,
        plan_id: u32,
    },
    Captive {
        lease: Lease,
        plan_id: u32,
        over_cap: bool,
    },
    /// Past T1 (or T2) without a renewal; still programmed.
    Renewing {
        lease: Lease,
        grant: Grant,
        phase: RenewPhase,
    },
    /// Removed from the dataplanes, waiting for them to confirm.
    Releasing {
        ip: Ipv4Addr,
        since_ns: u64,
        reason: EndReason,
    },
    /// Terminal; the owner drops the session.
    Expired {
        reason: EndReason,
    },
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A DISCOVER; `ip` is the address reserved for a new offer (ignored when one is held).
    Discover {
        xid: u32,
    },
    /// The AAA's answer (`None` = rejected).
    Authorized(Option<Grant>),
    /// A REQUEST for `ip` (requested-ip or ciaddr); `server_matches` is false when the client
    /// selected another server's offer.
    Request {
        xid: u32,
        ip: Ipv4Addr,
        server_matches: bool,
    },
    Release,
    Decline,
    /// Time passed.
    Tick,
    /// Capacity freed: over-cap captive becomes active.
    Promote,
    /// CoA: a new plan.
    PlanChanged {
        plan_id: u32,
    },
    /// The local AAA's answer changed under an admitted session (a subscriber record added,
    /// changed or removed): its grant from now on.
    Regranted(Grant),
    /// CoA Disconnect or removal.
    Disconnect,
    /// An operator drain: a Disconnect the NAS decided on (RADIUS tells the two apart).
    Drain,
    /// A dataplane refused to install the session.
    Refused,
    /// The subscriber sent nothing for its Idle-Timeout.
    IdleTimeout,
    /// The session's end (`Session::ends_at_ns`) came.
    SessionTimeout,
    /// Another device came with the subscriber's identity.
    Replaced,
    /// The dataplanes confirmed the removal.
    Removed,
}

/// What the adapters must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Authorize,
    SendOffer {
        xid: u32,
        ip: Ipv4Addr,
    },
    SendAck {
        xid: u32,
        ip: Ipv4Addr,
    },
    SendNak {
        xid: u32,
    },
    Install {
        ip: Ipv4Addr,
        grant: Grant,
    },
    Modify {
        grant: Grant,
    },
    Remove,
    /// Return the address to the pool (quarantined when declined).
    FreeAddress {
        ip: Ipv4Addr,
        quarantine: bool,
    },
    AccountingStart,
    AccountingStop {
        reason: EndReason,
    },
    /// Write the bound session to the store (new lease, new grant).
    Persist,
    /// Delete it from the store.
    Forget,
}

/// Every [`State::name`], for the API's filter to refuse a misspelt one.
pub const STATE_NAMES: [&str; 8] = [
    "discovering",
    "offered",
    "authenticating",
    "active",
    "captive",
    "renewing",
    "releasing",
    "expired",
];

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Discovering { .. } => "discovering",
            State::Offered { .. } => "offered",
            State::Authenticating { .. } => "authenticating",
            State::Active { .. } => "active",
            State::Captive { .. } => "captive",
            State::Renewing { .. } => "renewing",
            State::Releasing { .. } => "releasing",
            State::Expired { .. } => "expired",
        }
    }

    /// The lease and grant of a bound (programmed) session.
    pub fn bound(&self) -> Option<(Lease, Grant)> {
        match *self {
            State::Active { lease, plan_id } => Some((lease, Grant::Active { plan_id })),
            State::Captive {
                lease,
                plan_id,
                over_cap,
            } => Some((lease, Grant::Captive { plan_id, over_cap })),
            State::Renewing { lease, grant, .. } => Some((lease, grant)),
            _ => None,
        }
    }

    /// The address the session holds in the pool, if any.
    pub fn ip(&self) -> Option<Ipv4Addr> {
        match self {
            State::Discovering { ip, .. }
            | State::Offered { ip, .. }
            | State::Authenticating { ip, .. }
            | State::Releasing { ip, .. } => Some(*ip),
            _ => self.bound().map(|(l, _)| l.ip),
        }
    }

    /// When the next [`Event::Tick`] could change this state.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        match self {
            State::Discovering { since_ns, .. } | State::Authenticating { since_ns, .. } => {
                Some(since_ns + AUTH_TIMEOUT_NS)
            }
            State::Offered { until_ns, .. } => Some(*until_ns),
            State::Active { lease, .. } | State::Captive { lease, .. } => Some(lease.t1_ns()),
            State::Renewing { lease, phase, .. } => Some(match phase {
                RenewPhase::Renewing => lease.t2_ns(),
                RenewPhase::Rebinding => lease.expires_ns(),
            }),
            State::Releasing { .. } | State::Expired { .. } => None,
        }
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self, State::Expired { .. })
    }
}

fn bound_state(lease: Lease, grant: Grant) -> State {
    match grant {
        Grant::Active { plan_id } => State::Active { lease, plan_id },
        Grant::Captive { plan_id, over_cap } => State::Captive {
            lease,
            plan_id,
            over_cap,
        },
    }
}

fn end_bound(ip: Ipv4Addr, now_ns: u64, reason: EndReason) -> (State, Vec<Action>) {
    (
        State::Releasing {
            ip,
            since_ns: now_ns,
            reason,
        },
        vec![
            Action::Remove,
            Action::AccountingStop { reason },
            Action::Forget,
        ],
    )
}

/// The transition function. `lease_secs` is the pool's lease time for new and renewed leases.
pub fn step(state: State, event: Event, now_ns: u64, lease_secs: u32) -> (State, Vec<Action>) {
    use Action as A;
    use Event as E;
    use State as S;
    let new_lease = |ip| Lease {
        ip,
        lease_secs,
        bound_at_ns: now_ns,
        renewed_at_ns: now_ns,
    };
    match (state, event) {
        // ---- before binding
        (S::Discovering { xid, ip, .. }, E::Authorized(Some(grant))) => (
            S::Offered {
                xid,
                ip,
                grant,
                until_ns: now_ns + OFFER_HOLD_NS,
            },
            vec![A::SendOffer { xid, ip }],
        ),
        (S::Discovering { ip, .. }, E::Authorized(None)) => (
            S::Expired {
                reason: EndReason::Rejected,
            },
            vec![A::FreeAddress {
                ip,
                quarantine: false,
            }],
        ),
        (S::Discovering { ip, since_ns, .. } | S::Authenticating { ip, since_ns, .. }, E::Tick)
            if now_ns >= since_ns + AUTH_TIMEOUT_NS =>
        {
            (
                S::Expired {
                    reason: EndReason::AuthTimeout,
                },
                vec![A::FreeAddress {
                    ip,
                    quarantine: false,
                }],
            )
        }
        (S::Discovering { ip, since_ns, .. }, E::Discover { xid }) => {
            (S::Discovering { xid, ip, since_ns }, vec![])
        }
        (S::Offered { ip, grant, .. }, E::Discover { xid }) => (
            S::Offered {
                xid,
                ip,
                grant,
                until_ns: now_ns + OFFER_HOLD_NS,
            },
            vec![A::SendOffer { xid, ip }],
        ),
        (
            S::Offered {
                ip: offered, grant, ..
            },
            E::Request {
                xid,
                ip,
                server_matches: true,
            },
        ) if ip == offered => {
            let lease = new_lease(ip);
            (
                bound_state(lease, grant),
                vec![
                    A::Install { ip, grant },
                    A::SendAck { xid, ip },
                    A::AccountingStart,
                    A::Persist,
                ],
            )
        }
        (S::Offered { ip, .. }, E::Request { xid, .. }) => {
            // Another server chosen (RFC 2131 §4.3.2: free ours), or a different address asked.
            (
                S::Expired {
                    reason: EndReason::OfferTimeout,
                },
                vec![
                    A::FreeAddress {
                        ip,
                        quarantine: false,
                    },
                    A::SendNak { xid },
                ],
            )
        }
        (S::Offered { ip, until_ns, .. }, E::Tick) if now_ns >= until_ns => (
            S::Expired {
                reason: EndReason::OfferTimeout,
            },
            vec![A::FreeAddress {
                ip,
                quarantine: false,
            }],
        ),
        (
            S::Offered { ip, .. } | S::Discovering { ip, .. },
            E::Release
            | E::Disconnect
            | E::Drain
            | E::Refused
            | E::IdleTimeout
            | E::SessionTimeout
            | E::Replaced,
        ) => (
            S::Expired {
                reason: EndReason::Released,
            },
            vec![A::FreeAddress {
                ip,
                quarantine: false,
            }],
        ),
        (
            S::Offered {
                xid, ip, until_ns, ..
            },
            E::Regranted(grant),
        ) => (
            S::Offered {
                xid,
                ip,
                grant,
                until_ns,
            },
            vec![],
        ),
        (S::Offered { ip, .. }, E::Decline) => (
            S::Expired {
                reason: EndReason::Declined,
            },
            vec![A::FreeAddress {
                ip,
                quarantine: true,
            }],
        ),
        (S::Authenticating { xid, ip, .. }, E::Authorized(Some(grant))) => (
            bound_state(new_lease(ip), grant),
            vec![
                A::Install { ip, grant },
                A::SendAck { xid, ip },
                A::AccountingStart,
                A::Persist,
            ],
        ),
        (S::Authenticating { xid, ip, .. }, E::Authorized(None)) => (
            S::Expired {
                reason: EndReason::Rejected,
            },
            vec![
                A::FreeAddress {
                    ip,
                    quarantine: false,
                },
                A::SendNak { xid },
            ],
        ),

        // ---- bound
        (s @ (S::Active { .. } | S::Captive { .. } | S::Renewing { .. }), e) => {
            let Some((lease, grant)) = s.bound() else {
                return (s, vec![]);
            };
            bound_step(s, lease, grant, e, now_ns, lease_secs)
        }

        // ---- ending
        (S::Releasing { ip, .. }, E::Removed) => (
            S::Expired {
                reason: EndReason::Released,
            },
            vec![A::FreeAddress {
                ip,
                quarantine: false,
            }],
        ),
        (
            S::Releasing {
                ip,
                since_ns,
                reason,
            },
            E::Request { xid, .. },
        ) => {
            // Still tearing down: the client must start over.
            (
                S::Releasing {
                    ip,
                    since_ns,
                    reason,
                },
                vec![A::SendNak { xid }],
            )
        }
        (s, _) => (s, vec![]),
    }
}

fn bound_step(
    s: State,
    lease: Lease,
    grant: Grant,
    e: Event,
    now_ns: u64,
    lease_secs: u32,
) -> (State, Vec<Action>) {
    use Action as A;
    use Event as E;
    match e {
        E::Request { xid, ip, .. } if ip == lease.ip => {
            // Renewal, rebinding, INIT-REBOOT or a fresh SELECTING for the same address: extend.
            let lease = Lease {
                renewed_at_ns: now_ns,
                lease_secs,
                ..lease
            };
            (
                bound_state(lease, grant),
                vec![A::SendAck { xid, ip }, A::Persist],
            )
        }
        // RFC 2131 §4.3.2: a REQUEST for an address that is not the client's gets a NAK.
        E::Request { xid, .. } => (s, vec![A::SendNak { xid }]),
        // The client lost its lease but we still hold it: offer the same address.
        E::Discover { xid } => (s, vec![A::SendOffer { xid, ip: lease.ip }]),
        E::Release => end_bound(lease.ip, now_ns, EndReason::Released),
        E::Disconnect => end_bound(lease.ip, now_ns, EndReason::Disconnected),
        E::Drain => end_bound(lease.ip, now_ns, EndReason::Drained),
        E::Refused => end_bound(lease.ip, now_ns, EndReason::Refused),
        E::IdleTimeout => end_bound(lease.ip, now_ns, EndReason::IdleTimeout),
        E::SessionTimeout => end_bound(lease.ip, now_ns, EndReason::SessionTimeout),
        E::Replaced => end_bound(lease.ip, now_ns, EndReason::Replaced),
        E::Decline => {
            // The client found the address in use (RFC 2131 §4.4.1): drop it and quarantine.
            let (_, mut actions) = end_bound(lease.ip, now_ns, EndReason::Declined);
            actions.push(A::FreeAddress {
                ip: lease.ip,
                quarantine: true,
            });
            (
                State::Expired {
                    reason: EndReason::Declined,
                },
                actions,
            )
        }
        E::Tick if now_ns >= lease.expires_ns() => {
            let (_, mut actions) = end_bound(lease.ip, now_ns, EndReason::LeaseExpired);
            actions.push(A::FreeAddress {
                ip: lease.ip,
                quarantine: false,
            });
            (
                State::Expired {
                    reason: EndReason::LeaseExpired,
                },
                actions,
            )
        }
        E::Tick if now_ns >= lease.t2_ns() => (
            State::Renewing {
                lease,
                grant,
                phase: RenewPhase::Rebinding,
            },
            vec![],
        ),
        E::Tick if now_ns >= lease.t1_ns() && !matches!(s, State::Renewing { .. }) => (
            State::Renewing {
                lease,
                grant,
                phase: RenewPhase::Renewing,
            },
            vec![],
        ),
        E::Promote => match grant {
            Grant::Captive {
                plan_id,
                over_cap: true,
            } => {
                let g = Grant::Active { plan_id };
                (
                    rebind(s, lease, g),
                    vec![A::Modify { grant: g }, A::Persist],
                )
            }
            _ => (s, vec![]),
        },
        E::PlanChanged { plan_id } => {
            let g = match grant {
                Grant::Active { .. } => Grant::Active { plan_id },
                Grant::Captive { over_cap, .. } => Grant::Captive { plan_id, over_cap },
            };
            regrant(s, lease, grant, g)
        }
        E::Regranted(g) => regrant(s, lease, grant, g),
        _ => (s, vec![]),
    }
}

/// Bound session `s` holding `lease` under `old` is granted `new`: the dataplanes and the
/// store follow when it differs.
fn regrant(s: State, lease: Lease, old: Grant, new: Grant) -> (State, Vec<Action>) {
    if new == old {
        return (s, vec![]);
    }
    (
        rebind(s, lease, new),
        vec![Action::Modify { grant: new }, Action::Persist],
    )
}

/// The same phase (bound or renewing) with a new grant.
fn rebind(s: State, lease: Lease, grant: Grant) -> State {
    match s {
        State::Renewing { phase, .. } => State::Renewing {
            lease,
            grant,
            phase,
        },
        _ => bound_state(lease, grant),
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
