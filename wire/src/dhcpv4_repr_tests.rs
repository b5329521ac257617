use super::*;
use crate::ethernet::{L2, VlanTag, parse_l2};
use crate::ipv4::Ipv4Packet;
use crate::udp::UdpPacket;
use proptest::prelude::*;

const MAC: MacAddr = MacAddr([0x00, 0x05, 0x3c, 0x04, 0x8d, 0x59]);

/// A relayed DHCPREQUEST as an access node sends it, laid out by hand from
/// RFC 2131 figure 1 and RFC 3046 §2.0.
fn relayed_request() -> Vec<u8> {
    let mut b = vec![0u8; 236];
    b[..4].copy_from_slice(&[1, 1, 6, 1]);
    b[4..8].copy_from_slice(&[0x39, 0x03, 0xf3, 0x26]);
    b[24..28].copy_from_slice(&[10, 0, 0, 1]); // giaddr
    b[28..34].copy_from_slice(&MAC.0);
    b.extend_from_slice(&MAGIC_COOKIE);
    b.extend_from_slice(&[53, 1, 3]);
    b.extend_from_slice(&[61, 7, 1, 0x00, 0x05, 0x3c, 0x04, 0x8d, 0x59]);
    b.extend_from_slice(&[50, 4, 100, 64, 0, 10]);
    b.extend_from_slice(&[54, 4, 10, 0, 0, 1]);
    b.extend_from_slice(&[12, 4, b'c', b'p', b'e', b'1']);
    b.extend_from_slice(&[55, 4, 1, 3, 6, 15]);
    b.extend_from_slice(&[43, 2, 0xaa, 0xbb]); // not represented: skipped
    b.extend_from_slice(&[
        82, 12, 1, 4, b'p', b'o', b'r', b't', 2, 4, 0xde, 0xad, 0xbe, 0xef,
    ]);
    b.push(255);
    b.resize(300, 0);
    b
}

#[test]
fn parse_relayed_request() {
    let r = DhcpRepr::parse(&relayed_request()).unwrap();
    assert_eq!(r.op, DhcpOp::BootRequest);
    assert_eq!(r.message_type, DhcpMessageType::Request);
    assert_eq!((r.xid, r.hops, r.chaddr), (0x3903_f326, 1, MAC));
    assert_eq!(r.giaddr, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(r.requested_ip, Some(Ipv4Addr::new(100, 64, 0, 10)));
    assert_eq!(r.server_id, Some(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(r.hostname.as_deref(), Some(&b"cpe1"[..]));
    assert_eq!(r.parameter_request_list, [1, 3, 6, 15]);
    let info = r.relay_agent_info.as_ref().unwrap();
    assert_eq!(info.circuit_id.as_deref(), Some(&b"port"[..]));
    assert_eq!(
        info.remote_id.as_deref(),
        Some(&[0xde, 0xad, 0xbe, 0xef][..])
    );
}

#[test]
fn ack_emits_padded_and_echoes_option_82() {
    let req = DhcpRepr::parse(&relayed_request()).unwrap();
    let mut ack = req.reply(DhcpMessageType::Ack, Ipv4Addr::new(10, 0, 0, 1));
    ack.yiaddr = Ipv4Addr::new(100, 64, 0, 10);
    ack.lease_secs = Some(3600);
    ack.renewal_secs = Some(1800);
    ack.rebinding_secs = Some(3150);
    ack.subnet_mask = Some(Ipv4Addr::new(255, 255, 255, 0));
    ack.routers = vec![Ipv4Addr::new(100, 64, 0, 1)];
    ack.dns_servers = vec![Ipv4Addr::new(9, 9, 9, 9), Ipv4Addr::new(1, 1, 1, 1)];
    let mut buf = [0xffu8; 600];
    let n = ack.emit(&mut buf).unwrap();
    // 240 + options (63) + end: past the 300-byte minimum, so no padding.
    assert_eq!(n, 304);
    assert_eq!(n, ack.buffer_len().unwrap());
    let p = DhcpPacket::new_checked(&buf[..n]).unwrap();
    let codes: Vec<u8> = p.options().map(|o| o.unwrap().code).collect();
    assert_eq!(codes, [53, 54, 51, 58, 59, 1, 3, 6, 82]);
    assert_eq!(DhcpRepr::parse(&buf[..n]).unwrap(), ack);
    assert_eq!(buf[n - 1], 255);
    assert!(matches!(
        ack.emit(&mut buf[..303]),
        Err(WireError::BufferTooSmall { .. })
    ));
}

#[test]
fn short_message_is_padded_to_bootp_minimum() {
    let nak = DhcpRepr::new(DhcpOp::BootReply, DhcpMessageType::Nak, 7, MAC);
    let mut buf = [0xffu8; 400];
    assert_eq!(nak.emit(&mut buf), Ok(300));
    assert_eq!(buf[240..244], [53, 1, 6, 255]);
    assert!(buf[244..300].iter().all(|b| *b == 0));
    assert_eq!(DhcpRepr::parse(&buf[..300]).unwrap(), nak);
}

#[test]
fn parse_errors() {
    let mut b = relayed_request();
    b[242] = 9; // unknown message type
    assert_eq!(DhcpRepr::parse(&b), Err(WireError::BadOption { code: 53 }));
    let mut b = relayed_request();
    b[240] = 0; // pad instead of 53, leaves "1, 3" = option 1 length 3
    assert_eq!(DhcpRepr::parse(&b), Err(WireError::BadOption { code: 1 }));
    let mut b = relayed_request();
    b[240..243].copy_from_slice(&[0, 0, 0]);
    assert_eq!(
        DhcpRepr::parse(&b),
        Err(WireError::MissingOption { code: 53 })
    );
    let mut b = relayed_request();
    b[1] = 6; // IEEE 802 htype
    assert!(matches!(
        DhcpRepr::parse(&b),
        Err(WireError::Unsupported(_))
    ));
}

#[test]
fn too_many_dns_servers_is_an_error_not_a_panic() {
    let mut r = DhcpRepr::new(DhcpOp::BootReply, DhcpMessageType::Offer, 1, MAC);
    r.dns_servers = vec![Ipv4Addr::LOCALHOST; 64];
    assert!(matches!(
        r.emit(&mut [0u8; 1500]),
        Err(WireError::TooLong { .. })
    ));
}

#[test]
fn whole_offer_frame_with_qinq_and_checksums() {
    let req = DhcpRepr::parse(&relayed_request()).unwrap();
    let mut offer = req.reply(DhcpMessageType::Offer, Ipv4Addr::new(10, 0, 0, 1));
    offer.yiaddr = Ipv4Addr::new(100, 64, 0, 10);
    offer.broadcast = true;
    let frame = UdpFrame {
        l2: L2 {
            dst: MacAddr::BROADCAST,
            src: MacAddr([0x02, 0, 0, 0, 0, 1]),
            outer: Some(VlanTag::dot1ad(100)),
            inner: Some(VlanTag::dot1q(200)),
            ethertype: 0,
        },
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::BROADCAST,
        src_port: crate::dhcpv4::SERVER_PORT,
        dst_port: crate::dhcpv4::CLIENT_PORT,
        ttl: 64,
        dscp: 0,
    };
    let mut buf = [0u8; 1514];
    let n = emit_dhcp_frame(&mut buf, &frame, &offer).unwrap();
    assert_eq!(n, 22 + 20 + 8 + 300);
    let l2 = parse_l2(&buf[..n]).unwrap();
    assert_eq!((l2.outer_vid(), l2.inner_vid()), (Some(100), Some(200)));
    let ip = Ipv4Packet::new_checked(&buf[l2.l3_offset()..n]).unwrap();
    assert!(ip.verify_checksum());
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(ip.src(), ip.dst()));
    assert_ne!(udp.checksum(), 0);
    assert_eq!(DhcpRepr::parse(udp.payload()).unwrap(), offer);
}

fn ips(max: usize) -> impl Strategy<Value = Vec<Ipv4Addr>> {
    proptest::collection::vec(any::<[u8; 4]>().prop_map(Ipv4Addr::from), 0..max)
}

fn bytes(min: usize, max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), min..max)
}

fn ip() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}

prop_compose! {
    fn relay_info()(c in proptest::option::of(bytes(0, 30)), r in proptest::option::of(bytes(0, 30)))
        -> RelayAgentInfo {
        RelayAgentInfo { circuit_id: c, remote_id: r, other: Vec::new() }
    }
}

prop_compose! {
    fn header()(op in any::<bool>(), mt in 1u8..=8, xid in any::<u32>(), secs in any::<u16>(),
        broadcast in any::<bool>(), hops in any::<u8>(), addrs in any::<[[u8; 4]; 4]>(),
        mac in any::<[u8; 6]>()) -> DhcpRepr {
        let op = if op { DhcpOp::BootRequest } else { DhcpOp::BootReply };
        let mt = DhcpMessageType::from_u8(mt).expect("1..=8 are assigned");
        let mut r = DhcpRepr::new(op, mt, xid, MacAddr(mac));
        (r.secs, r.broadcast, r.hops) = (secs, broadcast, hops);
        r.ciaddr = addrs[0].into();
        r.yiaddr = addrs[1].into();
        r.siaddr = addrs[2].into();
        r.giaddr = addrs[3].into();
        r
    }
}

prop_compose! {
    fn repr()(base in header(),
        requested_ip in proptest::option::of(ip()), server_id in proptest::option::of(ip()),
        subnet_mask in proptest::option::of(ip()),
        times in any::<(Option<u32>, Option<u32>, Option<u32>)>(),
        routers in ips(4), dns_servers in ips(8),
        client_id in proptest::option::of(bytes(1, 40)), hostname in proptest::option::of(bytes(1, 64)),
        prl in bytes(0, 20), rai in proptest::option::of(relay_info())) -> DhcpRepr {
        DhcpRepr {
            requested_ip, server_id, subnet_mask,
            lease_secs: times.0, renewal_secs: times.1, rebinding_secs: times.2,
            routers, dns_servers, client_id, hostname,
            parameter_request_list: prl, relay_agent_info: rai,
            ..base
        }
    }
}

proptest! {
    #[test]
    fn roundtrip(r in repr()) {
        let mut buf = vec![0u8; r.buffer_len().unwrap()];
        let n = r.emit(&mut buf).unwrap();
        prop_assert!(n >= MIN_MESSAGE_LEN);
        prop_assert_eq!(DhcpRepr::parse(&buf[..n]).unwrap(), r);
    }

    #[test]
    fn arbitrary_options_never_panic(opts in bytes(0, 400)) {
        let mut b = relayed_request();
        b.truncate(240);
        b.extend_from_slice(&opts);
        let _ = DhcpRepr::parse(&b);
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in bytes(0, 600)) {
        let _ = DhcpRepr::parse(&b);
    }
}
