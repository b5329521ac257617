//! Whole-frame emitters: Ethernet(+tags) + IPv4 + UDP around a payload.
//!
//! The control plane injects replies (DHCP, later others) as complete frames
//! through the dataplane, so the headers and both checksums are built here
//! in one place rather than in each protocol module.

use std::net::Ipv4Addr;

use crate::error::{WireError, check_room};
use crate::ethernet::{L2, ethertype};
use crate::ipv4::{IPV4_HEADER_LEN, Ipv4Repr, protocol};
use crate::udp::{UDP_HEADER_LEN, UdpRepr};

/// Addresses and ports of an Ethernet/IPv4/UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame {
    /// Ethernet header; its `ethertype` is overwritten with IPv4.
    pub l2: L2,
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 TTL.
    pub ttl: u8,
    /// IPv4 DSCP.
    pub dscp: u8,
}

impl UdpFrame {
    /// Offset of the UDP payload in the frame.
    #[inline]
    pub const fn payload_offset(&self) -> usize {
        self.l2.l3_offset() + IPV4_HEADER_LEN + UDP_HEADER_LEN
    }

    /// Write the frame into `buf`: `payload` is called with the room after
    /// the UDP header, writes the payload and returns its length; then the
    /// headers and checksums are filled in. Returns the frame length.
    pub fn emit_with<F>(&self, buf: &mut [u8], payload: F) -> Result<usize, WireError>
    where
        F: FnOnce(&mut [u8]) -> Result<usize, WireError>,
    {
        let off = self.payload_offset();
        check_room(off, buf.len())?;
        let plen = payload(&mut buf[off..])?;
        check_room(off + plen, buf.len())?;
        let l2 = L2 {
            ethertype: ethertype::IPV4,
            ..self.l2
        };
        let l3 = l2.emit(buf)?;
        let udp_len = UDP_HEADER_LEN + plen;
        let ip = Ipv4Repr {
            src: self.src_ip,
            dst: self.dst_ip,
            protocol: protocol::UDP,
            payload_len: u16::try_from(udp_len).map_err(|_| WireError::TooLong {
                what: "udp datagram",
                len: udp_len,
                max: usize::from(u16::MAX) - IPV4_HEADER_LEN,
            })?,
            ttl: self.ttl,
            dscp: self.dscp,
            ident: 0,
            dont_frag: false,
        };
        ip.emit(&mut buf[l3..])?;
        let udp = UdpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
        };
        udp.emit(
            &mut buf[l3 + IPV4_HEADER_LEN..],
            plen,
            self.src_ip,
            self.dst_ip,
        )?;
        Ok(off + plen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::{MacAddr, VlanTag, parse_l2};
    use crate::ipv4::Ipv4Packet;
    use crate::udp::UdpPacket;

    #[test]
    fn qinq_udp_frame_parses_back_with_valid_checksums() {
        let f = UdpFrame {
            l2: L2 {
                dst: MacAddr::BROADCAST,
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                outer: Some(VlanTag::dot1ad(100)),
                inner: Some(VlanTag::dot1q(200)),
                ethertype: 0,
            },
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::BROADCAST,
            src_port: 67,
            dst_port: 68,
            ttl: 64,
            dscp: 48,
        };
        let mut buf = [0u8; 128];
        let n = f
            .emit_with(&mut buf, |p| {
                p[..5].copy_from_slice(b"hello");
                Ok(5)
            })
            .unwrap();
        assert_eq!(n, 22 + 20 + 8 + 5);
        let l2 = parse_l2(&buf[..n]).unwrap();
        assert_eq!(
            (l2.outer_vid(), l2.inner_vid(), l2.ethertype),
            (Some(100), Some(200), 0x0800)
        );
        let ip = Ipv4Packet::new_checked(&buf[l2.l3_offset()..n]).unwrap();
        assert!(ip.verify_checksum());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum(ip.src(), ip.dst()));
        assert_eq!(udp.payload(), b"hello");
        assert!(f.emit_with(&mut buf[..50], |_| Ok(5)).is_err());
    }
}
