//! Script tests of the engine: frames and ticks in, outputs out.

use super::*;
use crate::core::dhcp::tests::client_frame;
use crate::core::test_support::{S, cap, counter, engine_config, mac, msg, programs, replies};
use kbng_wire::{DhcpOp, DhcpRepr};

fn engine(cap_n: u64, unknown: UnknownPolicy) -> Engine {
    let mut cfg = engine_config(unknown);
    cfg.pools[0].dns = vec![Ipv4Addr::new(192, 0, 2, 53)];
    cfg.pools[0].exclusions = vec![(Ipv4Addr::new(100, 64, 0, 2), 31)];
    let mut e = Engine::new(cfg, cap(cap_n), 0).unwrap();
    e.subscribers
        .import_csv("02:00:00:00:00:01,,,gold\n02:00:00:00:00:02,,,silver\n02:00:00:00:00:03,,,\n")
        .unwrap();
    e
}

/// Full DORA for MAC `m` at `t` seconds; returns the address and the ACK's outputs.
fn dora(e: &mut Engine, m: u8, t: u64) -> (Ipv4Addr, Vec<Output>) {
    dora_on(e, 0, m, t)
}

/// [`dora`] on access port `port` (another line for the same MAC).
fn dora_on(e: &mut Engine, port: u32, m: u8, t: u64) -> (Ipv4Addr, Vec<Output>) {
    let out = e.handle_dhcp(
        0,
        port,
        &client_frame(&msg(DhcpMessageType::Discover, m, 1), None),
        t * S,
    );
    let offer = replies(&out).pop().expect("an OFFER");
    assert_eq!(offer.message_type, DhcpMessageType::Offer);
    let mut r = msg(DhcpMessageType::Request, m, 2);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    let out = e.handle_dhcp(0, port, &client_frame(&r, None), t * S);
    let ack = replies(&out).pop().expect("an ACK");
    assert_eq!(ack.message_type, DhcpMessageType::Ack);
    assert_eq!(ack.yiaddr, offer.yiaddr);
    (ack.yiaddr, out)
}

#[test]
fn an_ack_names_the_session_it_announces_and_other_replies_none() {
    let announced = |out: &[Output]| -> Vec<Option<SessionId>> {
        out.iter()
            .filter_map(|o| match o {
                Output::Inject { announces, .. } => Some(*announces),
                _ => None,
            })
            .collect()
    };
    let mut e = engine(10, UnknownPolicy::Captive);
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 2, 1), None),
        0,
    );
    assert_eq!(announced(&out), [None], "the OFFER announces no session");
    let (ip, out) = dora(&mut e, 1, 0);
    let id = e.find(Some(ip), None).expect("bound");
    assert_eq!(announced(&out), [Some(id)]);
}

#[test]
fn dora_installs_and_persists_with_the_plan() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, out) = dora(&mut e, 1, 1);
    assert_eq!(ip, Ipv4Addr::new(100, 64, 0, 4), "exclusion .2/31 skipped");
    let p = programs(&out);
    assert!(matches!(
        p[..],
        [ProgramOp::Install(DpSession {
            plan_id: 10,
            captive: false,
            ..
        })]
    ));
    assert!(out.iter().any(|o| matches!(o, Output::Persist(_))));
    assert_eq!(e.desired(0).len(), 1);
}

#[test]
fn renewal_expiry_and_reclaim() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, _) = dora(&mut e, 1, 0);
    // Renew at T1 (300 s) by unicast with ciaddr.
    let mut r = msg(DhcpMessageType::Request, 1, 3);
    r.ciaddr = ip;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), 300 * S);
    assert_eq!(replies(&out)[0].message_type, DhcpMessageType::Ack);
    assert!(programs(&out).is_empty(), "a renewal reprograms nothing");
    // No further renewal: renewing at 600, rebinding at 825, expired at 900.
    assert!(e.tick(599 * S).is_empty());
    e.tick(600 * S);
    assert_eq!(e.session(1).unwrap().state.name(), "renewing");
    let out = e.tick(900 * S);
    assert_eq!(programs(&out), vec![ProgramOp::Remove(1)]);
    assert_eq!(e.sessions_len(), 0);
    // Reclaimed, and the same subscriber gets the same address back.
    let (again, _) = dora(&mut e, 1, 901);
    assert_eq!(again, ip);
}

#[test]
fn release_removes_after_the_dataplane_confirms() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, _) = dora(&mut e, 1, 0);
    let mut r = msg(DhcpMessageType::Release, 1, 4);
    r.ciaddr = ip;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), 10 * S);
    assert_eq!(programs(&out), vec![ProgramOp::Remove(1)]);
    assert!(out.contains(&Output::Forget(1)));
    assert_eq!(e.session(1).unwrap().state.name(), "releasing");
    assert!(e.desired(0).is_empty(), "no longer wanted in the dataplane");
    // A DISCOVER before the dataplane confirms is held, and its retransmission replaces it.
    for xid in [6, 7] {
        let d = msg(DhcpMessageType::Discover, 1, xid);
        let out = e.handle_dhcp(0, 0, &client_frame(&d, None), 10 * S);
        assert!(replies(&out).is_empty(), "{out:?}");
    }
    assert_eq!(
        counter(&e, "DISCOVER while releasing: answered once removed"),
        2
    );
    // Answered once the removal is confirmed: the latest, with the address just freed.
    let out = e.removed(1, 11 * S);
    let offers: Vec<_> = replies(&out)
        .into_iter()
        .map(|r| (r.xid, r.yiaddr))
        .collect();
    assert_eq!(offers, [(7, ip)]);
    assert_eq!(e.sessions_len(), 1);
    assert!(e.session(1).is_none(), "a new session");
}

#[test]
fn a_discover_held_while_releasing_is_dropped_once_stale() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, _) = dora(&mut e, 1, 0);
    let mut r = msg(DhcpMessageType::Release, 1, 4);
    r.ciaddr = ip;
    e.handle_dhcp(0, 0, &client_frame(&r, None), 10 * S);
    let d = msg(DhcpMessageType::Discover, 1, 6);
    e.handle_dhcp(0, 0, &client_frame(&d, None), 10 * S);
    // The dataplane confirms long after the client retransmitted or gave up.
    let out = e.removed(1, 21 * S);
    assert!(replies(&out).is_empty(), "{out:?}");
    assert_eq!(e.sessions_len(), 0);
    assert_eq!(counter(&e, "held while releasing: too old once removed"), 1);
}

#[test]
fn decline_quarantines_then_returns_the_address() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, _) = dora(&mut e, 1, 0);
    let mut d = msg(DhcpMessageType::Decline, 1, 5);
    d.requested_ip = Some(ip);
    let out = e.handle_dhcp(0, 0, &client_frame(&d, None), S);
    assert_eq!(programs(&out), vec![ProgramOp::Remove(1)]);
    let (next, _) = dora(&mut e, 1, 2);
    assert_ne!(next, ip, "quarantined");
    e.tick(62 * S);
    assert!(!e.pools.is_allocated(ip), "back after the quarantine");
}

#[test]
fn cap_reached_captive_then_promoted_on_release_and_on_raise() {
    let mut e = engine(1, UnknownPolicy::Captive);
    let (ip1, _) = dora(&mut e, 1, 0);
    let (_, out) = dora(&mut e, 2, 0);
    assert!(
        matches!(
            programs(&out)[..],
            [ProgramOp::Install(DpSession {
                plan_id: 11,
                captive: true,
                ..
            })]
        ),
        "subscriber N+1 is captive with its own plan kept for promotion"
    );
    let (_, out) = dora(&mut e, 3, 0);
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession { captive: true, .. })]
    ));
    // Subscriber 1 leaves: 2 (the oldest waiting) is promoted in place.
    let mut r = msg(DhcpMessageType::Release, 1, 4);
    r.ciaddr = ip1;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), S);
    assert_eq!(
        programs(&out),
        vec![
            ProgramOp::Remove(1),
            ProgramOp::Modify {
                id: 2,
                plan_id: 11,
                captive: false
            }
        ]
    );
    // The cap is raised: 3 is promoted.
    let out = e.set_cap(cap(5), 2 * S);
    assert_eq!(
        programs(&out),
        vec![ProgramOp::Modify {
            id: 3,
            plan_id: 10,
            captive: false
        }]
    );
    assert_eq!(e.admission_counts(), (2, 0));
}

#[test]
fn unknown_subscribers_captive_or_rejected() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (_, out) = dora(&mut e, 9, 0);
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession {
            plan_id: 1,
            captive: true,
            ..
        })]
    ));
    let mut e = engine(10, UnknownPolicy::Reject);
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 9, 1), None),
        0,
    );
    assert!(replies(&out).is_empty());
    assert_eq!(e.sessions_len(), 0);
}

#[test]
fn plan_changed_by_coa_modifies_in_place() {
    let mut e = engine(10, UnknownPolicy::Captive);
    dora(&mut e, 1, 0);
    let out = e.change_plan(1, "silver", S).unwrap();
    assert_eq!(
        programs(&out),
        vec![ProgramOp::Modify {
            id: 1,
            plan_id: 11,
            captive: false
        }]
    );
    assert!(e.change_plan(1, "platinum", S).is_err());
}

#[test]
fn a_session_the_dataplane_lacks_is_installed_again_as_it_is_now() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip, _) = dora(&mut e, 1, 0);
    e.change_plan(1, "silver", S).unwrap();
    let out = e.missing(1);
    let ops = programs(&out);
    let [ProgramOp::Install(dp)] = &ops[..] else {
        panic!("one install, got {out:?}");
    };
    assert_eq!((dp.id, dp.ip, dp.plan_id, dp.captive), (1, ip, 11, false));
    assert_eq!(counter(&e, "reinstalled: missing in dataplane"), 1);
    assert!(
        e.missing(99).is_empty(),
        "a session that ended needs nothing"
    );
}

#[test]
fn discover_storm_from_one_mac_is_suppressed() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let f = client_frame(&msg(DhcpMessageType::Discover, 1, 1), None);
    let mut offers = 0;
    for i in 0..1000u64 {
        offers += replies(&e.handle_dhcp(0, 0, &f, i * S / 1000)).len();
    }
    assert_eq!(offers, 2, "one at 0 s, one re-offer after 0.5 s");
    assert_eq!(e.sessions_len(), 1);
    assert!(e.counters().contains(&("DISCOVER storm suppressed", 998)));
}

#[test]
fn random_mac_starvation_is_bounded_per_line() {
    let mut e = engine(1000, UnknownPolicy::Captive);
    let attacker = Some((100, 0));
    for i in 0..200u32 {
        let b = i.to_be_bytes();
        let m = DhcpRepr::new(
            DhcpOp::BootRequest,
            DhcpMessageType::Discover,
            i,
            kbng_wire::MacAddr([0x0a, 0xff, b[0], b[1], b[2], b[3]]),
        );
        e.handle_dhcp(0, 0, &client_frame(&m, attacker), 0);
    }
    e.tick(S);
    assert_eq!(e.sessions_len(), 8, "max_sessions_per_line");
    assert!(e.counters().contains(&("line session limit", 192)));
    // Another line is served.
    dora(&mut e, 1, 1);
}

#[test]
fn malformed_frames_are_counted() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let good = client_frame(&msg(DhcpMessageType::Discover, 1, 1), None);
    e.handle_dhcp(0, 0, &good[..60], 0);
    let mut bad = good.clone();
    bad[14 + 28 + 236] = 0;
    e.handle_dhcp(0, 0, &bad, 0);
    e.handle_dhcp(0, 0, &[], 0);
    let c = e.counters();
    assert!(c.contains(&("bad IPv4 header", 1)), "{c:?}");
    assert!(c.contains(&("bad magic cookie", 1)), "{c:?}");
    assert!(c.contains(&("bad ethernet header", 1)), "{c:?}");
    assert_eq!(e.sessions_len(), 0);
}

/// `n` new subscribers DISCOVER at time 0, each on its own line (so the per-line bound does
/// not apply); returns the OFFERs sent at once.
fn rush(e: &mut Engine, n: u32) -> usize {
    let mut offers = 0;
    for i in 0..n {
        let b = i.to_be_bytes();
        let m = DhcpRepr::new(
            DhcpOp::BootRequest,
            DhcpMessageType::Discover,
            i,
            kbng_wire::MacAddr([0x0a, 0, b[0], b[1], b[2], b[3]]),
        );
        offers += replies(&e.handle_dhcp(0, i, &client_frame(&m, None), 0)).len();
    }
    offers
}

#[test]
fn pacing_queues_the_rush_and_completes_it_on_ticks() {
    let mut e = engine(10_000, UnknownPolicy::Captive);
    let mut offers = rush(&mut e, 240);
    assert_eq!(offers, 100, "the burst");
    offers += replies(&e.tick(S / 10)).len();
    assert_eq!(offers, 200, "1000/s for 0.1 s");
    offers += replies(&e.tick(S)).len();
    assert_eq!(offers, 240, "the /24 has 251 usable addresses");
}

#[test]
fn paced_discovers_older_than_the_max_wait_are_dropped_as_stale() {
    let mut e = engine(10_000, UnknownPolicy::Captive);
    assert_eq!(rush(&mut e, 150), 100, "the burst; 50 queued");
    // The engine's tick comes late (a stalled task): past the 4 s maximum wait, the 50 queued
    // DISCOVERs are stale, answered by nobody, and none took an address.
    assert!(replies(&e.tick(5 * S)).is_empty());
    let c = e.counters();
    assert!(c.contains(&("pacing stale dropped", 50)), "{c:?}");
    assert!(c.contains(&("pacing queued", 0)), "{c:?}");
    assert_eq!(e.sessions_len(), 100);
}

#[test]
fn init_reboot_after_lost_state_is_adopted_and_wrong_address_nakked() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let mut r = msg(DhcpMessageType::Request, 1, 7);
    r.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 50));
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), 0);
    assert_eq!(replies(&out)[0].yiaddr, Ipv4Addr::new(100, 64, 0, 50));
    assert_eq!(e.session(1).unwrap().state.name(), "active");
    r.requested_ip = Some(Ipv4Addr::new(10, 9, 9, 9));
    let mut r2 = r.clone();
    r2.chaddr = mac(2);
    let out = e.handle_dhcp(0, 0, &client_frame(&r2, None), 0);
    assert_eq!(replies(&out)[0].message_type, DhcpMessageType::Nak);
}

#[test]
fn restore_keeps_timestamps_and_addresses() {
    let mut e = engine(10, UnknownPolicy::Captive);
    dora(&mut e, 1, 5);
    dora(&mut e, 2, 6);
    let stored: Vec<Session> = e.list(0, 100, |_| true).cloned().collect();
    let mut e2 = engine(10, UnknownPolicy::Captive);
    assert!(e2.restore(stored.clone(), e.next_id()).is_empty());
    let again: Vec<Session> = e2.list(0, 100, |_| true).cloned().collect();
    let json = |v: &[Session]| serde_json::to_string(v).unwrap();
    assert_eq!(json(&stored), json(&again));
    assert_eq!(e2.desired(0), e.desired(0));
    // Restored addresses are not handed out again; new ids do not collide.
    let (ip, _) = dora(&mut e2, 3, 7);
    assert!(stored.iter().all(|s| s.state.ip() != Some(ip)));
    assert_eq!(e2.session(3).unwrap().mac, mac(3).0);
    // The JSON form round-trips (what the store writes).
    let j = serde_json::to_string(&stored[0]).unwrap();
    let back: Session = serde_json::from_str(&j).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), j);
}

#[test]
fn drain_brings_sessions_to_zero() {
    let mut e = engine(10, UnknownPolicy::Captive);
    for m in 1..=3 {
        dora(&mut e, m, 0);
    }
    let d = e.drain(0, 2, S);
    assert_eq!(programs(&d.out).len(), 2);
    assert_eq!((d.started, d.last), (2, 2));
    assert_eq!(d.remaining, 3, "two releasing, one bound");
    // The next chunk starts after the first; a pass from the start skips the releasing two.
    let next = e.drain(d.last, 2, S);
    assert_eq!(programs(&next.out), vec![ProgramOp::Remove(3)]);
    assert_eq!(
        (next.started, next.last),
        (1, 3),
        "fewer than asked: the end"
    );
    let again = e.drain(0, 10, S);
    assert_eq!((again.started, again.last), (0, 0));
    assert!(again.out.is_empty());
    for id in 1..=3 {
        e.removed(id, 2 * S);
    }
    assert_eq!(e.sessions_len(), 0);
}

/// The census the engine keeps equals one counted afresh from its sessions.
fn assert_census(e: &Engine, when: &str) {
    let fresh = crate::core::census::Census::of(e.list(0, usize::MAX, |_| true).map(|s| &s.state));
    assert_eq!(e.census(), &fresh, "census after {when}");
    let walked: FastMap<Ipv4Addr, SessionId> = e
        .list(0, usize::MAX, |_| true)
        .filter_map(|s| Some((s.state.ip()?, s.id)))
        .collect();
    assert_eq!(e.by_ip, walked, "address index after {when}");
    for (ip, id) in walked {
        assert_eq!(e.find(Some(ip), None), Some(id), "find {ip} after {when}");
    }
    // By MAC: the first session (by id) holding it, as a walk finds it; none for a MAC
    // nobody holds.
    let mut first_by_mac: FastMap<MacAddr, SessionId> = FastMap::default();
    for s in e.list(0, usize::MAX, |_| true) {
        first_by_mac.entry(s.mac).or_insert(s.id);
    }
    for (m, id) in first_by_mac {
        assert_eq!(e.find(None, Some(m)), Some(id), "find {m:?} after {when}");
    }
    assert_eq!(e.find(None, Some([2, 0xee, 0, 0, 0, 1])), None, "{when}");
}

#[test]
fn the_census_follows_every_change_to_the_sessions() {
    let mut e = engine(1, UnknownPolicy::Captive);
    assert_census(&e, "start");
    // An OFFER outstanding, then three DORAs: one active, two captive over the cap.
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 9, 1), None),
        0,
    );
    assert_eq!(replies(&out).len(), 1);
    assert_census(&e, "an OFFER");
    let (ip1, _) = dora(&mut e, 1, 0);
    dora(&mut e, 2, 0);
    dora(&mut e, 3, 0);
    assert_census(&e, "three DORAs");
    let states: Vec<_> = e.census().iter().collect();
    assert!(states.contains(&(("active", 10), 1)), "{states:?}");
    assert!(states.contains(&(("captive", 11), 1)), "{states:?}");
    // 1 releases: releasing, and 2 is promoted in place; then the dataplane confirms.
    let mut r = msg(DhcpMessageType::Release, 1, 4);
    r.ciaddr = ip1;
    e.handle_dhcp(0, 0, &client_frame(&r, None), S);
    assert_census(&e, "a release and a promotion");
    let releasing: Vec<SessionId> = e
        .list(0, 100, |s| s.state.name() == "releasing")
        .map(|s| s.id)
        .collect();
    assert_eq!(releasing.len(), 1);
    e.removed(releasing[0], 2 * S);
    assert_census(&e, "the removal");
    // Renewing at T2, then every lease expires.
    e.tick(600 * S);
    assert_census(&e, "T2");
    e.tick(900 * S);
    assert_census(&e, "expiry");
    // The dataplane confirms the expired sessions' removal.
    let ending: Vec<SessionId> = e.list(0, 100, |_| true).map(|s| s.id).collect();
    for id in ending {
        e.removed(id, 901 * S);
    }
    assert_census(&e, "the expired sessions' removal");
    assert_eq!(e.sessions_len(), 0);
    // Restored sessions are counted too.
    dora(&mut e, 1, 1000);
    dora(&mut e, 2, 1000);
    let stored: Vec<Session> = e.list(0, 100, |_| true).cloned().collect();
    let mut e2 = engine(1, UnknownPolicy::Captive);
    assert!(e2.restore(stored, e.next_id()).is_empty());
    assert_census(&e2, "a restore");
    assert_eq!(e2.census(), e.census());
}

#[test]
fn a_mac_on_two_lines_is_found_by_walking_until_one_holds_it_again() {
    let mut e = engine(10, UnknownPolicy::Captive);
    let (ip_a, _) = dora_on(&mut e, 0, 1, 0);
    let (ip_b, _) = dora_on(&mut e, 1, 1, 0);
    assert_ne!(ip_a, ip_b, "two sessions, two lines");
    assert_census(&e, "one MAC on two lines");
    let first = e.find(Some(ip_a), None).expect("port 0's session");
    let second = e.find(Some(ip_b), None).expect("port 1's session");
    assert_eq!(e.find(None, Some(mac(1).0)), Some(first));
    // Port 0's session releases and goes: the MAC is found on port 1 (by walking).
    let mut r = msg(DhcpMessageType::Release, 1, 4);
    r.ciaddr = ip_a;
    e.handle_dhcp(0, 0, &client_frame(&r, None), S);
    e.removed(first, 2 * S);
    assert_census(&e, "one of the two released");
    assert_eq!(e.find(None, Some(mac(1).0)), Some(second));
    let mut r = msg(DhcpMessageType::Release, 1, 5);
    r.ciaddr = ip_b;
    e.handle_dhcp(0, 1, &client_frame(&r, None), 3 * S);
    e.removed(second, 4 * S);
    assert_census(&e, "both gone");
    assert_eq!(e.find(None, Some(mac(1).0)), None);
    // One holder again: indexed again.
    dora_on(&mut e, 1, 1, 5);
    assert_census(&e, "the MAC back on one line");
    assert!(matches!(e.by_mac.get(&mac(1).0), MacHolder::One(_)));
}

#[test]
fn a_dataplane_whose_capacity_is_held_takes_no_new_subscriber() {
    let mut e = engine(10, UnknownPolicy::Captive);
    e.set_dataplane_capacity(0, 2);
    let (ip1, _) = dora(&mut e, 1, 0);
    dora(&mut e, 2, 0);
    // A third subscriber: no OFFER (the dataplane's tables would refuse its install).
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 3, 1), None),
        S,
    );
    assert!(replies(&out).is_empty(), "{out:?}");
    assert!(e.counters().contains(&("dataplane full", 1)));
    assert_eq!(e.sessions_len(), 2);
    // Existing subscribers still renew.
    let mut r = msg(DhcpMessageType::Request, 1, 7);
    r.ciaddr = ip1;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), 2 * S);
    assert_eq!(replies(&out)[0].message_type, DhcpMessageType::Ack);
    // Subscriber 1 leaves; once the dataplane confirms, the third one gets in.
    let mut r = msg(DhcpMessageType::Release, 1, 8);
    r.ciaddr = ip1;
    e.handle_dhcp(0, 0, &client_frame(&r, None), 3 * S);
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 3, 2), None),
        3 * S,
    );
    assert!(
        replies(&out).is_empty(),
        "a releasing session still holds its slot"
    );
    let releasing: Vec<SessionId> = e
        .list(0, 10, |s| s.state.name() == "releasing")
        .map(|s| s.id)
        .collect();
    e.removed(releasing[0], 4 * S);
    dora(&mut e, 3, 5);
    assert_eq!(e.sessions_len(), 2);
    // Another dataplane's capacity is its own.
    e.set_dataplane_capacity(1, 1);
    let out = e.handle_dhcp(
        1,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, 4, 1), None),
        6 * S,
    );
    assert_eq!(replies(&out).len(), 1, "dataplane 1 has room");
}

#[test]
fn the_subscriber_index_is_sized_for_the_dataplanes_and_the_pools() {
    let mut e = engine(10, UnknownPolicy::Captive);
    assert!(
        e.by_key.capacity() < 200,
        "nothing reserved before a dataplane reports"
    );
    e.set_dataplane_capacity(0, 100);
    let at_100 = e.by_key.capacity();
    assert!(at_100 >= 100, "{at_100}");
    e.set_dataplane_capacity(1, 150);
    let at_250 = e.by_key.capacity();
    assert!(at_250 >= 250 && at_250 > at_100, "{at_250}");
    // The /24 pool (less its excluded /31) addresses 252 sessions: a million-session
    // dataplane does not make the index reserve a million.
    e.set_dataplane_capacity(0, 1_000_000);
    let bounded = e.by_key.capacity();
    assert!((252..4096).contains(&bounded), "{bounded}");
    let by_mac = e.by_mac.capacity();
    assert!((252..4096).contains(&by_mac), "MAC index: {by_mac}");
    let (_, _) = dora(&mut e, 1, 1);
    assert_eq!(e.by_key.capacity(), bounded, "a session does not regrow it");
    // The admission ledger holds active sessions only: no more than the cap of 10.
    let active = e.admission.active.capacity();
    assert!((10..200).contains(&active), "{active}");
    let _ = e.set_cap(cap(1000), S);
    let raised = e.admission.active.capacity();
    assert!((252..4096).contains(&raised), "{raised}");
}
