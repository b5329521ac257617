//! DHCPv4 server messages (RFC 2131, options of RFC 2132, option 82 of RFC 3046): parsing of the
//! punted frame, classification of a REQUEST, and the whole reply frame with its addressing.
//! Pure: bytes in, bytes out.

use std::net::Ipv4Addr;

use kbng_wire::dhcpv4::{CLIENT_PORT, SERVER_PORT};
use kbng_wire::ethernet::ethertype;
use kbng_wire::ipv4::protocol;
use kbng_wire::{
    DhcpMessageType, DhcpOp, DhcpRepr, Ipv4Packet, L2, MacAddr, UdpFrame, UdpPacket, WireError,
    emit_dhcp_frame, parse_l2,
};

/// Why a punted frame was not a usable DHCP request; each is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DhcpDrop {
    BadL2,
    NotIpv4Udp,
    BadIpv4,
    BadUdp,
    NotToServerPort,
    Truncated,
    BadMagicCookie,
    BadOption,
    NotRequest,
    Unsupported,
}

impl DhcpDrop {
    pub fn as_str(self) -> &'static str {
        match self {
            DhcpDrop::BadL2 => "bad ethernet header",
            DhcpDrop::NotIpv4Udp => "not IPv4 UDP",
            DhcpDrop::BadIpv4 => "bad IPv4 header",
            DhcpDrop::BadUdp => "bad UDP header",
            DhcpDrop::NotToServerPort => "not to port 67",
            DhcpDrop::Truncated => "truncated DHCP",
            DhcpDrop::BadMagicCookie => "bad magic cookie",
            DhcpDrop::BadOption => "bad DHCP option",
            DhcpDrop::NotRequest => "not a BOOTREQUEST",
            DhcpDrop::Unsupported => "unsupported DHCP message",
        }
    }
}

impl From<WireError> for DhcpDrop {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated { .. } | WireError::BadLength { .. } => DhcpDrop::Truncated,
            WireError::BadMagicCookie => DhcpDrop::BadMagicCookie,
            WireError::BadOption { .. } | WireError::MissingOption { .. } => DhcpDrop::BadOption,
            _ => DhcpDrop::Unsupported,
        }
    }
}

/// A parsed client message with the L2 it arrived with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    pub l2: L2,
    pub src_ip: Ipv4Addr,
    pub msg: DhcpRepr,
}

/// Parse a punted frame down to the DHCP message.
pub fn parse_frame(frame: &[u8]) -> Result<Inbound, DhcpDrop> {
    let l2 = parse_l2(frame).map_err(|_| DhcpDrop::BadL2)?;
    if l2.ethertype != ethertype::IPV4 {
        return Err(DhcpDrop::NotIpv4Udp);
    }
    let ip = Ipv4Packet::new_checked(&frame[l2.l3_offset()..]).map_err(|_| DhcpDrop::BadIpv4)?;
    if ip.protocol() != protocol::UDP || ip.is_fragment() {
        return Err(DhcpDrop::NotIpv4Udp);
    }
    let udp = UdpPacket::new_checked(ip.payload()).map_err(|_| DhcpDrop::BadUdp)?;
    if udp.dst_port() != SERVER_PORT {
        return Err(DhcpDrop::NotToServerPort);
    }
    let msg = DhcpRepr::parse(udp.payload())?;
    if msg.op != DhcpOp::BootRequest {
        return Err(DhcpDrop::NotRequest);
    }
    Ok(Inbound {
        l2,
        src_ip: ip.src(),
        msg,
    })
}

/// The client state a REQUEST reveals (RFC 2131 §4.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Server id present: answering an OFFER; `ours` says whether it chose us.
    Selecting { ip: Ipv4Addr, ours: bool },
    /// No server id, requested-ip, ciaddr zero: rebooted with a remembered lease.
    InitReboot { ip: Ipv4Addr },
    /// ciaddr set: extending its lease (unicast at T1 or broadcast at T2).
    Renewing { ip: Ipv4Addr },
    /// None of the above.
    Invalid,
}

pub fn classify_request(msg: &DhcpRepr, our_ids: &[Ipv4Addr]) -> RequestKind {
    match (msg.server_id, msg.requested_ip, msg.ciaddr.is_unspecified()) {
        (Some(sid), Some(ip), _) => RequestKind::Selecting {
            ip,
            ours: our_ids.contains(&sid),
        },
        (None, Some(ip), true) => RequestKind::InitReboot { ip },
        (_, _, false) => RequestKind::Renewing { ip: msg.ciaddr },
        _ => RequestKind::Invalid,
    }
}

/// The options a reply carries for an address of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseParams {
    pub server_id: Ipv4Addr,
    pub subnet_mask: Ipv4Addr,
    pub router: Ipv4Addr,
    pub dns: Vec<Ipv4Addr>,
    pub lease_secs: u32,
}

/// T1 and T2 of a lease of `lease_secs` (RFC 2131 §4.4.5: half and seven eighths of it).
/// None below 2 s, where T1 would be 0, which some clients take as "renew at once": a lease
/// cut to a session's last second would bring a burst of renewals.
fn renewal_times(lease_secs: u32) -> (Option<u32>, Option<u32>) {
    if lease_secs < 2 {
        return (None, None);
    }
    // Seven eighths taken whole first: an eighth taken first made T2 0 below 8 s, before T1.
    let t2 = u64::from(lease_secs) * 7 / 8;
    (Some(lease_secs / 2), u32::try_from(t2).ok())
}

/// Build a whole OFFER/ACK/NAK frame for `req`, addressed per RFC 2131 §4.1: to the relay
/// (giaddr) if any; NAKs broadcast; to ciaddr when the client has one; broadcast when the client
/// asked so; else unicast to yiaddr and chaddr. `server_mac` is the access port's MAC.
pub fn build_reply(
    req: &Inbound,
    kind: DhcpMessageType,
    yiaddr: Ipv4Addr,
    params: &LeaseParams,
    server_mac: MacAddr,
) -> Result<Vec<u8>, WireError> {
    let mut r = req.msg.reply(kind, params.server_id);
    if kind != DhcpMessageType::Nak {
        if kind != DhcpMessageType::Ack || !req.msg.ciaddr.is_unspecified() {
            // INFORM replies carry no address (RFC 2131 §4.3.5); a renewal ACK keeps ciaddr.
            r.ciaddr = req.msg.ciaddr;
        }
        r.yiaddr = yiaddr;
        r.subnet_mask = Some(params.subnet_mask);
        r.routers = vec![params.router];
        r.dns_servers = params.dns.clone();
        if !yiaddr.is_unspecified() {
            r.lease_secs = Some(params.lease_secs);
            (r.renewal_secs, r.rebinding_secs) = renewal_times(params.lease_secs);
        }
    }
    let giaddr = req.msg.giaddr;
    let (dst_mac, dst_ip, dst_port) = if !giaddr.is_unspecified() {
        (req.l2.src, giaddr, SERVER_PORT)
    } else if kind == DhcpMessageType::Nak || req.msg.broadcast {
        (MacAddr::BROADCAST, Ipv4Addr::BROADCAST, CLIENT_PORT)
    } else if !req.msg.ciaddr.is_unspecified() {
        (req.msg.chaddr, req.msg.ciaddr, CLIENT_PORT)
    } else if !yiaddr.is_unspecified() {
        (req.msg.chaddr, yiaddr, CLIENT_PORT)
    } else {
        (MacAddr::BROADCAST, Ipv4Addr::BROADCAST, CLIENT_PORT)
    };
    let frame = UdpFrame {
        l2: L2 {
            dst: dst_mac,
            src: server_mac,
            ..req.l2
        },
        src_ip: params.server_id,
        dst_ip,
        src_port: SERVER_PORT,
        dst_port,
        ttl: 64,
        dscp: 48,
    };
    let mut buf = vec![0u8; 1500];
    let n = emit_dhcp_frame(&mut buf, &frame, &r)?;
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kbng_wire::VlanTag;

    /// A client frame as dhclient would send it.
    pub(crate) fn client_frame(msg: &DhcpRepr, tags: Option<(u16, u16)>) -> Vec<u8> {
        let l2 = L2 {
            dst: MacAddr::BROADCAST,
            src: msg.chaddr,
            outer: tags.map(|(o, _)| VlanTag::dot1q(o)),
            inner: tags.and_then(|(_, i)| (i != 0).then(|| VlanTag::dot1q(i))),
            ethertype: 0,
        };
        let f = UdpFrame {
            l2,
            src_ip: msg.ciaddr,
            dst_ip: Ipv4Addr::BROADCAST,
            src_port: CLIENT_PORT,
            dst_port: SERVER_PORT,
            ttl: 64,
            dscp: 0,
        };
        let mut buf = vec![0u8; 1500];
        let n = emit_dhcp_frame(&mut buf, &f, msg).unwrap();
        buf.truncate(n);
        buf
    }

    fn params() -> LeaseParams {
        LeaseParams {
            server_id: Ipv4Addr::new(100, 64, 0, 1),
            subnet_mask: Ipv4Addr::new(255, 255, 255, 0),
            router: Ipv4Addr::new(100, 64, 0, 1),
            dns: vec![Ipv4Addr::new(9, 9, 9, 9)],
            lease_secs: 3600,
        }
    }

    #[test]
    fn offer_to_a_qinq_client_keeps_its_tags_and_parses_back() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let d = DhcpRepr::new(DhcpOp::BootRequest, DhcpMessageType::Discover, 42, mac);
        let inb = parse_frame(&client_frame(&d, Some((100, 200)))).unwrap();
        let yi = Ipv4Addr::new(100, 64, 0, 10);
        let out = build_reply(
            &inb,
            DhcpMessageType::Offer,
            yi,
            &params(),
            MacAddr([2, 0xbb, 0, 0, 0, 1]),
        )
        .unwrap();
        let l2 = parse_l2(&out).unwrap();
        assert_eq!((l2.outer_vid(), l2.inner_vid()), (Some(100), Some(200)));
        assert_eq!(l2.dst, mac, "unicast to chaddr when broadcast is not asked");
        let ip = Ipv4Packet::new_checked(&out[l2.l3_offset()..]).unwrap();
        assert_eq!(ip.dst(), yi);
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum(ip.src(), ip.dst()));
        let r = DhcpRepr::parse(udp.payload()).unwrap();
        assert_eq!(r.message_type, DhcpMessageType::Offer);
        assert_eq!(
            (
                r.xid,
                r.yiaddr,
                r.lease_secs,
                r.renewal_secs,
                r.rebinding_secs
            ),
            (42, yi, Some(3600), Some(1800), Some(3150))
        );
        assert_eq!(r.server_id, Some(Ipv4Addr::new(100, 64, 0, 1)));
    }

    #[test]
    fn renewal_times_stay_in_order_for_short_leases() {
        assert_eq!(renewal_times(3600), (Some(1800), Some(3150)));
        // Cut to a session's end: T2 after T1, never 0.
        assert_eq!(renewal_times(6), (Some(3), Some(5)));
        assert_eq!(renewal_times(2), (Some(1), Some(1)));
        assert_eq!(renewal_times(1), (None, None));
        assert_eq!(
            renewal_times(u32::MAX),
            (Some(u32::MAX / 2), Some(3_758_096_383))
        );
    }

    #[test]
    fn nak_is_broadcast_and_relay_gets_unicast() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let mut d = DhcpRepr::new(DhcpOp::BootRequest, DhcpMessageType::Request, 1, mac);
        d.requested_ip = Some(Ipv4Addr::new(1, 2, 3, 4));
        let inb = parse_frame(&client_frame(&d, None)).unwrap();
        let out = build_reply(
            &inb,
            DhcpMessageType::Nak,
            Ipv4Addr::UNSPECIFIED,
            &params(),
            mac,
        )
        .unwrap();
        assert_eq!(parse_l2(&out).unwrap().dst, MacAddr::BROADCAST);

        d.giaddr = Ipv4Addr::new(10, 0, 0, 1);
        let inb = parse_frame(&client_frame(&d, None)).unwrap();
        let out = build_reply(
            &inb,
            DhcpMessageType::Ack,
            d.requested_ip.unwrap(),
            &params(),
            mac,
        )
        .unwrap();
        let l2 = parse_l2(&out).unwrap();
        let ip = Ipv4Packet::new_checked(&out[l2.l3_offset()..]).unwrap();
        assert_eq!(ip.dst(), d.giaddr);
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(udp.dst_port(), SERVER_PORT);
    }

    #[test]
    fn classify() {
        let ours = [Ipv4Addr::new(100, 64, 0, 1)];
        let mut d = DhcpRepr::new(
            DhcpOp::BootRequest,
            DhcpMessageType::Request,
            1,
            MacAddr::ZERO,
        );
        assert_eq!(classify_request(&d, &ours), RequestKind::Invalid);
        d.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 9));
        assert!(matches!(
            classify_request(&d, &ours),
            RequestKind::InitReboot { .. }
        ));
        d.server_id = Some(Ipv4Addr::new(1, 1, 1, 1));
        assert!(matches!(
            classify_request(&d, &ours),
            RequestKind::Selecting { ours: false, .. }
        ));
        d.server_id = None;
        d.requested_ip = None;
        d.ciaddr = Ipv4Addr::new(100, 64, 0, 9);
        assert!(matches!(
            classify_request(&d, &ours),
            RequestKind::Renewing { .. }
        ));
    }

    #[test]
    fn malformed_frames_are_classified() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let d = DhcpRepr::new(DhcpOp::BootRequest, DhcpMessageType::Discover, 1, mac);
        let good = client_frame(&d, None);
        assert_eq!(parse_frame(&good[..100]).unwrap_err(), DhcpDrop::BadIpv4);
        let mut bad = good.clone();
        bad[14 + 20 + 8 + 236] ^= 0xff;
        assert_eq!(parse_frame(&bad).unwrap_err(), DhcpDrop::BadMagicCookie);
        let mut bad = good.clone();
        // First option is 53 len 1: make its length absurd.
        bad[14 + 20 + 8 + 241] = 250;
        assert_eq!(parse_frame(&bad).unwrap_err(), DhcpDrop::BadOption);
    }
}
