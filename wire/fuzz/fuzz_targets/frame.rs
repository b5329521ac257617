//! The whole receive path of a punted frame: L2, then IPv4, then UDP or
//! TCP, then DHCP, as the dataplane and control plane chain them.
#![no_main]

use kbng_wire::ethernet::ethertype;
use kbng_wire::ipv4::protocol;
use kbng_wire::{ArpRepr, DhcpRepr, Ipv4Packet, TcpPacket, UdpPacket, parse_l2};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(l2) = parse_l2(data) else { return };
    let l3 = &data[l2.l3_offset()..];
    match l2.ethertype {
        ethertype::ARP => {
            let _ = ArpRepr::parse(l3);
        }
        ethertype::IPV4 => {
            let Ok(ip) = Ipv4Packet::new_checked(l3) else {
                return;
            };
            match ip.protocol() {
                protocol::UDP => {
                    if let Ok(u) = UdpPacket::new_checked(ip.payload()) {
                        let _ = u.verify_checksum(ip.src(), ip.dst());
                        let _ = DhcpRepr::parse(u.payload());
                    }
                }
                protocol::TCP => {
                    let _ = TcpPacket::new_checked(ip.payload()).map(|t| t.flags());
                }
                _ => {}
            }
        }
        _ => {}
    }
});
