//! Script tests of external (RADIUS) authorization, CoA plan change and Disconnect: the engine
//! asks with [`Output::Authorize`], the test answers as the RADIUS adapter would, with time
//! injected.

use super::*;
use crate::core::aaa::AddressChoice;
use crate::core::dhcp::tests::client_frame;
use crate::core::test_support::{S, cap, counter, engine_config, mac, msg, replies};

pub(super) fn engine(unknown: UnknownPolicy) -> Engine {
    let mut cfg = engine_config(unknown);
    cfg.external_auth = true;
    Engine::new(cfg, cap(100), 0).expect("valid pools")
}

/// A DISCOVER from MAC `m` at `t` seconds; returns the session id the engine asks about.
pub(super) fn discover(e: &mut Engine, m: u8, t: u64) -> SessionId {
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, m, 1), None),
        t * S,
    );
    assert!(replies(&out).is_empty(), "no OFFER before the answer");
    let asks: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Authorize { id, identity } => Some((*id, identity.mac)),
            _ => None,
        })
        .collect();
    assert_eq!(asks.len(), 1, "{out:?}");
    assert_eq!(asks[0].1, mac(m).0);
    asks[0].0
}

/// The answer at `t` seconds, then the client's REQUEST for what was offered; returns the ACK's
/// outputs.
pub(super) fn answer_and_bind(
    e: &mut Engine,
    id: SessionId,
    r: AuthOutcome,
    t: u64,
    m: u8,
) -> Vec<Output> {
    let out = e.auth_result(id, r, t * S);
    let offer = replies(&out).pop().expect("an OFFER after the answer");
    assert_eq!(offer.message_type, DhcpMessageType::Offer);
    let mut req = msg(DhcpMessageType::Request, m, 2);
    req.requested_ip = Some(offer.yiaddr);
    req.server_id = offer.server_id;
    let out = e.handle_dhcp(0, 0, &client_frame(&req, None), t * S);
    assert_eq!(
        replies(&out).pop().map(|r| r.message_type),
        Some(DhcpMessageType::Ack)
    );
    out
}

/// An Access-Accept naming `plan`, without a Session-Timeout.
fn accept(plan: Option<&str>) -> AuthOutcome {
    AuthOutcome::Accept {
        plan: plan.map(String::from),
        session_timeout_secs: None,
        address: AddressChoice::Any,
        reauthorize: false,
    }
}

/// The lease time of the ACK to a renewal (REQUEST with ciaddr `ip`) from MAC 1 at `t`.
pub(super) fn renewal_lease(e: &mut Engine, ip: Ipv4Addr, t: u64) -> Option<u32> {
    let mut r = msg(DhcpMessageType::Request, 1, 3);
    r.ciaddr = ip;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), t);
    replies(&out).pop().and_then(|a| a.lease_secs)
}

/// Whether `out` holds an accounting Stop, with `reason` when one is given.
pub(super) fn stopped(out: &[Output], reason: Option<EndReason>) -> bool {
    out.iter().any(|o| {
        matches!(o, Output::Accounting { kind: AcctKind::Stop, reason: r, .. }
            if reason.is_none() || *r == reason)
    })
}

pub(super) fn installed(out: &[Output]) -> Option<DpSession> {
    out.iter().find_map(|o| match o {
        Output::Program {
            op: ProgramOp::Install(d),
            ..
        } => Some(*d),
        _ => None,
    })
}

#[test]
fn accept_installs_the_plan_named_by_the_server_and_starts_accounting() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    let out = answer_and_bind(&mut e, id, accept(Some("silver")), 2, 1);
    let d = installed(&out).expect("installed");
    assert_eq!((d.id, d.plan_id, d.captive), (id, 11, false));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Accounting {
            kind: AcctKind::Start,
            ..
        }
    )));
    assert_eq!(counter(&e, "authorization accepted"), 1);
}

#[test]
fn accept_without_a_plan_takes_the_default() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    let out = answer_and_bind(&mut e, id, accept(None), 1, 1);
    assert_eq!(installed(&out).map(|d| d.plan_id), Some(10));
}

#[test]
fn reject_is_captive_under_the_captive_policy() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 4, 1);
    let out = answer_and_bind(&mut e, id, AuthOutcome::Reject, 1, 4);
    let d = installed(&out).expect("installed captive");
    assert_eq!((d.plan_id, d.captive), (1, true));
    assert_eq!(counter(&e, "authorization rejected"), 1);
}

#[test]
fn reject_drops_the_subscriber_and_frees_the_address_under_the_reject_policy() {
    let mut e = engine(UnknownPolicy::Reject);
    let id = discover(&mut e, 4, 1);
    let held = e.session(id).and_then(|s| s.state.ip()).expect("reserved");
    let out = e.auth_result(id, AuthOutcome::Reject, S);
    assert!(
        replies(&out).is_empty(),
        "no OFFER to a rejected subscriber"
    );
    assert_eq!(e.sessions_len(), 0);
    // The address went back to the pool: the same subscriber, accepted later, gets it again
    // (an address still held could not be handed out).
    let id2 = discover(&mut e, 4, 2);
    let out = answer_and_bind(&mut e, id2, accept(None), 2, 4);
    assert_eq!(installed(&out).map(|d| d.ip), Some(held));
}

#[test]
fn unreachable_servers_follow_the_unknown_policy_and_are_counted_apart() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 6, 1);
    let out = answer_and_bind(&mut e, id, AuthOutcome::Unreachable, 9, 6);
    assert_eq!(installed(&out).map(|d| d.captive), Some(true));
    assert_eq!(counter(&e, "authorization unreachable"), 1);
    assert_eq!(counter(&e, "authorization rejected"), 0);
}

#[test]
fn no_answer_times_out_and_a_late_answer_changes_nothing() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 7, 1);
    assert!(e.tick(10 * S).is_empty(), "9 s in: still waiting");
    assert_eq!(e.sessions_len(), 1);
    e.tick(11 * S);
    assert_eq!(e.sessions_len(), 0, "timed out after 10 s");
    let out = e.auth_result(id, accept(None), 12 * S);
    assert!(out.is_empty());
    assert_eq!(counter(&e, "late authorization ignored"), 1);
    // The client's next DISCOVER starts a fresh attempt.
    let id2 = discover(&mut e, 7, 13);
    assert_ne!(id, id2);
}

#[test]
fn a_second_answer_for_a_bound_session_is_ignored() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    answer_and_bind(&mut e, id, accept(None), 1, 1);
    let out = e.auth_result(id, AuthOutcome::Reject, 2 * S);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(e.session(id).map(|s| s.state.name()), Some("active"));
}

#[test]
fn coa_changes_the_plan_of_a_live_session() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    answer_and_bind(&mut e, id, accept(Some("gold")), 1, 1);
    let out = e.change_plan(id, "silver", 5 * S).expect("known plan");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Program {
            op: ProgramOp::Modify {
                plan_id: 11,
                captive: false,
                ..
            },
            ..
        }
    )));
    assert!(out.iter().any(|o| matches!(o, Output::Persist(_))));
    assert_eq!(e.desired(0)[0].plan_id, 11);
    assert_eq!(
        e.change_plan(id, "platinum", 6 * S).unwrap_err(),
        PlanChangeError::UnknownPlan("platinum".into())
    );
    assert_eq!(
        e.change_plan(id + 100, "gold", 6 * S).unwrap_err(),
        PlanChangeError::NoSession(id + 100)
    );
    assert_eq!(e.desired(0)[0].plan_id, 11, "failed changes change nothing");
}

#[test]
fn a_disconnect_a_refusal_or_an_idle_timeout_removes_stops_accounting_and_forgets() {
    type End = fn(&mut Engine, SessionId, u64) -> Vec<Output>;
    let disconnect: End = |e, id, t| e.disconnect(id, t).expect("session exists");
    let refused: End = |e, id, t| e.refused(id, t);
    let idle: End = |e, id, t| e.idle_timeout(id, t);
    for (end, reason) in [
        (disconnect, EndReason::Disconnected),
        (refused, EndReason::Refused),
        (idle, EndReason::IdleTimeout),
    ] {
        let mut e = engine(UnknownPolicy::Captive);
        let id = discover(&mut e, 1, 1);
        answer_and_bind(&mut e, id, accept(None), 1, 1);
        let out = end(&mut e, id, 30 * S);
        assert!(out.iter().any(|o| matches!(
            o,
            Output::Program {
                op: ProgramOp::Remove(x),
                ..
            } if *x == id
        )));
        assert!(
            out.iter().any(|o| matches!(
                o,
                Output::Accounting {
                    kind: AcctKind::Stop,
                    reason: Some(r),
                    ..
                } if *r == reason
            )),
            "{reason:?}"
        );
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::Forget(x) if *x == id))
        );
        assert!(e.desired(0).is_empty());
        e.removed(id, 31 * S);
        assert_eq!(e.sessions_len(), 0);
        assert!(e.disconnect(id, 32 * S).is_none(), "unknown session");
        assert!(e.refused(id, 32 * S).is_empty(), "unknown session");
    }
}

#[test]
fn a_session_timeout_bounds_every_lease_and_ends_the_session() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    let accept = AuthOutcome::Accept {
        plan: None,
        session_timeout_secs: Some(100),
        address: AddressChoice::Any,
        reauthorize: false,
    };
    let out = answer_and_bind(&mut e, id, accept, 1, 1);
    // The pool leases for 600 s; this session ends at 101 s.
    let ack = replies(&out).pop().expect("an ACK");
    assert_eq!(ack.lease_secs, Some(100));
    assert_eq!(ack.renewal_secs, Some(50));
    let ip = installed(&out).expect("installed").ip;
    // A renewal gets what is left, not the pool's lease.
    assert_eq!(renewal_lease(&mut e, ip, 51 * S), Some(50));
    e.tick(100 * S);
    assert!(e.session(id).is_some_and(|s| s.state.ip() == Some(ip)));
    let out = e.tick(101 * S);
    assert!(stopped(&out, Some(EndReason::SessionTimeout)), "{out:?}");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Program {
            op: ProgramOp::Remove(_),
            ..
        }
    )));
}

#[test]
fn without_a_session_timeout_or_with_zero_the_pools_lease_applies() {
    for t in [None, Some(0)] {
        let mut e = engine(UnknownPolicy::Captive);
        let id = discover(&mut e, 1, 1);
        let accept = AuthOutcome::Accept {
            plan: None,
            session_timeout_secs: t,
            address: AddressChoice::Any,
            reauthorize: false,
        };
        let out = answer_and_bind(&mut e, id, accept, 1, 1);
        assert_eq!(
            replies(&out).pop().and_then(|a| a.lease_secs),
            Some(600),
            "{t:?}"
        );
        assert_eq!(e.session(id).and_then(|s| s.ends_at_ns), None);
    }
}

#[test]
fn a_coa_session_timeout_ends_a_session_whose_lease_outlasts_it() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    let out = answer_and_bind(&mut e, id, accept(None), 1, 1);
    assert_eq!(replies(&out).pop().and_then(|a| a.lease_secs), Some(600));
    let ip = installed(&out).expect("installed").ip;
    // At 10 s a CoA allows 20 s more: the 600 s lease no longer decides.
    let out = e
        .set_session_timeout(id, Some(20), None, 10 * S)
        .expect("bound");
    assert!(matches!(out.as_slice(), [Output::Persist(s)] if s.ends_at_ns.is_some()));
    // A renewal gets what is left.
    assert_eq!(renewal_lease(&mut e, ip, 15 * S), Some(15));
    assert!(!stopped(&e.tick(29 * S), None));
    let out = e.tick(30 * S);
    assert!(stopped(&out, Some(EndReason::SessionTimeout)), "{out:?}");
    assert!(
        e.set_session_timeout(id, Some(20), None, 31 * S).is_none(),
        "not bound"
    );
}

#[test]
fn a_coa_session_timeout_of_zero_lifts_the_limit_and_a_restore_keeps_one() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    let limited = AuthOutcome::Accept {
        plan: None,
        session_timeout_secs: Some(100),
        address: AddressChoice::Any,
        reauthorize: false,
    };
    let out = answer_and_bind(&mut e, id, limited, 1, 1);
    let ip = installed(&out).expect("installed").ip;
    e.set_session_timeout(id, Some(0), None, 2 * S)
        .expect("bound");
    assert_eq!(e.session(id).and_then(|s| s.ends_at_ns), None);
    // The renewal gets the pool's whole lease again; past the old limit nothing ends.
    assert_eq!(renewal_lease(&mut e, ip, 60 * S), Some(600));
    e.tick(200 * S);
    assert_eq!(e.session(id).map(|s| s.state.name()), Some("active"));

    e.set_session_timeout(id, Some(50), None, 300 * S)
        .expect("bound");
    let stored: Vec<Session> = e.list(0, 100, |_| true).cloned().collect();
    let mut e2 = engine(UnknownPolicy::Captive);
    assert!(e2.restore(stored, e.next_id()).is_empty());
    assert!(e2.tick(349 * S).is_empty());
    assert!(stopped(&e2.tick(350 * S), Some(EndReason::SessionTimeout)));
}
