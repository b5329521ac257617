//! ARP for Ethernet/IPv4 (RFC 826).
//!
//! Only the Ethernet (htype 1) / IPv4 (ptype 0x0800) pairing is handled; any
//! other is [`WireError::Unsupported`]. The BNG answers ARP for subscriber
//! gateways, so [`ArpRepr::reply_to`] builds the reply to a request.

use std::net::Ipv4Addr;

use crate::error::{WireError, check_len, check_room};
use crate::ethernet::{MacAddr, ethertype};

/// Length of an Ethernet/IPv4 ARP packet.
pub const ARP_LEN: usize = 28;

mod field {
    use std::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// ARP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    /// 1.
    Request,
    /// 2.
    Reply,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for ArpOp {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            o => ArpOp::Unknown(o),
        }
    }
}

impl From<ArpOp> for u16 {
    fn from(op: ArpOp) -> u16 {
        match op {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
            ArpOp::Unknown(o) => o,
        }
    }
}

/// A checked view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Validate length and the hardware/protocol pairing once.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(ARP_LEN, b.len())?;
        if b[field::HTYPE] != [0, 1]
            || b[field::PTYPE] != ethertype::IPV4.to_be_bytes()
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(WireError::Unsupported("ARP hardware/protocol type"));
        }
        Ok(ArpPacket { buf })
    }

    /// Operation.
    #[inline]
    pub fn op(&self) -> ArpOp {
        let b = &self.buf.as_ref()[field::OPER];
        ArpOp::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Sender hardware address.
    #[inline]
    pub fn sender_mac(&self) -> MacAddr {
        mac(&self.buf.as_ref()[field::SHA])
    }

    /// Sender protocol address.
    #[inline]
    pub fn sender_ip(&self) -> Ipv4Addr {
        ip(&self.buf.as_ref()[field::SPA])
    }

    /// Target hardware address.
    #[inline]
    pub fn target_mac(&self) -> MacAddr {
        mac(&self.buf.as_ref()[field::THA])
    }

    /// Target protocol address.
    #[inline]
    pub fn target_ip(&self) -> Ipv4Addr {
        ip(&self.buf.as_ref()[field::TPA])
    }
}

#[inline]
fn mac(b: &[u8]) -> MacAddr {
    MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]])
}

#[inline]
fn ip(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

/// An Ethernet/IPv4 ARP packet as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub op: ArpOp,
    /// Sender hardware address.
    pub sender_mac: MacAddr,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address.
    pub target_mac: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Parse `buf` (the bytes at the L3 offset).
    pub fn parse(buf: &[u8]) -> Result<ArpRepr, WireError> {
        let p = ArpPacket::new_checked(buf)?;
        Ok(ArpRepr {
            op: p.op(),
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        })
    }

    /// Write the 28-byte packet to the start of `buf`; returns [`ARP_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        check_room(ARP_LEN, buf.len())?;
        buf[field::HTYPE].copy_from_slice(&1u16.to_be_bytes());
        buf[field::PTYPE].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        buf[field::HLEN] = 6;
        buf[field::PLEN] = 4;
        buf[field::OPER].copy_from_slice(&u16::from(self.op).to_be_bytes());
        buf[field::SHA].copy_from_slice(&self.sender_mac.0);
        buf[field::SPA].copy_from_slice(&self.sender_ip.octets());
        buf[field::THA].copy_from_slice(&self.target_mac.0);
        buf[field::TPA].copy_from_slice(&self.target_ip.octets());
        Ok(ARP_LEN)
    }

    /// The reply to this request, sent by `our_mac` owning `target_ip`
    /// (RFC 826 "Packet Reception": swap sender and target, fill in our
    /// hardware address, set the opcode to reply). `None` unless this is a
    /// request. Whether `target_ip` is ours is the caller's decision.
    pub fn reply_to(&self, our_mac: MacAddr) -> Option<ArpRepr> {
        (self.op == ArpOp::Request).then_some(ArpRepr {
            op: ArpOp::Reply,
            sender_mac: our_mac,
            sender_ip: self.target_ip,
            target_mac: self.sender_mac,
            target_ip: self.sender_ip,
        })
    }

    /// True for a gratuitous ARP (sender and target protocol address equal).
    pub fn is_gratuitous(&self) -> bool {
        self.sender_ip == self.target_ip
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Who has 10.0.0.1? Tell 10.0.0.23 (from 00:1b:21:aa:bb:cc).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc, 10, 0,
        0, 23, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,
    ];

    #[test]
    fn parse_request_and_reply() {
        let req = ArpRepr::parse(&REQUEST).unwrap();
        assert_eq!(req.op, ArpOp::Request);
        assert_eq!(req.sender_ip, Ipv4Addr::new(10, 0, 0, 23));
        assert_eq!(req.target_ip, Ipv4Addr::new(10, 0, 0, 1));
        let ours = MacAddr([0x02, 0, 0, 0, 0, 1]);
        let rep = req.reply_to(ours).unwrap();
        let mut buf = [0u8; 28];
        rep.emit(&mut buf).unwrap();
        let expect: [u8; 28] = [
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0x00,
            0x1b, 0x21, 0xaa, 0xbb, 0xcc, 10, 0, 0, 23,
        ];
        assert_eq!(buf, expect);
        assert!(rep.reply_to(ours).is_none());
    }

    #[test]
    fn rejects_other_pairings_and_short() {
        let mut b = REQUEST;
        b[1] = 6; // IEEE 802 hardware
        assert!(matches!(ArpRepr::parse(&b), Err(WireError::Unsupported(_))));
        assert_eq!(
            ArpRepr::parse(&REQUEST[..27]),
            Err(WireError::Truncated { need: 28, have: 27 })
        );
    }

    fn repr() -> impl Strategy<Value = ArpRepr> {
        (
            any::<u16>(),
            any::<[u8; 6]>(),
            any::<[u8; 4]>(),
            any::<[u8; 6]>(),
            any::<[u8; 4]>(),
        )
            .prop_map(|(op, sm, si, tm, ti)| ArpRepr {
                op: ArpOp::from(op),
                sender_mac: MacAddr(sm),
                sender_ip: Ipv4Addr::from(si),
                target_mac: MacAddr(tm),
                target_ip: Ipv4Addr::from(ti),
            })
    }

    proptest! {
        #[test]
        fn roundtrip(x in repr()) {
            let mut buf = [0u8; 28];
            x.emit(&mut buf).unwrap();
            prop_assert_eq!(ArpRepr::parse(&buf).unwrap(), x);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = ArpRepr::parse(&b);
        }
    }
}
