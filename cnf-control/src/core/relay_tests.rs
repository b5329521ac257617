//! Script tests of relay mode: client frames, server datagrams and ticks in, outputs out, time
//! injected. The engine is the real one with relay mode on; the "server" is these scripts.
#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddrV4};

use kbng_wire::{DhcpMessageType, DhcpRepr, MacAddr};

use super::*;
use crate::core::dhcp::tests::client_frame;
use crate::core::engine::{DpSession, Engine, Output, ProgramOp, UnknownPolicy};
use crate::core::test_support::{
    GW, S, authorized, cap, counter, engine_config, msg, programs, replies,
};

const KEA: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 2);
const KEA2: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 3);

fn cfg(servers: &[Ipv4Addr]) -> RelayConfig {
    RelayConfig {
        servers: servers.iter().map(|s| SocketAddrV4::new(*s, 67)).collect(),
        giaddr: GW,
        option82: Option82Policy::Insert,
        remote_id: Some(b"bng-test".to_vec()),
        timeout_ns: 2 * S,
        server_down_ns: 30 * S,
        max_hops: 4,
        discover_interval_ns: S / 2,
    }
}

fn engine(cap_n: u64, unknown: UnknownPolicy, servers: &[Ipv4Addr]) -> Engine {
    let mut e = Engine::new(engine_config(unknown), cap(cap_n), 0).unwrap();
    e.subscribers
        .import_csv("02:00:00:00:00:01,,,gold\n02:00:00:00:00:02,,,gold\n")
        .unwrap();
    e.enable_relay(cfg(servers), 0);
    e
}

fn client(e: &mut Engine, m: &DhcpRepr, t: u64) -> Vec<Output> {
    e.handle_dhcp(0, 0, &client_frame(m, None), t)
}

/// The relayed messages among outputs, parsed, with their server.
fn relayed(out: &[Output]) -> Vec<(SocketAddrV4, DhcpRepr)> {
    out.iter()
        .filter_map(|o| match o {
            Output::ToServer { server, payload } => {
                Some((*server, DhcpRepr::parse(payload).unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// What a server answers to a relayed request: option 82 echoed (RFC 3046 §2.2).
fn answer(req: &DhcpRepr, kind: DhcpMessageType, yi: Ipv4Addr, lease: u32) -> Vec<u8> {
    let mut r = req.reply(kind, KEA);
    if kind != DhcpMessageType::Nak {
        r.yiaddr = yi;
        r.lease_secs = Some(lease);
        r.subnet_mask = Some(Ipv4Addr::new(255, 255, 255, 0));
        r.routers = vec![GW];
    }
    let mut buf = vec![0u8; 600];
    let n = r.emit(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn from(ip: Ipv4Addr) -> SocketAddrV4 {
    SocketAddrV4::new(ip, 67)
}

/// DISCOVER, OFFER, REQUEST, ACK through the relay; returns the ACK's outputs.
fn dora(e: &mut Engine, m: u8, yi: Ipv4Addr, lease: u32, t: u64) -> Vec<Output> {
    let out = client(e, &msg(DhcpMessageType::Discover, m, 7), t);
    let (_, d) = relayed(&out).pop().expect("DISCOVER relayed");
    let out = e.relay_reply(from(KEA), &answer(&d, DhcpMessageType::Offer, yi, lease), t);
    let offer = replies(&out).pop().expect("OFFER to the client");
    assert_eq!(offer.yiaddr, yi);
    let mut r = msg(DhcpMessageType::Request, m, 8);
    r.requested_ip = Some(yi);
    r.server_id = Some(KEA);
    let out = client(e, &r, t);
    let (to, req) = relayed(&out).pop().expect("REQUEST relayed");
    assert_eq!(to, from(KEA), "REQUEST goes to the server the client chose");
    e.relay_reply(from(KEA), &answer(&req, DhcpMessageType::Ack, yi, lease), t)
}

fn only_session(e: &Engine) -> crate::core::engine::Session {
    let v: Vec<_> = e.list(0, 10, |_| true).cloned().collect();
    assert_eq!(v.len(), 1, "{v:#?}");
    v[0].clone()
}

#[test]
fn discover_is_relayed_with_giaddr_hops_and_option82_and_the_offer_comes_back_without_it() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 1, 7), S);
    let [(to, d)] = &relayed(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(*to, from(KEA));
    assert_eq!((d.giaddr, d.hops, d.xid), (GW, 1, 7));
    let info = d.relay_agent_info.as_ref().unwrap();
    assert_eq!(info.circuit_id.as_deref(), Some(&b"0/0/0/0"[..]));
    assert_eq!(info.remote_id.as_deref(), Some(&b"bng-test"[..]));
    let yi = Ipv4Addr::new(100, 64, 0, 50);
    let out = e.relay_reply(from(KEA), &answer(d, DhcpMessageType::Offer, yi, 120), S);
    let [offer] = &replies(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(offer.yiaddr, yi);
    assert_eq!(offer.relay_agent_info, None, "our option 82 is removed");
    assert_eq!(e.sessions_len(), 0, "an OFFER builds nothing");
}

#[test]
fn ack_builds_the_session_from_the_servers_address_and_lease() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let yi = Ipv4Addr::new(100, 64, 0, 77);
    let out = dora(&mut e, 1, yi, 120, 5 * S);
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession { ip, plan_id: 10, captive: false, .. })] if ip == yi
    ));
    let acks = replies(&out);
    assert_eq!(acks.len(), 1);
    assert_eq!(
        (acks[0].message_type, acks[0].yiaddr),
        (DhcpMessageType::Ack, yi)
    );
    assert_eq!(
        acks[0].lease_secs,
        Some(120),
        "the server's lease, not the pool's 600"
    );
    assert!(out.iter().any(|o| matches!(o, Output::Persist(_))));
    let s = only_session(&e);
    let (lease, _) = s.state.bound().unwrap();
    assert_eq!(
        (lease.ip, lease.lease_secs, lease.bound_at_ns),
        (yi, 120, 5 * S)
    );
}

#[test]
fn nak_builds_no_session() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let mut r = msg(DhcpMessageType::Request, 1, 9);
    r.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 9));
    let out = client(&mut e, &r, S);
    let (_, req) = relayed(&out).pop().unwrap();
    let out = e.relay_reply(
        from(KEA),
        &answer(&req, DhcpMessageType::Nak, Ipv4Addr::UNSPECIFIED, 0),
        S,
    );
    let [nak] = &replies(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(nak.message_type, DhcpMessageType::Nak);
    assert!(programs(&out).is_empty());
    assert_eq!(e.sessions_len(), 0);
}

#[test]
fn renewal_ack_extends_the_lease_and_the_old_expiry_passes() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let yi = Ipv4Addr::new(100, 64, 0, 20);
    dora(&mut e, 1, yi, 100, 0);
    // T1 = 50 s: the client unicasts a REQUEST with ciaddr.
    let mut r = msg(DhcpMessageType::Request, 1, 11);
    r.ciaddr = yi;
    let out = client(&mut e, &r, 60 * S);
    let (_, req) = relayed(&out).pop().unwrap();
    assert_eq!(req.ciaddr, yi);
    let out = e.relay_reply(
        from(KEA),
        &answer(&req, DhcpMessageType::Ack, yi, 300),
        60 * S,
    );
    assert!(programs(&out).is_empty(), "a renewal reprograms nothing");
    assert_eq!(replies(&out).len(), 1);
    let (lease, _) = only_session(&e).state.bound().unwrap();
    assert_eq!((lease.renewed_at_ns, lease.lease_secs), (60 * S, 300));
    assert_eq!(lease.bound_at_ns, 0, "the first bind is kept");
    // The first lease would have expired at 100 s.
    let out = e.tick(200 * S);
    assert!(programs(&out).is_empty());
    assert!(only_session(&e).state.bound().is_some());
    // Without another renewal it expires at 60 + 300 s.
    let out = e.tick(361 * S);
    assert_eq!(programs(&out), vec![ProgramOp::Remove(1)]);
}

#[test]
fn release_is_relayed_and_removes_the_session() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let yi = Ipv4Addr::new(100, 64, 0, 30);
    dora(&mut e, 1, yi, 600, S);
    let mut r = msg(DhcpMessageType::Release, 1, 12);
    r.ciaddr = yi;
    r.server_id = Some(KEA);
    let out = client(&mut e, &r, 2 * S);
    let [(to, rel)] = &relayed(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (*to, rel.message_type, rel.giaddr),
        (from(KEA), DhcpMessageType::Release, GW)
    );
    assert_eq!(programs(&out), vec![ProgramOp::Remove(1)]);
    e.removed(1, 2 * S);
    assert_eq!(e.sessions_len(), 0);
    // The address is free again for whoever the server gives it to next.
    dora(&mut e, 2, yi, 600, 3 * S);
    assert_eq!(only_session(&e).state.ip(), Some(yi));
}

#[test]
fn silent_server_fails_over_then_gives_up_with_no_session() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA, KEA2]);
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 1, 7), 0);
    assert_eq!(relayed(&out)[0].0, from(KEA));
    assert!(relayed(&e.tick(S)).is_empty(), "not yet timed out");
    let out = e.tick(2 * S);
    let [(to, d)] = &relayed(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (*to, d.xid),
        (from(KEA2), 7),
        "the same message, to the next server"
    );
    assert_eq!(counter(&e, "relay: failover to next server"), 1);
    let out = e.tick(4 * S);
    assert!(relayed(&out).is_empty());
    assert_eq!(counter(&e, "relay: no server answered"), 1);
    assert_eq!(e.sessions_len(), 0);
    // A late answer finds no request.
    let late = answer(d, DhcpMessageType::Offer, Ipv4Addr::new(100, 64, 0, 5), 60);
    assert!(replies(&e.relay_reply(from(KEA2), &late, 5 * S)).is_empty());
    assert_eq!(counter(&e, "relay: reply matches no request"), 1);
    // KEA is passed over for 30 s; KEA2 answered (late), so it is up again.
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 2, 8), 6 * S);
    assert_eq!(relayed(&out)[0].0, from(KEA2));
}

#[test]
fn a_down_server_is_passed_over_for_new_clients() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA, KEA2]);
    client(&mut e, &msg(DhcpMessageType::Discover, 1, 7), 0);
    let out = e.tick(2 * S);
    let (_, d) = relayed(&out).pop().unwrap();
    let yi = Ipv4Addr::new(100, 64, 0, 40);
    e.relay_reply(
        from(KEA2),
        &answer(&d, DhcpMessageType::Offer, yi, 60),
        2 * S,
    );
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 2, 9), 3 * S);
    assert_eq!(relayed(&out)[0].0, from(KEA2), "KEA is down for 30 s");
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 1, 10), 40 * S);
    assert_eq!(relayed(&out)[0].0, from(KEA), "and tried first again after");
}

#[test]
fn beyond_the_cap_the_acked_subscriber_is_captive() {
    let mut e = engine(1, UnknownPolicy::Captive, &[KEA]);
    dora(&mut e, 1, Ipv4Addr::new(100, 64, 0, 10), 600, S);
    let out = dora(&mut e, 2, Ipv4Addr::new(100, 64, 0, 11), 600, S);
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession {
            captive: true,
            plan_id: 10,
            ..
        })]
    ));
    assert_eq!(
        replies(&out).len(),
        1,
        "a captive subscriber still gets its address"
    );
}

#[test]
fn rejected_subscriber_is_not_relayed_and_an_unknown_one_is_captive() {
    let mut e = engine(10, UnknownPolicy::Reject, &[KEA]);
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 9, 7), S);
    assert!(relayed(&out).is_empty());
    assert_eq!(counter(&e, "relay: unknown subscriber not relayed"), 1);
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let out = dora(&mut e, 9, Ipv4Addr::new(100, 64, 0, 12), 600, S);
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession {
            captive: true,
            plan_id: 1,
            ..
        })]
    ));
}

#[test]
fn acks_outside_the_pools_or_from_strangers_build_nothing() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let mut r = msg(DhcpMessageType::Request, 1, 9);
    r.requested_ip = Some(Ipv4Addr::new(10, 0, 0, 9));
    let out = client(&mut e, &r, S);
    let (_, req) = relayed(&out).pop().unwrap();
    let ack = answer(&req, DhcpMessageType::Ack, Ipv4Addr::new(10, 0, 0, 9), 60);
    let stranger = SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 1), 67);
    assert!(e.relay_reply(stranger, &ack, S).is_empty());
    assert_eq!(counter(&e, "relay: reply from an unknown server"), 1);
    assert!(e.relay_reply(from(KEA), &ack[..100], S).is_empty());
    assert_eq!(counter(&e, "relay: malformed server reply"), 1);
    assert!(e.relay_reply(from(KEA), &ack, S).is_empty());
    assert_eq!(counter(&e, "relay: ACK address outside the pools"), 1);
    assert_eq!(e.sessions_len(), 0);
}

#[test]
fn a_discover_storm_from_one_mac_reaches_the_server_once_per_interval() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let mut sent = 0;
    for i in 0..200u32 {
        let out = client(
            &mut e,
            &msg(DhcpMessageType::Discover, 1, i),
            S + u64::from(i) * 1000,
        );
        sent += relayed(&out).len();
    }
    assert_eq!(sent, 1);
    assert_eq!(counter(&e, "relay: DISCOVER storm suppressed"), 199);
    let out = client(&mut e, &msg(DhcpMessageType::Discover, 1, 999), 2 * S);
    assert_eq!(
        relayed(&out).len(),
        1,
        "a retransmission after the interval goes"
    );
}

#[test]
fn starvation_with_random_macs_on_one_line_is_bounded() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let mut sent = 0;
    for i in 0..100u32 {
        let mut d = msg(DhcpMessageType::Discover, 0, i);
        d.chaddr = MacAddr([0x0a, 0xee, 0, 0, (i >> 8) as u8, i as u8]);
        sent += relayed(&client(&mut e, &d, S)).len();
    }
    assert_eq!(
        sent, 8,
        "max_sessions_per_line transactions in flight on one line"
    );
    assert_eq!(counter(&e, "line session limit"), 92);
    // Another line is served meanwhile.
    let d = msg(DhcpMessageType::Discover, 1, 5);
    let out = e.handle_dhcp(0, 1, &client_frame(&d, None), S);
    assert_eq!(relayed(&out).len(), 1);
}

#[test]
fn rewrite_policies_for_option82_and_foreign_options_survive() {
    let mut m = msg(DhcpMessageType::Discover, 1, 3);
    m.relay_agent_info = Some(kbng_wire::RelayAgentInfo {
        circuit_id: Some(b"access-node-7".to_vec()),
        ..Default::default()
    });
    m.hostname = Some(b"cpe".to_vec());
    let frame = client_frame(&m, None);
    let mut payload = udp_payload(&frame).unwrap().to_vec();
    // Append an option this crate does not represent (60, vendor class) before END.
    let end = payload.iter().rposition(|b| *b == 255).unwrap();
    payload.splice(end..end, [60u8, 3, b'a', b'b', b'c']);
    let ours = kbng_wire::RelayAgentInfo {
        circuit_id: Some(b"0/0/0/0".to_vec()),
        ..Default::default()
    };
    let run = |p| {
        let (b, ins) = rewrite_request(&payload, GW, 1, p, &ours).unwrap();
        let r = DhcpRepr::parse(&b).unwrap();
        assert_eq!(
            (r.giaddr, r.hops, r.hostname.as_deref()),
            (GW, 1, Some(&b"cpe"[..]))
        );
        assert!(
            b.windows(5).any(|w| w == [60, 3, b'a', b'b', b'c']),
            "option 60 kept"
        );
        (r.relay_agent_info.unwrap().circuit_id.unwrap(), ins)
    };
    assert_eq!(
        run(Option82Policy::Insert),
        (b"access-node-7".to_vec(), false)
    );
    assert_eq!(
        run(Option82Policy::Keep),
        (b"access-node-7".to_vec(), false)
    );
    assert_eq!(run(Option82Policy::Replace), (b"0/0/0/0".to_vec(), true));
    let stripped = strip_option82(&payload).unwrap();
    assert_eq!(DhcpRepr::parse(&stripped).unwrap().relay_agent_info, None);
}

#[test]
fn too_many_hops_and_a_set_giaddr_are_dropped_and_counted() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    let mut m = msg(DhcpMessageType::Discover, 1, 3);
    m.hops = 4;
    assert!(relayed(&client(&mut e, &m, S)).is_empty());
    let mut m = msg(DhcpMessageType::Discover, 2, 3);
    m.giaddr = Ipv4Addr::new(10, 9, 9, 9);
    assert!(relayed(&client(&mut e, &m, S)).is_empty());
    assert_eq!(counter(&e, "relay: too many hops"), 1);
    assert_eq!(counter(&e, "relay: giaddr already set"), 1);
}

#[test]
fn requests_in_flight_count_against_the_line_so_the_server_leases_no_more() {
    let mut e = engine(10, UnknownPolicy::Captive, &[KEA]);
    // 8 sessions allowed per line. 3 bound, then 10 new REQUESTs at once (no DISCOVER first,
    // as a starvation tool may send): only 5 reach the server.
    for m in 1..=3u8 {
        dora(&mut e, m, Ipv4Addr::new(100, 64, 0, 100 + m), 600, S);
    }
    let mut reqs = Vec::new();
    for i in 0..10u8 {
        let mut r = msg(DhcpMessageType::Request, 0, 100 + u32::from(i));
        r.chaddr = MacAddr([0x0a, 0xee, 0, 0, 0, i]);
        r.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 200 + i));
        reqs.extend(relayed(&client(&mut e, &r, 2 * S)));
    }
    assert_eq!(reqs.len(), 5);
    for (_, req) in &reqs {
        let ack = answer(req, DhcpMessageType::Ack, req.requested_ip.unwrap(), 600);
        e.relay_reply(from(KEA), &ack, 2 * S);
    }
    assert_eq!(e.sessions_len(), 8, "every ACKed request became a session");
    assert_eq!(counter(&e, "line session limit"), 5);
}

#[test]
fn a_radius_session_timeout_ends_a_relayed_session_whose_server_lease_outlasts_it() {
    use crate::core::aaa::{AddressChoice, AuthOutcome};
    use crate::core::engine::AcctKind;
    use crate::core::session::EndReason;
    let mut c = engine_config(UnknownPolicy::Captive);
    c.external_auth = true;
    let mut e = Engine::new(c, cap(10), 0).unwrap();
    e.enable_relay(cfg(&[KEA]), 0);
    let yi = Ipv4Addr::new(100, 64, 0, 77);
    let out = dora(&mut e, 1, yi, 3600, 5 * S);
    let id = authorized(&out).expect("the relayed ACK asks the AAA");
    let accept = AuthOutcome::Accept {
        plan: None,
        session_timeout_secs: Some(10),
        address: AddressChoice::Fixed(Ipv4Addr::new(100, 64, 0, 9)),
        reauthorize: false,
    };
    let out = e.auth_result(id, accept, 6 * S);
    let ack = replies(&out).pop().expect("the server's ACK, relayed");
    assert_eq!((ack.yiaddr, ack.lease_secs), (yi, Some(3600)));
    assert_eq!(counter(&e, "relay: RADIUS address not applied"), 1);
    let stop = |out: &[Output]| {
        out.iter().any(|o| {
            matches!(
                o,
                Output::Accounting {
                    kind: AcctKind::Stop,
                    reason: Some(EndReason::SessionTimeout),
                    ..
                }
            )
        })
    };
    assert!(!stop(&e.tick(15 * S)));
    assert!(stop(&e.tick(16 * S)), "ends 10 s after the Accept");
}

#[test]
fn with_line_identity_a_swapped_cpe_ends_the_old_session_even_on_the_same_address() {
    let mut cfg = engine_config(UnknownPolicy::Captive);
    cfg.line_identity = true;
    let mut e = Engine::new(cfg, cap(10), 0).unwrap();
    e.subscribers.import_csv(",0/0/0/0,,silver\n").unwrap();
    e.enable_relay(self::cfg(&[KEA]), 0);
    let yi = Ipv4Addr::new(100, 64, 0, 50);
    let out = dora(&mut e, 1, yi, 600, S);
    let old = only_session(&e);
    assert_eq!(old.circuit_id.as_deref(), Some(&b"0/0/0/0"[..]));
    assert!(matches!(
        programs(&out)[..],
        [ProgramOp::Install(DpSession { plan_id: 11, .. })]
    ));
    // A new CPE on the line; the server reserves the line's address by circuit-id.
    let out = dora(&mut e, 9, yi, 600, 2 * S);
    assert_eq!(programs(&out), [ProgramOp::Remove(old.id)], "{out:?}");
    assert_eq!(
        counter(&e, "session replaced: another MAC with its identity"),
        1
    );
    assert!(replies(&out).is_empty(), "the ACK waits: {out:?}");
    assert_eq!(
        counter(&e, "relay: ACK held until the old session is removed"),
        1
    );
    // Once the dataplane confirms the removal, that ACK builds its own session under its
    // own MAC and reaches the client: no retransmission needed.
    let out = e.removed(old.id, 2 * S);
    let new = only_session(&e);
    assert_ne!(new.id, old.id);
    assert_eq!(new.mac, [2, 0, 0, 0, 0, 9]);
    assert!(matches!(programs(&out)[..], [ProgramOp::Install(DpSession { ip, .. })] if ip == yi));
    assert_eq!(
        replies(&out).pop().map(|a| (a.message_type, a.yiaddr)),
        Some((DhcpMessageType::Ack, yi))
    );
}
