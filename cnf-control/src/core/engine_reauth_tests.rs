//! Script tests of a changed subscriber store applied to the sessions it admitted before.

use super::*;
use crate::core::aaa::SubscriberRecord;
use crate::core::dhcp::tests::client_frame;
use crate::core::session::Lease;
use crate::core::test_support::{
    S, authorized, cap, counter, engine_config, mac, msg, programs, replies,
};

fn engine(cap_n: u64, unknown: UnknownPolicy) -> Engine {
    let mut e = Engine::new(engine_config(unknown), cap(cap_n), 0).unwrap();
    e.subscribers
        .import_csv("02:00:00:00:00:01,,,gold\n02:00:00:00:00:02,,,silver\n")
        .unwrap();
    e
}

/// DORA for MAC `m` at `t` seconds; returns its session.
fn bind(e: &mut Engine, m: u8, t: u64) -> SessionId {
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, m, 1), None),
        t * S,
    );
    let offer = replies(&out).pop().expect("an OFFER");
    let mut r = msg(DhcpMessageType::Request, m, 2);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), t * S);
    let ack = replies(&out).pop().expect("an ACK");
    assert_eq!(ack.message_type, DhcpMessageType::Ack);
    e.find(Some(ack.yiaddr), None).expect("bound")
}

fn record(m: u8, plan: &str) -> SubscriberRecord {
    SubscriberRecord {
        mac: Some(format!("02:00:00:00:00:{m:02x}")),
        circuit_id: None,
        remote_id: None,
        plan: Some(plan.into()),
        ipv4: None,
        pool: None,
    }
}

/// Sessions on plan `plan`, by the census the gauges read.
fn on_plan(e: &Engine, plan: u32) -> u64 {
    e.census()
        .iter()
        .filter(|((_, p), _)| *p == plan)
        .map(|(_, n)| n)
        .sum()
}

fn grant(e: &Engine, id: SessionId) -> Option<Grant> {
    e.session(id)?.state.bound().map(|(_, g)| g)
}

/// The store changed at `t` seconds: the walk's first tick, and its outputs.
fn changed(e: &mut Engine, t: u64) -> Vec<Output> {
    e.subscribers_changed();
    assert!(e.reauthorizing());
    e.tick(t * S)
}

fn modify(id: SessionId, plan_id: u32, captive: bool) -> ProgramOp {
    ProgramOp::Modify {
        id,
        plan_id,
        captive,
    }
}

#[test]
fn a_changed_record_changes_the_plan_of_its_live_session() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let one = bind(&mut e, 1, 1);
    let two = bind(&mut e, 2, 1);
    e.subscribers.add(record(1, "silver")).unwrap();
    let out = changed(&mut e, 2);
    assert_eq!(programs(&out), [modify(one, 11, false)]);
    let persisted: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Persist(s) => Some((s.id, s.state.bound().map(|(_, g)| g))),
            _ => None,
        })
        .collect();
    assert_eq!(persisted, [(one, Some(Grant::Active { plan_id: 11 }))]);
    assert_eq!(
        grant(&e, two),
        Some(Grant::Active { plan_id: 11 }),
        "unchanged"
    );
    assert!(!e.reauthorizing(), "the walk ended with its one chunk");
    assert_eq!(counter(&e, "plan changed: subscriber record changed"), 1);
    assert_eq!(counter(&e, "subscriber store applied to sessions"), 1);
    assert!(programs(&e.tick(3 * S)).is_empty(), "nothing walked twice");
    assert_eq!(on_plan(&e, 11), 2);
}

#[test]
fn an_unknown_captive_subscriber_is_admitted_once_a_record_names_it() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let nine = bind(&mut e, 9, 1);
    assert_eq!(
        grant(&e, nine),
        Some(Grant::Captive {
            plan_id: 1,
            over_cap: false
        })
    );
    e.subscribers.add(record(9, "gold")).unwrap();
    let out = changed(&mut e, 2);
    assert_eq!(programs(&out), [modify(nine, 10, false)]);
    assert_eq!(e.session(nine).map(|s| s.state.name()), Some("active"));
    assert_eq!(e.admission_counts(), (1, 0));
    assert_eq!(counter(&e, "admitted: subscriber record added"), 1);
}

#[test]
fn over_the_cap_a_newly_known_subscriber_waits_for_its_turn() {
    let mut e = engine(1, UnknownPolicy::Captive);
    let one = bind(&mut e, 1, 1);
    let nine = bind(&mut e, 9, 1);
    e.subscribers.add(record(9, "silver")).unwrap();
    let out = changed(&mut e, 2);
    assert_eq!(programs(&out), [modify(nine, 11, true)]);
    assert_eq!(e.admission_counts(), (1, 1));
    // Its turn comes when the active one leaves.
    let mut rel = msg(DhcpMessageType::Release, 1, 3);
    rel.ciaddr = e.session(one).and_then(|s| s.state.ip()).unwrap();
    let out = e.handle_dhcp(0, 0, &client_frame(&rel, None), 3 * S);
    assert!(programs(&out).contains(&modify(nine, 11, false)), "{out:?}");
}

#[test]
fn a_removed_record_walls_its_session_in_and_frees_its_place() {
    let mut e = engine(1, UnknownPolicy::Captive);
    let one = bind(&mut e, 1, 1);
    let two = bind(&mut e, 2, 1);
    assert_eq!(
        grant(&e, two),
        Some(Grant::Captive {
            plan_id: 11,
            over_cap: true
        })
    );
    assert!(e.subscribers.remove_mac(&mac(1).0));
    let out = changed(&mut e, 2);
    let p = programs(&out);
    assert!(p.contains(&modify(one, 1, true)), "{p:?}");
    assert!(
        p.contains(&modify(two, 11, false)),
        "the waiting one promoted: {p:?}"
    );
    assert_eq!(e.admission_counts(), (1, 0));
    assert_eq!(counter(&e, "walled: subscriber record removed"), 1);
}

#[test]
fn under_the_reject_policy_a_removed_record_ends_the_session() {
    let mut e = engine(10, UnknownPolicy::Reject);
    let one = bind(&mut e, 1, 1);
    assert!(e.subscribers.remove_mac(&mac(1).0));
    let out = changed(&mut e, 2);
    assert_eq!(programs(&out), [ProgramOp::Remove(one)]);
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Accounting {
            kind: AcctKind::Stop,
            reason: Some(EndReason::Disconnected),
            ..
        }
    )));
    assert_eq!(counter(&e, "disconnected: subscriber record removed"), 1);
}

#[test]
fn a_record_asking_for_an_address_the_session_lacks_waits_for_its_next_admission() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let nine = bind(&mut e, 9, 1);
    let held = e.session(nine).and_then(|s| s.state.ip()).unwrap();
    let elsewhere = Ipv4Addr::from(u32::from(held) + 7);
    e.subscribers
        .add(SubscriberRecord {
            ipv4: Some(elsewhere),
            ..record(9, "gold")
        })
        .unwrap();
    assert!(programs(&changed(&mut e, 2)).is_empty());
    assert_eq!(e.session(nine).map(|s| s.state.name()), Some("captive"));
    // The same record on the address it holds admits it.
    e.subscribers
        .add(SubscriberRecord {
            ipv4: Some(held),
            ..record(9, "gold")
        })
        .unwrap();
    assert_eq!(programs(&changed(&mut e, 3)), [modify(nine, 10, false)]);
}

#[test]
fn an_offer_made_before_the_change_binds_with_the_new_grant() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 1, 1), None),
        S,
    );
    let offer = replies(&out).pop().expect("an OFFER");
    e.subscribers.add(record(1, "silver")).unwrap();
    assert!(
        programs(&changed(&mut e, 2)).is_empty(),
        "nothing installed yet"
    );
    let mut r = msg(DhcpMessageType::Request, 1, 2);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), 2 * S);
    assert!(
        matches!(
            programs(&out)[..],
            [ProgramOp::Install(DpSession { plan_id: 11, .. })]
        ),
        "{out:?}"
    );
}

#[test]
fn radius_sessions_are_not_walked() {
    use crate::core::aaa::{AddressChoice, AuthOutcome};
    let mut cfg = engine_config(UnknownPolicy::Captive);
    cfg.external_auth = true;
    let mut e = Engine::new(cfg, cap(10), 0).unwrap();
    // A session RADIUS granted gold, and a local record naming its MAC on silver.
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 1, 1), None),
        S,
    );
    let id = authorized(&out).expect("asked RADIUS");
    let accept = AuthOutcome::Accept {
        plan: Some("gold".into()),
        session_timeout_secs: None,
        address: AddressChoice::Any,
        reauthorize: false,
    };
    let offer = replies(&e.auth_result(id, accept, S))
        .pop()
        .expect("an OFFER");
    let mut r = msg(DhcpMessageType::Request, 1, 2);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    e.handle_dhcp(0, 0, &client_frame(&r, None), S);
    let before = grant(&e, id).expect("bound");
    e.subscribers
        .import_csv("02:00:00:00:00:01,,,silver\n")
        .unwrap();
    e.subscribers_changed();
    assert!(!e.reauthorizing(), "no walk over RADIUS sessions");
    let out = e.tick(2 * S);
    assert!(programs(&out).is_empty(), "{out:?}");
    assert_eq!(grant(&e, id), Some(before), "RADIUS's grant stays");
}

/// `n` active sessions on plan gold, MACs 0a:00:00:00:hi:lo, restored as from the store.
fn restored(n: u32) -> Engine {
    let mut cfg = engine_config(UnknownPolicy::Captive);
    cfg.pools[0].prefix_len = 20;
    let mut e = Engine::new(cfg, cap(10_000), 0).unwrap();
    let line = Line {
        dataplane: 0,
        port: 0,
        outer_vlan: 0,
        inner_vlan: 0,
    };
    let sessions = (0..n)
        .map(|i| {
            let mac = [0x0a, 0, 0, 0, (i >> 8) as u8, i as u8];
            Session {
                id: u64::from(i) + 1,
                key: SubscriberKey::Mac { line, mac },
                line,
                mac,
                circuit_id: None,
                remote_id: None,
                created_ns: S,
                state: State::Active {
                    lease: Lease {
                        ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 10)) + i),
                        lease_secs: 600,
                        bound_at_ns: S,
                        renewed_at_ns: S,
                    },
                    plan_id: 10,
                },
                ends_at_ns: None,
                reauthorize_at_end: false,
                pending: None,
                last_offer_ns: 0,
            }
        })
        .collect();
    assert!(e.restore(sessions, 1).is_empty());
    e
}

fn all_on(e: &mut Engine, n: u32, plan: &str) {
    let rows: String = (0..n)
        .map(|i| format!("0a:00:00:00:{:02x}:{:02x},,,{plan}\n", i >> 8, i & 0xff))
        .collect();
    e.subscribers.import_csv(&rows).unwrap();
}

#[test]
fn the_walk_goes_in_chunks_and_once_more_for_a_change_made_during_it() {
    let n = 2 * reauth::SWEEP_CHUNK as u32 + 452;
    let mut e = restored(n);
    all_on(&mut e, n, "silver");
    let first = programs(&changed(&mut e, 2));
    assert_eq!(first.len(), reauth::SWEEP_CHUNK, "one chunk a tick");
    assert!(first.iter().all(|p| matches!(p, ProgramOp::Modify { id, plan_id: 11, .. } if *id <= reauth::SWEEP_CHUNK as u64)));
    // Back to gold while the walk is under way: the sessions not walked yet stay gold, and
    // the ones already moved to silver are walked again.
    all_on(&mut e, n, "gold");
    e.subscribers_changed();
    let mut rest = Vec::new();
    for t in 3..10 {
        rest.extend(programs(&e.tick(t * S)));
    }
    assert!(!e.reauthorizing());
    assert_eq!(
        rest.len(),
        reauth::SWEEP_CHUNK,
        "{:?}",
        &rest[..rest.len().min(3)]
    );
    assert!(
        rest.iter()
            .all(|p| matches!(p, ProgramOp::Modify { plan_id: 10, .. }))
    );
    assert_eq!(on_plan(&e, 10), u64::from(n));
    assert_eq!(counter(&e, "subscriber store applied to sessions"), 1);
}
