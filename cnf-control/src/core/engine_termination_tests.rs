//! Script tests of Termination-Action RADIUS-Request: a session authorized again at its
//! Session-Timeout, and what each answer does to it.

use super::aaa_tests::{answer_and_bind, discover, engine, installed, renewal_lease, stopped};
use super::termination::RETRY_UNANSWERED_SECS;
use super::*;
use crate::core::aaa::AddressChoice;
use crate::core::test_support::{S, counter, replies};

/// An Access-Accept naming `plan`, lasting `secs`, authorized again at its end.
fn renewing_accept(plan: &str, secs: u32) -> AuthOutcome {
    AuthOutcome::Accept {
        plan: Some(plan.into()),
        session_timeout_secs: Some(secs),
        address: AddressChoice::Any,
        reauthorize: true,
    }
}

/// [`renewing_accept`] on gold for 50 s, naming `address` (Framed-IP-Address).
fn accept_at(address: Ipv4Addr) -> AuthOutcome {
    AuthOutcome::Accept {
        plan: Some("gold".into()),
        session_timeout_secs: Some(50),
        address: AddressChoice::Fixed(address),
        reauthorize: true,
    }
}

/// The sessions `out` asks the AAA about.
fn asked(out: &[Output]) -> Vec<SessionId> {
    out.iter()
        .filter_map(|o| match o {
            Output::Authorize { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

/// A session bound at 1 s on gold, its Access-Accept lasting 100 s with Termination-Action
/// RADIUS-Request; its id and address.
fn bound_renewing(e: &mut Engine) -> (SessionId, Ipv4Addr) {
    let id = discover(e, 1, 1);
    let out = answer_and_bind(e, id, renewing_accept("gold", 100), 1, 1);
    // Not cut to the Session-Timeout: the session goes on past it if authorized again.
    assert_eq!(replies(&out).pop().and_then(|a| a.lease_secs), Some(600));
    (id, installed(&out).expect("installed").ip)
}

/// [`bound_renewing`], then time to its end, where it is asked about again.
fn at_its_end(e: &mut Engine) -> SessionId {
    let (id, _) = bound_renewing(e);
    assert_eq!(asked(&e.tick(101 * S)), [id]);
    id
}

#[test]
fn an_accept_at_the_session_timeout_goes_on_with_its_plan_and_next_timeout() {
    let mut e = engine(UnknownPolicy::Captive);
    let (id, ip) = bound_renewing(&mut e);
    assert_eq!(renewal_lease(&mut e, ip, 51 * S), Some(600));
    // At its end it is asked about again, once, and neither ends nor stops meanwhile.
    let out = e.tick(101 * S);
    assert_eq!(asked(&out), [id]);
    assert!(!stopped(&out, None), "{out:?}");
    assert!(asked(&e.tick(102 * S)).is_empty());
    assert_eq!(e.session(id).map(|s| s.state.name()), Some("active"));
    // Accepted on silver for 50 s more: the plan reaches the dataplane, the end is kept.
    let out = e.auth_result(id, renewing_accept("silver", 50), 102 * S);
    assert!(
        out.iter().any(|o| matches!(
            o,
            Output::Program {
                op: ProgramOp::Modify { plan_id: 11, .. },
                ..
            }
        )),
        "{out:?}"
    );
    assert!(out.iter().any(|o| matches!(o, Output::Persist(s)
        if s.ends_at_ns.map(|e| e.get()) == Some(152 * S) && s.reauthorize_at_end)));
    assert_eq!(counter(&e, "re-authorization accepted"), 1);
    assert_eq!(counter(&e, "re-authorization changed the plan"), 1);
    assert_eq!(asked(&e.tick(152 * S)), [id], "asked again at the next end");
}

#[test]
fn an_accept_naming_another_address_keeps_the_lease_and_is_counted() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = at_its_end(&mut e);
    let ip = e.session(id).and_then(|s| s.state.ip()).expect("bound");
    let elsewhere = Ipv4Addr::from(u32::from(ip) + 1);
    e.auth_result(id, accept_at(ip), 102 * S);
    assert_eq!(
        counter(&e, "re-authorization named another address: lease's kept"),
        0
    );
    assert_eq!(asked(&e.tick(152 * S)), [id]);
    e.auth_result(id, accept_at(elsewhere), 152 * S);
    assert_eq!(
        counter(&e, "re-authorization named another address: lease's kept"),
        1
    );
    assert_eq!(e.session(id).and_then(|s| s.state.ip()), Some(ip));
    assert_eq!(e.session(id).map(|s| s.state.name()), Some("active"));
}

#[test]
fn an_accept_without_termination_action_makes_the_next_timeout_final() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = at_its_end(&mut e);
    let last = AuthOutcome::Accept {
        plan: Some("gold".into()),
        session_timeout_secs: Some(30),
        address: AddressChoice::Any,
        reauthorize: false,
    };
    let out = e.auth_result(id, last, 101 * S);
    assert!(
        !out.iter().any(|o| matches!(o, Output::Program { .. })),
        "same plan: nothing reprogrammed: {out:?}"
    );
    let out = e.tick(131 * S);
    assert!(asked(&out).is_empty());
    assert!(stopped(&out, Some(EndReason::SessionTimeout)), "{out:?}");
}

#[test]
fn a_reject_at_the_session_timeout_ends_the_session() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = at_its_end(&mut e);
    let out = e.auth_result(id, AuthOutcome::Reject, 101 * S);
    assert!(stopped(&out, Some(EndReason::SessionTimeout)), "{out:?}");
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Program {
            op: ProgramOp::Remove(r),
            ..
        } if *r == id
    )));
    assert_eq!(counter(&e, "re-authorization rejected: session ended"), 1);
}

#[test]
fn an_unanswered_reauthorization_keeps_the_session_and_asks_again_later() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = at_its_end(&mut e);
    let out = e.auth_result(id, AuthOutcome::Unreachable, 104 * S);
    assert!(!stopped(&out, None), "{out:?}");
    let again = 104 + u64::from(RETRY_UNANSWERED_SECS);
    assert!(asked(&e.tick((again - 1) * S)).is_empty());
    assert_eq!(asked(&e.tick(again * S)), [id]);
    assert_eq!(e.session(id).map(|s| s.state.name()), Some("active"));
}

#[test]
fn a_lease_that_runs_out_while_reauthorizing_still_expires() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1, 1);
    // A Session-Timeout past the lease's T1: no renewal comes, the lease runs out at 601 s
    // while the answer to the re-authorization at 500 s is still awaited.
    answer_and_bind(&mut e, id, renewing_accept("gold", 499), 1, 1);
    assert_eq!(asked(&e.tick(500 * S)), [id]);
    let out = e.tick(601 * S);
    assert!(
        stopped(&out, None),
        "the lease's end is not skipped: {out:?}"
    );
    assert!(e.session(id).is_none_or(|s| s.state.name() != "active"));
    // The late answer finds no bound session.
    assert!(e.auth_result(id, AuthOutcome::Reject, 602 * S).is_empty());
}

#[test]
fn a_restore_while_reauthorizing_asks_again() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = at_its_end(&mut e);
    // The control stops before the answer: the stored session still has its end.
    let kept = e.session(id).cloned().expect("bound");
    assert!(kept.reauthorize_at_end && kept.ends_at_ns.is_some());
    let mut restarted = engine(UnknownPolicy::Captive);
    assert!(restarted.restore(vec![kept], 200 * S).is_empty());
    assert_eq!(asked(&restarted.tick(200 * S)), [id]);
}
