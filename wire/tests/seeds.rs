//! The fuzz seed frames (written by `fuzz/seeds/make_seeds.py` from the RFC
//! layouts, checksums computed in Python) parsed through the public API:
//! an independent check of the parsers and checksum code.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::net::Ipv4Addr;

use kbng_wire::ethernet::ethertype;
use kbng_wire::{
    ArpOp, ArpRepr, DhcpMessageType, DhcpRepr, Ipv4Packet, RadiusPacket, TcpFlags, TcpPacket,
    UdpPacket, parse_l2,
};

const QINQ: &[u8] = include_bytes!("../fuzz/seeds/frame/qinq_discover.bin");
const AFPACKET_QINQ: &[u8] = include_bytes!("../fuzz/seeds/frame/afpacket_qinq_discover.bin");
const RELAYED: &[u8] = include_bytes!("../fuzz/seeds/frame/relayed.bin");
const ARP: &[u8] = include_bytes!("../fuzz/seeds/frame/arp.bin");
const TCP_SYN: &[u8] = include_bytes!("../fuzz/seeds/udp_tcp/tcp_syn.bin");
const RADIUS: &[u8] = include_bytes!("../fuzz/seeds/radius/rfc2865_request.bin");

fn dhcp_of(frame: &[u8]) -> (kbng_wire::L2, DhcpRepr) {
    let l2 = parse_l2(frame).unwrap();
    assert_eq!(l2.ethertype, ethertype::IPV4);
    let ip = Ipv4Packet::new_checked(&frame[l2.l3_offset()..]).unwrap();
    assert!(ip.verify_checksum());
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    assert!(udp.verify_checksum(ip.src(), ip.dst()));
    (l2, DhcpRepr::parse(udp.payload()).unwrap())
}

#[test]
fn qinq_discover_both_outer_tpids() {
    for (frame, tpid) in [(QINQ, 0x88a8), (AFPACKET_QINQ, 0x8100)] {
        let (l2, d) = dhcp_of(frame);
        assert_eq!(l2.outer.unwrap().tpid, tpid);
        assert_eq!((l2.outer_vid(), l2.inner_vid()), (Some(100), Some(200)));
        assert_eq!(d.message_type, DhcpMessageType::Discover);
        assert!(d.broadcast);
        assert_eq!(d.hostname.as_deref(), Some(&b"cpe1"[..]));
    }
}

#[test]
fn relayed_discover_has_option_82() {
    let (l2, d) = dhcp_of(RELAYED);
    assert_eq!(l2.tag_count(), 0);
    assert_eq!(d.giaddr, Ipv4Addr::new(10, 0, 0, 1));
    let info = d.relay_agent_info.unwrap();
    assert_eq!(info.circuit_id.as_deref(), Some(&b"port-7"[..]));
    assert_eq!(
        info.remote_id.as_deref(),
        Some(&[0xde, 0xad, 0xbe, 0xef][..])
    );
    let udp = Ipv4Packet::new_checked(&RELAYED[14..]).unwrap();
    let udp = UdpPacket::new_checked(udp.payload()).unwrap();
    assert_eq!(
        (udp.src_port(), udp.dst_port()),
        (67, 67),
        "a relay speaks to the server from the server port"
    );
}

#[test]
fn tagged_arp_request() {
    let l2 = parse_l2(ARP).unwrap();
    assert_eq!((l2.outer_vid(), l2.ethertype), (Some(100), ethertype::ARP));
    let a = ArpRepr::parse(&ARP[l2.l3_offset()..]).unwrap();
    assert_eq!(
        (a.op, a.target_ip),
        (ArpOp::Request, Ipv4Addr::new(10, 0, 0, 1))
    );
}

#[test]
fn tcp_syn_and_radius() {
    let t = TcpPacket::new_checked(TCP_SYN).unwrap();
    assert_eq!((t.dst_port(), t.flags()), (80, TcpFlags::SYN));
    let r = RadiusPacket::new_checked(RADIUS).unwrap();
    assert_eq!(r.attr(1), Some(&b"nemo"[..]));
}
