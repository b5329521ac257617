//! IPv4 header view (RFC 791) with in-place TTL and DSCP rewriting.
//!
//! [`Ipv4Packet::new_checked`] validates version, IHL and total length
//! against the buffer once; afterwards no accessor can panic. The mutating
//! helpers keep the header checksum valid with the incremental update of
//! RFC 1624 instead of summing the header again: two additions per packet.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{WireError, check_len, check_room};

/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;

/// IP protocol numbers this crate names.
pub mod protocol {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
}

mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// A checked view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Validate the header once: at least 20 bytes, version 4, IHL >= 5,
    /// IHL*4 <= total length <= buffer length. Bytes past the total length
    /// (Ethernet padding) are allowed and ignored by [`Self::payload`].
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(IPV4_HEADER_LEN, b.len())?;
        let version = b[field::VER_IHL] >> 4;
        if version != 4 {
            return Err(WireError::BadVersion(version));
        }
        let hlen = usize::from(b[field::VER_IHL] & 0x0f) * 4;
        if hlen < IPV4_HEADER_LEN {
            return Err(WireError::BadLength {
                what: "ipv4 header length",
                value: hlen,
            });
        }
        let total = usize::from(be16(b, field::LENGTH.start));
        if total < hlen {
            return Err(WireError::BadLength {
                what: "ipv4 total length",
                value: total,
            });
        }
        check_len(total, b.len())?;
        Ok(Ipv4Packet { buf })
    }

    /// Give back the buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }

    /// Header length in bytes (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buf.as_ref()[field::TOS] >> 2
    }

    /// ECN bits (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buf.as_ref()[field::TOS] & 0x03
    }

    /// Total length field.
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buf.as_ref(), field::LENGTH.start)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buf.as_ref(), field::IDENT.start)
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.buf.as_ref()[field::FLG_OFF.start] & 0x40 != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.buf.as_ref()[field::FLG_OFF.start] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buf.as_ref(), field::FLG_OFF.start) & 0x1fff) << 3
    }

    /// True for any fragment (offset non-zero or more-fragments set).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        be16(self.buf.as_ref(), field::FLG_OFF.start) & 0x3fff != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[field::TTL]
    }

    /// Protocol number.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buf.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), field::CHECKSUM.start)
    }

    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// The header including options.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buf.as_ref()[..self.header_len()]
    }

    /// The payload, up to the total length (padding excluded).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// True when the header checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Recompute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        let hlen = self.header_len();
        let b = self.buf.as_mut();
        b[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&b[..hlen]);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }

    /// Forwarding TTL step (RFC 791 §3.2, RFC 1812 §5.3.1): if TTL > 1,
    /// decrement it, patch the checksum incrementally and return `true`;
    /// otherwise leave the packet untouched and return `false` (the caller
    /// drops it, and may send ICMP Time Exceeded).
    #[inline]
    pub fn decrement_ttl(&mut self) -> bool {
        let b = self.buf.as_mut();
        let ttl = b[field::TTL];
        if ttl <= 1 {
            return false;
        }
        let old = u16::from_be_bytes([ttl, b[field::PROTOCOL]]);
        let new = u16::from_be_bytes([ttl - 1, b[field::PROTOCOL]]);
        b[field::TTL] = ttl - 1;
        patch(b, old, new);
        true
    }

    /// Re-mark DSCP (0..=63, higher bits ignored), keeping ECN, with an
    /// incremental checksum update.
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = self.buf.as_mut();
        let tos = b[field::TOS];
        let new_tos = ((dscp & 0x3f) << 2) | (tos & 0x03);
        let old = u16::from_be_bytes([b[field::VER_IHL], tos]);
        let new = u16::from_be_bytes([b[field::VER_IHL], new_tos]);
        b[field::TOS] = new_tos;
        patch(b, old, new);
    }

    /// Mutable payload, up to the total length.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buf.as_mut()[h..t]
    }
}

#[inline]
fn patch(b: &mut [u8], old: u16, new: u16) {
    let hc = be16(b, field::CHECKSUM.start);
    b[field::CHECKSUM].copy_from_slice(&checksum::update(hc, old, new).to_be_bytes());
}

/// An option-less IPv4 header as values, for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Payload length in bytes (total length minus 20).
    pub payload_len: u16,
    /// Time to live.
    pub ttl: u8,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// Identification.
    pub ident: u16,
    /// Don't-fragment flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Read the fields of a checked packet. Options are skipped; ECN and
    /// fragment fields are not represented.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Ipv4Repr {
        Ipv4Repr {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            // total >= header_len was checked in new_checked.
            payload_len: p.total_len() - p.header().len() as u16,
            ttl: p.ttl(),
            dscp: p.dscp(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        }
    }

    /// Write a 20-byte header with a valid checksum to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        check_room(IPV4_HEADER_LEN, buf.len())?;
        let total =
            self.payload_len
                .checked_add(IPV4_HEADER_LEN as u16)
                .ok_or(WireError::TooLong {
                    what: "ipv4 payload",
                    len: self.payload_len.into(),
                    max: 65515,
                })?;
        buf[field::VER_IHL] = 0x45;
        buf[field::TOS] = (self.dscp & 0x3f) << 2;
        buf[field::LENGTH].copy_from_slice(&total.to_be_bytes());
        buf[field::IDENT].copy_from_slice(&self.ident.to_be_bytes());
        buf[field::FLG_OFF].copy_from_slice(&[if self.dont_frag { 0x40 } else { 0 }, 0]);
        buf[field::TTL] = self.ttl;
        buf[field::PROTOCOL] = self.protocol;
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
        buf[field::SRC].copy_from_slice(&self.src.octets());
        buf[field::DST].copy_from_slice(&self.dst.octets());
        let c = checksum::checksum(&buf[..IPV4_HEADER_LEN]);
        buf[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        Ok(IPV4_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // UDP 192.168.0.1 -> 192.168.0.199, total length 0x73, checksum 0xb861.
    fn sample() -> Vec<u8> {
        let mut v = vec![
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        v.resize(0x73, 0xee);
        v
    }

    #[test]
    fn accessors_of_a_known_header() {
        let b = sample();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag() && !p.is_fragment());
        assert_eq!((p.ttl(), p.protocol()), (64, protocol::UDP));
        assert_eq!(p.src(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn new_checked_rejects() {
        let b = sample();
        let mut v6 = b.clone();
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).err(),
            Some(WireError::BadVersion(6))
        );
        let mut ihl = b.clone();
        ihl[0] = 0x44;
        assert!(matches!(
            Ipv4Packet::new_checked(&ihl[..]),
            Err(WireError::BadLength { .. })
        ));
        let mut tl = b.clone();
        tl[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert!(matches!(
            Ipv4Packet::new_checked(&tl[..]),
            Err(WireError::BadLength { .. })
        ));
        assert_eq!(
            Ipv4Packet::new_checked(&b[..0x72]).err(),
            Some(WireError::Truncated {
                need: 0x73,
                have: 0x72
            })
        );
        // Trailing Ethernet padding is fine.
        let mut padded = b.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(
            Ipv4Packet::new_checked(&padded[..])
                .unwrap()
                .payload()
                .len(),
            0x73 - 20
        );
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut b = sample();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert!(p.decrement_ttl());
        assert_eq!(p.ttl(), 63);
        assert!(p.verify_checksum());
        // 0xb861 + 0x0100 per RFC 1624 arithmetic.
        assert_eq!(p.checksum(), 0xb961);
        let mut b1 = sample();
        b1[8] = 1;
        let mut p = Ipv4Packet::new_checked(&mut b1[..]).unwrap();
        assert!(!p.decrement_ttl());
        assert_eq!(p.ttl(), 1);
    }

    #[test]
    fn dscp_remark_keeps_checksum_and_ecn() {
        let mut b = sample();
        b[1] = 0x02; // ECT(0)
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum();
        p.set_dscp(46); // EF
        assert_eq!((p.dscp(), p.ecn()), (46, 2));
        assert!(p.verify_checksum());
    }

    fn repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0u16..1000,
            any::<u8>(),
            0u8..64,
            any::<u16>(),
            any::<bool>(),
        )
            .prop_map(
                |(s, d, protocol, payload_len, ttl, dscp, ident, dont_frag)| Ipv4Repr {
                    src: s.into(),
                    dst: d.into(),
                    protocol,
                    payload_len,
                    ttl,
                    dscp,
                    ident,
                    dont_frag,
                },
            )
    }

    proptest! {
        #[test]
        fn roundtrip(x in repr()) {
            let mut buf = vec![0u8; 20 + usize::from(x.payload_len)];
            x.emit(&mut buf).unwrap();
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p), x);
        }

        #[test]
        fn ttl_and_dscp_updates_match_full_recompute(x in repr(), dscp in 0u8..64) {
            let mut buf = vec![0u8; 20 + usize::from(x.payload_len)];
            x.emit(&mut buf).unwrap();
            let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
            let (ttl, ecn) = (p.ttl(), p.ecn());
            prop_assert_eq!(p.decrement_ttl(), ttl > 1);
            p.set_dscp(dscp);
            prop_assert_eq!(p.ttl(), if ttl > 1 { ttl - 1 } else { ttl });
            prop_assert_eq!((p.dscp(), p.ecn()), (dscp, ecn));
            let patched = p.checksum();
            p.fill_checksum();
            // RFC 1624's update may give the other form of zero (0xffff for 0x0000).
            let full = p.checksum();
            let zeros = [0x0000, 0xffff];
            prop_assert!(
                patched == full || (zeros.contains(&patched) && zeros.contains(&full)),
                "{:#06x} vs {:#06x}", patched, full
            );
            prop_assert!(p.verify_checksum());
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                let _ = (p.payload(), p.header(), p.verify_checksum(), p.frag_offset(), Ipv4Repr::parse(&p));
            }
        }
    }
}
