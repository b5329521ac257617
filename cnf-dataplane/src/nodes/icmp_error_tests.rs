//! `icmp-error` unit tests: crafted expired packets in, checked Time Exceeded frames out.

use super::*;
use crate::nodes::testpkt::*;
use crate::packet::{HeapBuf, PortId};
use kbng_wire::checksum::checksum;

const HZ: u64 = 1_000_000;

fn node(pps: u64, burst: u64) -> IcmpErrorNode {
    IcmpErrorNode::new(SrTcmProfile::new(HZ, pps, burst, 0).unwrap(), 0)
}

fn pkt(frame: &[u8], port: PortId, dir: Direction) -> Pkt<HeapBuf> {
    let mut p = Pkt::new(HeapBuf::from_bytes(frame), port);
    p.meta.dir = dir;
    p.meta.l3 = kbng_wire::parse_l2(frame).unwrap().l3_offset() as u16;
    p
}

fn ip_ok(ip: &[u8]) -> bool {
    checksum(&ip[..20]) == 0
}

#[test]
fn upstream_expiry_answers_the_subscriber_from_its_gateway_with_its_tags() {
    let mut n = node(100, 10);
    let orig = with_ttl(
        with_outer_tpid(
            ipv4_udp(
                SUB_MAC,
                ACCESS_MAC,
                &[200, 300],
                SUB_IP,
                CORE_IP,
                33434,
                33435,
                120,
            ),
            0x88a8,
        ),
        1,
    );
    let mut p = pkt(&orig, PortId::Access, Direction::Up);
    assert_eq!(
        n.time_exceeded(&env(), &access(), 0, &mut p),
        IcmpErrorNext::TxAccess
    );
    let f = p.buf.data();
    assert_eq!(&f[..6], &SUB_MAC);
    assert_eq!(&f[6..12], &ACCESS_MAC);
    // The tags as received, S-tag TPID included.
    assert_eq!(&f[12..22], &orig[12..22]);
    let ip = &f[22..];
    assert_eq!(
        ip.len(),
        20 + 8 + 20 + 8,
        "IP header + ICMP + quoted header + 8"
    );
    assert!(ip_ok(ip));
    assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
    assert_eq!((ip[1], ip[8], ip[9]), (0xc0, 64, 1));
    assert_eq!(&ip[12..16], &GW_IP);
    assert_eq!(&ip[16..20], &SUB_IP);
    let icmp = &ip[20..];
    assert_eq!((icmp[0], icmp[1]), (11, 0));
    assert_eq!(checksum(icmp), 0);
    assert_eq!(
        &icmp[8..],
        &orig[22..22 + 28],
        "quote: the header as received + 8"
    );
}

#[test]
fn downstream_expiry_answers_the_core_from_the_uplink_address() {
    let mut n = node(100, 10);
    let e = uplink_env();
    e.next_hop.learn(CORE_MAC, 1);
    let mut e = e;
    e.refresh_next_hop();
    let orig = with_ttl(
        ipv4_udp(CORE_MAC, UPLINK_MAC, &[], CORE_IP, SUB_IP, 5000, 4000, 64),
        1,
    );
    let mut p = pkt(&orig, PortId::Uplink, Direction::Down);
    assert_eq!(
        n.time_exceeded(&e, &access(), 0, &mut p),
        IcmpErrorNext::TxUplink
    );
    let f = p.buf.data();
    assert_eq!(&f[..6], &CORE_MAC);
    assert_eq!(&f[6..12], &UPLINK_MAC);
    assert_eq!(&f[12..14], &[8, 0]);
    let ip = &f[14..];
    assert!(ip_ok(ip));
    assert_eq!(&ip[12..16], &UPLINK_IP);
    assert_eq!(&ip[16..20], &CORE_IP);
    assert_eq!(checksum(&ip[20..]), 0);
    assert_eq!(&ip[28..], &orig[14..14 + 28]);
}

#[test]
fn short_payload_quotes_what_there_is() {
    let mut n = node(100, 10);
    // An ICMP echo of 28 bytes: header and exactly 8 bytes; Ethernet padding after it.
    let mut orig = ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, CORE_IP, 1, 0x0800, 0, 42);
    orig.resize(60, 0);
    let orig = with_ttl(orig, 1);
    let mut p = pkt(&orig, PortId::Access, Direction::Up);
    assert_eq!(
        n.time_exceeded(&env(), &access(), 0, &mut p),
        IcmpErrorNext::TxAccess
    );
    assert_eq!(p.buf.data().len(), 14 + 28 + 28, "padding is not quoted");
}

#[test]
fn no_error_for_errors_fragments_and_odd_addresses() {
    use IcmpErrorCounter as C;
    let mut n = node(100, 10);
    let run = |n: &mut IcmpErrorNode, f: Vec<u8>, e: &NodeEnv, dir| {
        let port = match dir {
            Direction::Up => PortId::Access,
            Direction::Down => PortId::Uplink,
        };
        n.time_exceeded(e, &access(), 0, &mut pkt(&with_ttl(f, 1), port, dir))
    };
    // An ICMP error (a destination unreachable) that expires.
    let unreach = ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, CORE_IP, 1, 0x0300, 0, 70);
    assert_eq!(
        run(&mut n, unreach, &env(), Direction::Up),
        IcmpErrorNext::Drop(C::ForIcmpError)
    );
    let mut frag = ipv4_udp(SUB_MAC, ACCESS_MAC, &[], SUB_IP, CORE_IP, 1, 2, 64);
    frag[14 + 7] = 10; // fragment offset 80 bytes
    assert_eq!(
        run(&mut n, frag, &env(), Direction::Up),
        IcmpErrorNext::Drop(C::ForFragment)
    );
    let mcast = ipv4_udp(SUB_MAC, ACCESS_MAC, &[], SUB_IP, [239, 1, 1, 1], 1, 2, 64);
    assert_eq!(
        run(&mut n, mcast, &env(), Direction::Up),
        IcmpErrorNext::Drop(C::ForAddress)
    );
    let zero_src = ipv4_udp(CORE_MAC, UPLINK_MAC, &[], [0, 0, 0, 0], SUB_IP, 1, 2, 64);
    assert_eq!(
        run(&mut n, zero_src, &env(), Direction::Down),
        IcmpErrorNext::Drop(C::ForAddress)
    );
    // Downstream with no uplink address configured, then with an unresolved next hop.
    let down = ipv4_udp(CORE_MAC, UPLINK_MAC, &[], CORE_IP, SUB_IP, 1, 2, 64);
    assert_eq!(
        run(&mut n, down.clone(), &env(), Direction::Down),
        IcmpErrorNext::Drop(C::NoSourceAddress)
    );
    assert_eq!(
        run(&mut n, down, &uplink_env(), Direction::Down),
        IcmpErrorNext::Drop(C::NextHopUnresolved)
    );
    // Upstream with no gateway configured.
    let up = ipv4_udp(SUB_MAC, ACCESS_MAC, &[], SUB_IP, CORE_IP, 1, 2, 64);
    let mut p = pkt(&with_ttl(up, 1), PortId::Access, Direction::Up);
    assert_eq!(
        n.time_exceeded(&env(), &AccessTable::default(), 0, &mut p),
        IcmpErrorNext::Drop(C::NoSourceAddress)
    );
}

#[test]
fn errors_are_rate_limited_per_worker() {
    // 10 per second, a burst of 5: of 20 at once, 5 go; two seconds later the bucket is full
    // again, and holds no more than its burst.
    let mut n = node(10, 5);
    let up = with_ttl(
        ipv4_udp(SUB_MAC, ACCESS_MAC, &[], SUB_IP, CORE_IP, 1, 2, 64),
        1,
    );
    let mut rx: Frame<HeapBuf> = Frame::new();
    let (mut tx_a, mut tx_u): (TxFrame<HeapBuf>, TxFrame<HeapBuf>) =
        (TxFrame::new(), TxFrame::new());
    for _ in 0..20 {
        rx.push(pkt(&up, PortId::Access, Direction::Up));
    }
    n.run(&env(), &access(), 1, &mut rx, &mut tx_a, &mut tx_u);
    assert_eq!(tx_a.len(), 5);
    assert_eq!(n.counters.get(IcmpErrorCounter::RateLimited), 15);
    tx_a.clear();
    for _ in 0..20 {
        rx.push(pkt(&up, PortId::Access, Direction::Up));
    }
    n.run(&env(), &access(), 1 + 2 * HZ, &mut rx, &mut tx_a, &mut tx_u);
    assert_eq!(tx_a.len(), 5, "the bucket holds at most its burst");
    assert_eq!(n.counters.get(IcmpErrorCounter::TimeExceeded), 10);
    assert!(tx_u.is_empty());
}
