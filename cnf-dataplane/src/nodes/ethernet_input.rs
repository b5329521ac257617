//! `ethernet-input`: the first node. Parses Ethernet, 802.1Q and QinQ (outer 0x88a8 or 0x8100,
//! inner 0x8100; `kbng_wire::parse_l2`) and classifies.
//!
//! From the access port: DHCP (UDP to port 67 or 68) and ARP go to `punt`, except ARP requests
//! for a subscriber gateway address, which go to `arp-reply` (proxy ARP, answered here so the
//! control plane is not in the ARP path at scale); IPv4 to our MAC goes to `session-lookup` as
//! upstream. From the uplink: IPv4 to our MAC goes to `session-lookup` as downstream, ARP to
//! `uplink-arp` when an uplink address is configured (else to `punt`). Everything else is
//! dropped with a reason.
//!
//! Next nodes: `session-lookup`, `arp-reply`, `uplink-arp`, `punt`, drop.
//! Counters: see [`EthernetInputCounter`].
//! Per-core state: the counters only.

use kbng_wire::fastpath::{L2Ipv4, l2_ipv4};
use kbng_wire::ipv4::protocol;
use kbng_wire::{ArpOp, ArpPacket, Ipv4Packet, ethernet::ethertype, parse_l2};

use super::{NodeEnv, be16, enqueue};
use crate::counters::{BurstCounts, NodeCounters};
use crate::node_counters;
use crate::packet::{Direction, FRAME_SIZE, Frame, Meta, PacketBuf, Pkt, PortId};
use crate::punt::PuntReason;
use crate::tables::AccessTable;

node_counters! {
    /// Counters of `ethernet-input`.
    pub enum EthernetInputCounter ("ethernet-input") {
        /// Upstream IPv4 passed on.
        Upstream => "upstream IPv4",
        /// Downstream IPv4 passed on.
        Downstream => "downstream IPv4",
        /// DHCP sent to the control plane.
        DhcpPunted => "DHCP punted",
        /// ARP sent to the control plane.
        ArpPunted => "ARP punted",
        /// ARP requests for a gateway address answered locally.
        ProxyArp => "proxy ARP",
        /// ARP from the uplink, handled locally.
        UplinkArp => "uplink ARP",
        /// Drop: the Ethernet or VLAN header could not be parsed.
        BadL2 => "bad L2 header",
        /// Drop: the IPv4 header is invalid.
        BadIpv4 => "bad IPv4 header",
        /// Drop: the ARP packet is invalid.
        BadArp => "bad ARP",
        /// Drop: neither IPv4 nor ARP.
        UnsupportedEthertype => "unsupported ethertype",
        /// Drop: unicast IPv4 to another MAC.
        NotOurMac => "not our MAC",
        /// Drop: internal frame overflow (never expected).
        FrameOverflow => "frame overflow",
    }
}

/// Where `ethernet-input` sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EthernetInputNext {
    /// Subscriber IPv4, either direction (set in the metadata).
    SessionLookup,
    /// ARP request for a gateway.
    ArpReply,
    /// ARP from the uplink (our address configured).
    UplinkArp,
    /// To the control plane.
    Punt(PuntReason),
    /// Dropped, with the reason.
    Drop(EthernetInputCounter),
}

/// The `ethernet-input` node.
#[derive(Debug)]
pub struct EthernetInputNode {
    /// Counters.
    pub counters: NodeCounters<EthernetInputCounter>,
    /// Each packet's next node, from the classify pass of [`Self::run`].
    nexts: Box<[EthernetInputNext; FRAME_SIZE]>,
}

impl Default for EthernetInputNode {
    fn default() -> Self {
        Self {
            counters: NodeCounters::default(),
            nexts: Box::new([EthernetInputNext::Drop(EthernetInputCounter::BadL2); FRAME_SIZE]),
        }
    }
}

impl EthernetInputNode {
    /// Classify a well-formed IPv4 frame and fill its metadata; `dport` is the UDP
    /// destination port if the packet is UDP (read by the caller, which holds the bytes).
    #[inline(always)]
    fn ipv4(
        env: &NodeEnv,
        m: &mut Meta,
        access: bool,
        f: &L2Ipv4,
        dport: u16,
    ) -> EthernetInputNext {
        use EthernetInputNext as N;
        m.l3 = f.l3 as u16;
        m.outer_vid = f.outer_vid;
        m.inner_vid = f.inner_vid;
        if access && f.protocol == protocol::UDP && !f.fragment && (dport == 67 || dport == 68) {
            return N::Punt(PuntReason::Dhcp);
        }
        let ours = if access {
            env.access_mac
        } else {
            env.uplink_mac
        };
        if f.dst != ours {
            return N::Drop(EthernetInputCounter::NotOurMac);
        }
        m.dir = if access {
            Direction::Up
        } else {
            Direction::Down
        };
        // Later nodes read these from the metadata, which sits in the frame array, instead
        // of touching the packet again.
        m.src_mac = f.src;
        m.src_ip = f.src_ip;
        m.dst_ip = f.dst_ip;
        m.ip_len = f.total_len;
        N::SessionLookup
    }

    /// Classify one packet and fill its L2 metadata.
    #[inline(always)]
    pub fn classify<P: PacketBuf>(
        env: &NodeEnv,
        access_cfg: &AccessTable,
        pkt: &mut Pkt<P>,
    ) -> EthernetInputNext {
        use EthernetInputCounter as C;
        use EthernetInputNext as N;
        let data = pkt.buf.data();
        let access = pkt.meta.rx_port == PortId::Access;
        if let Some(f) = l2_ipv4(data) {
            let dport = be16(data, f.l3 + f.header_len + 2);
            return Self::ipv4(env, &mut pkt.meta, access, &f, dport);
        }
        let Ok(l2) = parse_l2(data) else {
            return N::Drop(C::BadL2);
        };
        let l3 = l2.l3_offset();
        let m = &mut pkt.meta;
        m.l3 = l3 as u16;
        m.outer_vid = l2.outer_vid().unwrap_or(0);
        m.inner_vid = l2.inner_vid().unwrap_or(0);
        let payload = data.get(l3..).unwrap_or(&[]);
        match l2.ethertype {
            // Well-formed IPv4 of at least the fast prefix took the fast path above; this is
            // what remains (short, or malformed), read by the generic parser for the error.
            ethertype::IPV4 => {
                let Ok(ip) = Ipv4Packet::new_checked(payload) else {
                    return N::Drop(C::BadIpv4);
                };
                let f = L2Ipv4::from_parsed(&l2, &ip);
                let dport = be16(payload, f.header_len + 2);
                Self::ipv4(env, m, access, &f, dport)
            }
            ethertype::ARP => {
                let Ok(arp) = ArpPacket::new_checked(payload) else {
                    return N::Drop(C::BadArp);
                };
                if access
                    && arp.op() == ArpOp::Request
                    && access_cfg.is_gateway(u32::from(arp.target_ip()))
                {
                    N::ArpReply
                } else if !access && env.uplink_ip != 0 {
                    N::UplinkArp
                } else {
                    N::Punt(PuntReason::Arp)
                }
            }
            _ => N::Drop(C::UnsupportedEthertype),
        }
    }

    /// Process a frame. A burst of subscriber IPv4 only (the common one) stays where it is:
    /// `true` says every packet of `input` goes to `session-lookup`, which then reads `input`
    /// itself. Otherwise (`false`) `input` is drained into the next frames, in order. Moving
    /// every packet into a lookup frame cost about 30 instructions per packet (callgrind).
    // One frame per next node, like VPP's next indices; a struct of them would only rename.
    #[allow(clippy::too_many_arguments)]
    pub fn run<P: PacketBuf>(
        &mut self,
        env: &NodeEnv,
        access_cfg: &AccessTable,
        input: &mut Frame<P>,
        lookup: &mut Frame<P>,
        arp: &mut Frame<P>,
        uplink_arp: &mut Frame<P>,
        punt: &mut Frame<P>,
    ) -> bool {
        use EthernetInputCounter as C;
        use EthernetInputNext as N;
        let mut counts = BurstCounts::default();
        let mut all_lookup = true;
        for (pkt, next) in input.iter_mut().zip(self.nexts.iter_mut()) {
            *next = Self::classify(env, access_cfg, pkt);
            if *next == N::SessionLookup {
                counts.inc(match pkt.meta.dir {
                    Direction::Up => C::Upstream,
                    Direction::Down => C::Downstream,
                });
            } else {
                all_lookup = false;
            }
        }
        if all_lookup {
            counts.flush(&self.counters);
            return true;
        }
        for (mut pkt, &next) in input.drain(..).zip(self.nexts.iter()) {
            let overflow = match next {
                N::SessionLookup => enqueue(lookup, pkt),
                N::ArpReply => {
                    counts.inc(C::ProxyArp);
                    enqueue(arp, pkt)
                }
                N::UplinkArp => {
                    counts.inc(C::UplinkArp);
                    enqueue(uplink_arp, pkt)
                }
                N::Punt(reason) => {
                    counts.inc(match reason {
                        PuntReason::Dhcp => C::DhcpPunted,
                        _ => C::ArpPunted,
                    });
                    pkt.meta.punt_reason = reason as u8;
                    enqueue(punt, pkt)
                }
                N::Drop(reason) => {
                    counts.inc(reason);
                    None
                }
            };
            if overflow.is_some() {
                counts.inc(C::FrameOverflow);
            }
        }
        counts.flush(&self.counters);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::testpkt::*;

    fn classify(bytes: &[u8], port: PortId) -> EthernetInputNext {
        let env = env();
        let mut p = Pkt::new(crate::packet::HeapBuf::from_bytes(bytes), port);
        EthernetInputNode::classify(&env, &access(), &mut p)
    }

    #[test]
    fn classifies_by_port_and_protocol() {
        use EthernetInputNext as N;
        let up = ipv4_udp(SUB_MAC, ACCESS_MAC, &[100], SUB_IP, CORE_IP, 1000, 2000, 64);
        assert_eq!(classify(&up, PortId::Access), N::SessionLookup);
        let qinq = ipv4_udp(SUB_MAC, ACCESS_MAC, &[100, 200], SUB_IP, CORE_IP, 1, 2, 64);
        assert_eq!(classify(&qinq, PortId::Access), N::SessionLookup);
        let dhcp = ipv4_udp(SUB_MAC, [0xff; 6], &[100], [0; 4], [255; 4], 68, 67, 300);
        assert_eq!(classify(&dhcp, PortId::Access), N::Punt(PuntReason::Dhcp));
        let other_mac = ipv4_udp(SUB_MAC, [2, 9, 9, 9, 9, 9], &[], SUB_IP, CORE_IP, 1, 2, 64);
        assert_eq!(
            classify(&other_mac, PortId::Access),
            N::Drop(EthernetInputCounter::NotOurMac)
        );
        let gw_arp = arp_request(SUB_MAC, &[100], SUB_IP, GW_IP);
        assert_eq!(classify(&gw_arp, PortId::Access), N::ArpReply);
        let other_arp = arp_request(SUB_MAC, &[100], SUB_IP, [100, 64, 0, 99]);
        assert_eq!(
            classify(&other_arp, PortId::Access),
            N::Punt(PuntReason::Arp)
        );
        let down = ipv4_udp(CORE_MAC, UPLINK_MAC, &[], CORE_IP, SUB_IP, 2000, 1000, 64);
        assert_eq!(classify(&down, PortId::Uplink), N::SessionLookup);
        let mut ipv6 = up.clone();
        ipv6[16..18].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            classify(&ipv6, PortId::Access),
            N::Drop(EthernetInputCounter::UnsupportedEthertype)
        );
        assert_eq!(
            classify(&up[..20], PortId::Access),
            N::Drop(EthernetInputCounter::BadIpv4)
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200), access: bool) {
            let port = if access { PortId::Access } else { PortId::Uplink };
            let _ = classify(&bytes, port);
        }
    }
}
