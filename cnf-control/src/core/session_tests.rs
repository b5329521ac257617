//! Script tests of the session state machine: events in, actions out, time injected.

use super::*;

const S: u64 = NS_PER_SEC;
const LEASE: u32 = 3600;
const IP: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 10);
const GOLD: Grant = Grant::Active { plan_id: 7 };

/// A script: feeds events at times, checks states and actions.
struct Script {
    state: State,
}

impl Script {
    fn new() -> Self {
        Script {
            state: State::Discovering {
                xid: 1,
                ip: IP,
                since_ns: 0,
            },
        }
    }
    fn at(&mut self, t_secs: u64, e: Event) -> Vec<Action> {
        let (s, a) = step(self.state.clone(), e, t_secs * S, LEASE);
        // The API's state filter refuses names outside the list: every state reached here
        // must be in it.
        assert!(
            STATE_NAMES.contains(&s.name()),
            "{} not in STATE_NAMES",
            s.name()
        );
        self.state = s;
        a
    }
    fn name(&self) -> &'static str {
        self.state.name()
    }
}

/// The session's address going back to its pool, unquarantined.
fn freed() -> Vec<Action> {
    vec![Action::FreeAddress {
        ip: IP,
        quarantine: false,
    }]
}

fn bound_at(t: u64, grant: Grant) -> Script {
    let mut s = Script::new();
    assert_eq!(
        s.at(t, Event::Authorized(Some(grant))),
        vec![Action::SendOffer { xid: 1, ip: IP }]
    );
    assert_eq!(s.name(), "offered");
    let a = s.at(
        t,
        Event::Request {
            xid: 1,
            ip: IP,
            server_matches: true,
        },
    );
    assert_eq!(
        a,
        vec![
            Action::Install { ip: IP, grant },
            Action::SendAck { xid: 1, ip: IP },
            Action::AccountingStart,
            Action::Persist
        ]
    );
    s
}

fn req(xid: u32, ip: Ipv4Addr) -> Event {
    Event::Request {
        xid,
        ip,
        server_matches: true,
    }
}

#[test]
fn dora_then_renewal_keeps_the_original_bind_time() {
    let mut s = bound_at(5, GOLD);
    assert_eq!(s.name(), "active");
    // T1 at 5 + 1800.
    assert!(s.at(1804, Event::Tick).is_empty());
    assert_eq!(s.name(), "active");
    assert!(s.at(1805, Event::Tick).is_empty());
    assert_eq!(s.name(), "renewing");
    assert_eq!(
        s.at(1900, req(2, IP)),
        vec![Action::SendAck { xid: 2, ip: IP }, Action::Persist]
    );
    assert_eq!(s.name(), "active");
    let (lease, grant) = s.state.bound().unwrap();
    assert_eq!(grant, GOLD);
    assert_eq!(
        lease.bound_at_ns,
        5 * S,
        "first bind time survives renewals"
    );
    assert_eq!(lease.renewed_at_ns, 1900 * S);
    assert_eq!(s.state.next_deadline_ns(), Some((1900 + 1800) * S));
}

#[test]
fn rebinding_then_expiry_removes_and_frees() {
    let mut s = bound_at(0, GOLD);
    s.at(1800, Event::Tick);
    s.at(3150, Event::Tick);
    assert_eq!(
        s.state,
        State::Renewing {
            lease: Lease {
                ip: IP,
                lease_secs: LEASE,
                bound_at_ns: 0,
                renewed_at_ns: 0
            },
            grant: GOLD,
            phase: RenewPhase::Rebinding
        }
    );
    assert!(s.at(3599, Event::Tick).is_empty());
    let a = s.at(3600, Event::Tick);
    assert_eq!(
        a,
        vec![
            Action::Remove,
            Action::AccountingStop {
                reason: EndReason::LeaseExpired
            },
            Action::Forget,
            Action::FreeAddress {
                ip: IP,
                quarantine: false
            }
        ]
    );
    assert!(s.state.is_terminal());
}

#[test]
fn release_waits_for_the_dataplane_then_frees() {
    let mut s = bound_at(0, GOLD);
    let a = s.at(10, Event::Release);
    assert_eq!(a[0], Action::Remove);
    assert_eq!(s.name(), "releasing");
    assert_eq!(
        s.at(11, req(9, IP)),
        vec![Action::SendNak { xid: 9 }],
        "no ACK while tearing down"
    );
    assert_eq!(s.at(11, Event::Removed), freed());
    assert!(s.state.is_terminal());
}

#[test]
fn decline_quarantines_the_address() {
    let mut s = bound_at(0, GOLD);
    let a = s.at(2, Event::Decline);
    assert!(a.contains(&Action::Remove));
    assert!(a.contains(&Action::FreeAddress {
        ip: IP,
        quarantine: true
    }));
    assert_eq!(
        s.state,
        State::Expired {
            reason: EndReason::Declined
        }
    );
    // Declining an offer quarantines too, with nothing to remove.
    let mut s = Script::new();
    s.at(0, Event::Authorized(Some(GOLD)));
    assert_eq!(
        s.at(1, Event::Decline),
        vec![Action::FreeAddress {
            ip: IP,
            quarantine: true
        }]
    );
}

#[test]
fn offer_times_out_and_other_server_frees_it() {
    let mut s = Script::new();
    s.at(0, Event::Authorized(Some(GOLD)));
    assert!(s.at(29, Event::Tick).is_empty());
    assert_eq!(s.at(30, Event::Tick), freed());
    assert_eq!(
        s.state,
        State::Expired {
            reason: EndReason::OfferTimeout
        }
    );

    let mut s = Script::new();
    s.at(0, Event::Authorized(Some(GOLD)));
    let a = s.at(
        1,
        Event::Request {
            xid: 1,
            ip: IP,
            server_matches: false,
        },
    );
    assert!(a.contains(&Action::FreeAddress {
        ip: IP,
        quarantine: false
    }));
}

#[test]
fn wrong_address_is_nakked_and_the_lease_kept() {
    let mut s = bound_at(0, GOLD);
    assert_eq!(
        s.at(5, req(3, Ipv4Addr::new(100, 64, 0, 99))),
        vec![Action::SendNak { xid: 3 }]
    );
    assert_eq!(s.name(), "active");
    // The client starts over; it is offered its address again.
    assert_eq!(
        s.at(6, Event::Discover { xid: 4 }),
        vec![Action::SendOffer { xid: 4, ip: IP }]
    );
}

#[test]
fn cap_reached_is_captive_and_promoted_when_raised() {
    let over = Grant::Captive {
        plan_id: 7,
        over_cap: true,
    };
    let mut s = bound_at(0, over);
    assert_eq!(s.name(), "captive");
    let a = s.at(100, Event::Promote);
    assert_eq!(
        a,
        vec![Action::Modify { grant: GOLD }, Action::Persist],
        "cap raised: modified in place, never reinstalled"
    );
    assert_eq!(s.name(), "active");
    assert!(
        s.at(101, Event::Promote).is_empty(),
        "promotion is idempotent"
    );
}

#[test]
fn unknown_subscriber_is_captive_and_never_promoted() {
    let unknown = Grant::Captive {
        plan_id: 1,
        over_cap: false,
    };
    let mut s = bound_at(0, unknown);
    assert!(s.at(1, Event::Promote).is_empty());
    assert_eq!(s.name(), "captive");
}

#[test]
fn regranted_by_a_changed_record() {
    let walled = Grant::Captive {
        plan_id: 1,
        over_cap: false,
    };
    let mut s = bound_at(0, walled);
    assert_eq!(
        s.at(5, Event::Regranted(GOLD)),
        vec![Action::Modify { grant: GOLD }, Action::Persist]
    );
    assert_eq!(s.name(), "active");
    assert!(s.at(6, Event::Regranted(GOLD)).is_empty(), "the same grant");
    // While renewing the phase is kept; the lease is not touched.
    s.at(1810, Event::Tick);
    let lease = s.state.bound().unwrap().0;
    s.at(1811, Event::Regranted(walled));
    assert_eq!(s.name(), "renewing");
    assert_eq!(s.state.bound().unwrap(), (lease, walled));
    // An offer not yet requested takes the new grant silently and binds with it.
    let mut o = Script::new();
    o.at(0, Event::Authorized(Some(walled)));
    assert!(o.at(1, Event::Regranted(GOLD)).is_empty());
    let a = o.at(
        2,
        Event::Request {
            xid: 1,
            ip: IP,
            server_matches: true,
        },
    );
    assert!(
        a.contains(&Action::Install {
            ip: IP,
            grant: GOLD
        }),
        "{a:?}"
    );
}

#[test]
fn plan_changed_by_coa() {
    let mut s = bound_at(0, GOLD);
    let a = s.at(10, Event::PlanChanged { plan_id: 9 });
    assert_eq!(
        a,
        vec![
            Action::Modify {
                grant: Grant::Active { plan_id: 9 }
            },
            Action::Persist
        ]
    );
    assert!(s.at(11, Event::PlanChanged { plan_id: 9 }).is_empty());
    // While renewing the phase is kept.
    s.at(1810, Event::Tick);
    s.at(1811, Event::PlanChanged { plan_id: 3 });
    assert_eq!(s.name(), "renewing");
    assert_eq!(s.state.bound().unwrap().1, Grant::Active { plan_id: 3 });
    // Disconnect by CoA ends it.
    s.at(1812, Event::Disconnect);
    assert_eq!(s.name(), "releasing");
}

#[test]
fn a_replaced_offer_frees_its_address_at_once() {
    let mut s = Script::new();
    s.at(0, Event::Authorized(Some(GOLD)));
    assert_eq!(s.at(1, Event::Replaced), freed());
    assert!(s.state.is_terminal());
}

#[test]
fn a_drain_a_refusal_an_idle_timeout_or_a_replacement_ends_a_bound_session_with_its_own_reason() {
    for (event, reason) in [
        (Event::Drain, EndReason::Drained),
        (Event::Refused, EndReason::Refused),
        (Event::IdleTimeout, EndReason::IdleTimeout),
        (Event::Replaced, EndReason::Replaced),
    ] {
        let mut s = bound_at(0, GOLD);
        assert_eq!(
            s.at(5, event),
            vec![
                Action::Remove,
                Action::AccountingStop { reason },
                Action::Forget
            ]
        );
        assert_eq!(s.name(), "releasing");
    }
}

#[test]
fn rejected_and_timed_out_authorizations_free_the_address() {
    let mut s = Script::new();
    assert_eq!(s.at(0, Event::Authorized(None)), freed());
    let mut s = Script::new();
    assert!(s.at(9, Event::Tick).is_empty());
    assert_eq!(s.at(10, Event::Tick), freed());
    assert_eq!(
        s.state,
        State::Expired {
            reason: EndReason::AuthTimeout
        }
    );
}

#[test]
fn init_reboot_without_offer_authenticates_then_acks() {
    let mut s = Script {
        state: State::Authenticating {
            xid: 5,
            ip: IP,
            since_ns: 0,
        },
    };
    let a = s.at(1, Event::Authorized(Some(GOLD)));
    assert!(a.contains(&Action::SendAck { xid: 5, ip: IP }));
    assert!(a.contains(&Action::Install {
        ip: IP,
        grant: GOLD
    }));
    assert_eq!(s.name(), "active");
}
