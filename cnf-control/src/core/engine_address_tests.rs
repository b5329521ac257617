//! Script tests of the address an Access-Accept asks for: Framed-IP-Address (in an exclusion
//! or in the leasable range) and Framed-Pool, with what happens when it cannot be given; and
//! the same asked by a local subscriber record's `ipv4` and `pool`.

use super::*;
use crate::core::aaa::AddressChoice;
use crate::core::dhcp::tests::client_frame;
use crate::core::pool::PoolConfig;
use crate::core::test_support::{
    S, authorized, cap, counter, engine_config, mac, msg, pool, replies,
};

const FIXED: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 201);

/// RADIUS engine; pool p (100.64.0.0/24) keeps 100.64.0.200/29 for fixed addresses, pool q is
/// 100.64.1.0/24.
fn engine(unknown: UnknownPolicy) -> Engine {
    let mut cfg = engine_config(unknown);
    cfg.external_auth = true;
    cfg.pools[0].exclusions = vec![(Ipv4Addr::new(100, 64, 0, 200), 29)];
    cfg.pools.push(PoolConfig {
        name: "q".into(),
        network: Ipv4Addr::new(100, 64, 1, 0),
        gateway: Ipv4Addr::new(100, 64, 1, 1),
        ..pool()
    });
    Engine::new(cfg, cap(100), 0).expect("valid pools")
}

fn accept(address: AddressChoice) -> AuthOutcome {
    AuthOutcome::Accept {
        plan: None,
        session_timeout_secs: None,
        address,
        reauthorize: false,
    }
}

/// A DISCOVER from MAC `m`; returns the id the engine asks the AAA about.
fn discover(e: &mut Engine, m: u8) -> SessionId {
    let out = e.handle_dhcp(
        0,
        0,
        &client_frame(&msg(DhcpMessageType::Discover, m, 1), None),
        S,
    );
    authorized(&out).expect("asks the AAA")
}

/// Answer `id` with `a`, then REQUEST what was offered: the offered address and the ACK's
/// grant, or `None` when nothing was offered.
fn answer_and_bind(e: &mut Engine, id: SessionId, a: AuthOutcome, m: u8) -> Option<Ipv4Addr> {
    let offer = replies(&e.auth_result(id, a, 2 * S)).pop()?;
    Some(request_offered(e, offer, m))
}

/// REQUEST what `offer` offered to MAC `m`, which must be ACKed; the address.
fn request_offered(e: &mut Engine, offer: kbng_wire::DhcpRepr, m: u8) -> Ipv4Addr {
    assert_eq!(offer.message_type, DhcpMessageType::Offer);
    let mut req = msg(DhcpMessageType::Request, m, 2);
    req.requested_ip = Some(offer.yiaddr);
    req.server_id = offer.server_id;
    let ack = replies(&e.handle_dhcp(0, 0, &client_frame(&req, None), 2 * S)).pop();
    assert_eq!(ack.map(|a| a.message_type), Some(DhcpMessageType::Ack));
    offer.yiaddr
}

fn usage(e: &Engine) -> Vec<(String, u32)> {
    e.pool_usage().map(|p| (p.name, p.in_use)).collect()
}

/// Each pool's fixed addresses: excluded ones held by sessions.
fn fixed(e: &Engine) -> Vec<u32> {
    e.pool_usage().map(|p| p.fixed).collect()
}

fn grant(e: &Engine, id: SessionId) -> Option<Grant> {
    e.session(id).and_then(|s| s.state.bound()).map(|(_, g)| g)
}

#[test]
fn a_fixed_address_in_an_exclusion_is_given_and_freed_for_its_next_owner() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1);
    let ip = answer_and_bind(&mut e, id, accept(AddressChoice::Fixed(FIXED)), 1);
    assert_eq!(ip, Some(FIXED));
    assert_eq!(grant(&e, id), Some(Grant::Active { plan_id: 10 }));
    assert_eq!(e.desired(0)[0].ip, FIXED);
    // The address reserved at DISCOVER went back; a fixed address is not leasable usage.
    assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 0)]);
    assert_eq!(fixed(&e), [1, 0]);

    // Held: a second subscriber asking for it is not given it.
    let other = discover(&mut e, 2);
    let ip2 = answer_and_bind(&mut e, other, accept(AddressChoice::Fixed(FIXED)), 2);
    assert_ne!(ip2, Some(FIXED));
    assert_eq!(grant(&e, other).map(|g| g.captive()), Some(true));
    assert_eq!(counter(&e, "Framed-IP-Address unavailable"), 1);

    // Released: the next owner gets it.
    let mut rel = msg(DhcpMessageType::Release, 1, 3);
    rel.ciaddr = FIXED;
    e.handle_dhcp(0, 0, &client_frame(&rel, None), 3 * S);
    e.removed(id, 3 * S);
    assert_eq!(fixed(&e), [0, 0]);
    let third = discover(&mut e, 3);
    let ip3 = answer_and_bind(&mut e, third, accept(AddressChoice::Fixed(FIXED)), 3);
    assert_eq!(ip3, Some(FIXED));
    assert_eq!(fixed(&e), [1, 0]);
}

#[test]
fn a_fixed_address_in_the_leasable_range_is_taken_from_it() {
    let mut e = engine(UnknownPolicy::Captive);
    let want = Ipv4Addr::new(100, 64, 0, 77);
    let id = discover(&mut e, 1);
    assert_eq!(
        answer_and_bind(&mut e, id, accept(AddressChoice::Fixed(want)), 1),
        Some(want)
    );
    assert_eq!(usage(&e), [("p".into(), 1), ("q".into(), 0)]);
}

#[test]
fn an_address_that_cannot_be_given_is_handled_as_a_reject() {
    for (ask, why) in [
        (
            AddressChoice::Fixed(GW_OF_Q),
            "Framed-IP-Address unavailable",
        ),
        (
            AddressChoice::Fixed(Ipv4Addr::new(10, 0, 0, 9)),
            "Framed-IP-Address unavailable",
        ),
        (AddressChoice::Pool("nope".into()), "Framed-Pool unknown"),
    ] {
        let mut e = engine(UnknownPolicy::Captive);
        let id = discover(&mut e, 1);
        let ip = answer_and_bind(&mut e, id, accept(ask.clone()), 1);
        assert_eq!(
            ip.map(|ip| ip.octets()[2]),
            Some(0),
            "{ask:?}: the reserved address"
        );
        assert_eq!(grant(&e, id).map(|g| g.captive()), Some(true), "{ask:?}");
        assert_eq!(counter(&e, why), 1, "{ask:?}");

        let mut e = engine(UnknownPolicy::Reject);
        let id = discover(&mut e, 1);
        assert_eq!(
            answer_and_bind(&mut e, id, accept(ask.clone()), 1),
            None,
            "{ask:?}"
        );
        assert!(e.session(id).is_none_or(|s| s.state.is_terminal()));
        assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 0)], "{ask:?}");
    }
}

const GW_OF_Q: Ipv4Addr = Ipv4Addr::new(100, 64, 1, 1);

#[test]
fn a_framed_pool_gives_an_address_of_that_pool() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1);
    let ip = answer_and_bind(&mut e, id, accept(AddressChoice::Pool("q".into())), 1);
    assert_eq!(
        ip.map(|ip| ip.octets()[..3].to_vec()),
        Some(vec![100, 64, 1])
    );
    assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 1)]);
    // The pool it already came from: the reserved address stays, and p's usage is that one.
    let id2 = discover(&mut e, 2);
    let ip2 = answer_and_bind(&mut e, id2, accept(AddressChoice::Pool("p".into())), 2);
    assert_eq!(
        ip2.map(|ip| ip.octets()[..3].to_vec()),
        Some(vec![100, 64, 0])
    );
    assert_eq!(usage(&e), [("p".into(), 1), ("q".into(), 1)]);
}

#[test]
fn an_init_reboot_for_another_address_is_nakked_and_for_the_same_acked() {
    let mut e = engine(UnknownPolicy::Captive);
    let init_reboot = |e: &mut Engine, m: u8, ip: Ipv4Addr| {
        let mut r = msg(DhcpMessageType::Request, m, 7);
        r.requested_ip = Some(ip);
        let out = e.handle_dhcp(0, 0, &client_frame(&r, None), S);
        authorized(&out).expect("asks the AAA")
    };
    let id = init_reboot(&mut e, 1, Ipv4Addr::new(100, 64, 0, 50));
    let out = e.auth_result(id, accept(AddressChoice::Fixed(FIXED)), 2 * S);
    assert_eq!(
        replies(&out).pop().map(|r| r.message_type),
        Some(DhcpMessageType::Nak)
    );
    assert_eq!(counter(&e, "NAK: not the address RADIUS assigns"), 1);
    assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 0)]);

    let id = init_reboot(&mut e, 2, Ipv4Addr::new(100, 64, 1, 9));
    let out = e.auth_result(id, accept(AddressChoice::Pool("q".into())), 2 * S);
    let ack = replies(&out).pop().expect("an ACK");
    assert_eq!(
        (ack.message_type, ack.yiaddr),
        (DhcpMessageType::Ack, Ipv4Addr::new(100, 64, 1, 9))
    );
}

#[test]
fn a_session_on_a_fixed_address_is_restored() {
    let mut e = engine(UnknownPolicy::Captive);
    let id = discover(&mut e, 1);
    answer_and_bind(&mut e, id, accept(AddressChoice::Fixed(FIXED)), 1);
    let stored: Vec<Session> = e.list(0, 100, |_| true).cloned().collect();
    let mut e2 = engine(UnknownPolicy::Captive);
    assert_eq!(e2.restore(stored, e.next_id()), Vec::<String>::new());
    assert_eq!(e2.desired(0)[0].ip, FIXED);
    // Held after the restore too.
    let other = discover(&mut e2, 2);
    let ip = answer_and_bind(&mut e2, other, accept(AddressChoice::Fixed(FIXED)), 2);
    assert_ne!(ip, Some(FIXED));
}

/// Local AAA over the same pools: 02:..:01 and 02:..:02 both have FIXED, 02:..:03 pool q,
/// 02:..:04 an unknown pool, 02:..:05 an address in no pool.
fn local(unknown: UnknownPolicy) -> Engine {
    let mut e = engine(unknown);
    e.cfg.external_auth = false;
    let csv = "02:00:00:00:00:01,,,silver,100.64.0.201,\n\
               02:00:00:00:00:02,,,,100.64.0.201,\n\
               02:00:00:00:00:03,,,,,q\n\
               02:00:00:00:00:04,,,,,nope\n\
               02:00:00:00:00:05,,,,10.0.0.9,\n";
    assert_eq!(e.subscribers.import_csv(csv), Ok(5));
    e
}

/// DISCOVER, then REQUEST what was offered: the offered address, or `None` when nothing was
/// offered. Returns the session too.
fn onboard(e: &mut Engine, m: u8) -> (Option<Ipv4Addr>, Option<SessionId>) {
    let d = msg(DhcpMessageType::Discover, m, 1);
    let Some(offer) = replies(&e.handle_dhcp(0, 0, &client_frame(&d, None), S)).pop() else {
        return (None, None);
    };
    let ip = request_offered(e, offer, m);
    let id = e
        .list(0, 100, |_| true)
        .find(|s| s.mac == mac(m).0)
        .map(|s| s.id);
    (Some(ip), id)
}

#[test]
fn a_local_record_gives_its_fixed_address_or_an_address_of_its_pool() {
    let mut e = local(UnknownPolicy::Captive);
    let (ip, id) = onboard(&mut e, 1);
    assert_eq!(ip, Some(FIXED));
    assert_eq!(grant(&e, id.unwrap()), Some(Grant::Active { plan_id: 11 }));
    assert_eq!(fixed(&e), [1, 0]);
    let (ip, _) = onboard(&mut e, 3);
    assert_eq!(ip.map(|ip| ip.octets()[2]), Some(1), "pool q");
    assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 1)]);

    // 02:..:02's record asks for the address 02:..:01 holds: handled as a Reject.
    let (ip, id) = onboard(&mut e, 2);
    assert_ne!(ip, Some(FIXED));
    assert_eq!(grant(&e, id.unwrap()).map(|g| g.captive()), Some(true));
    assert_eq!(counter(&e, "subscriber ipv4 unavailable"), 1);
    assert_eq!(counter(&e, "Framed-IP-Address unavailable"), 0);
}

#[test]
fn a_local_record_whose_address_cannot_be_given_is_handled_as_a_reject() {
    for (m, why) in [
        (4, "subscriber pool unknown"),
        (5, "subscriber ipv4 unavailable"),
    ] {
        let mut e = local(UnknownPolicy::Captive);
        let (ip, id) = onboard(&mut e, m);
        assert_eq!(
            ip.map(|ip| ip.octets()[2]),
            Some(0),
            "{why}: a pool address"
        );
        assert_eq!(grant(&e, id.unwrap()).map(|g| g.captive()), Some(true));
        assert_eq!(counter(&e, why), 1);

        let mut e = local(UnknownPolicy::Reject);
        assert_eq!(onboard(&mut e, m), (None, None), "{why}: nothing offered");
        assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 0)], "{why}");
    }
}

#[test]
fn an_init_reboot_for_another_address_than_the_records_is_nakked() {
    let mut e = local(UnknownPolicy::Captive);
    let mut r = msg(DhcpMessageType::Request, 1, 7);
    r.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 50));
    let out = e.handle_dhcp(0, 0, &client_frame(&r, None), S);
    assert_eq!(
        replies(&out).pop().map(|r| r.message_type),
        Some(DhcpMessageType::Nak)
    );
    assert_eq!(counter(&e, "NAK: not the subscriber's ipv4"), 1);
    assert_eq!(usage(&e), [("p".into(), 0), ("q".into(), 0)]);
}
