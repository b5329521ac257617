//! Ethernet II with zero, one (802.1Q) or two (QinQ) VLAN tags.
//!
//! [`parse_l2`] reads the whole L2 header in one pass and returns an [`L2`]
//! by value; the L3 header starts at [`L2::l3_offset`]. The outer tag of a
//! double-tagged frame may carry TPID 0x88a8 (802.1ad) or 0x8100: Linux
//! `net_af_packet` re-inserts a stripped 802.1ad outer tag as 0x8100, so
//! rejecting it would break the AF_PACKET test path. The inner tag must be
//! 0x8100. A third tag is an error ([`WireError::TooManyTags`]); a BNG keys
//! subscribers on at most (S-VLAN, C-VLAN).

use std::fmt;
use std::str::FromStr;

use crate::error::{WireError, check_len, check_room};

/// EtherType values this crate names.
pub mod ethertype {
    /// IPv4 (RFC 894).
    pub const IPV4: u16 = 0x0800;
    /// ARP (RFC 826).
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q customer tag (and the outer tag of QinQ as re-inserted by Linux).
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag.
    pub const QINQ: u16 = 0x88a8;
    /// PPPoE discovery stage (RFC 2516).
    pub const PPPOE_DISCOVERY: u16 = 0x8863;
    /// PPPoE session stage (RFC 2516).
    pub const PPPOE_SESSION: u16 = 0x8864;
}

/// Length of an untagged Ethernet II header.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;

/// Header length of an Ethernet II frame carrying `tags` VLAN tags.
#[inline]
pub const fn header_len(tags: usize) -> usize {
    ETHERNET_HEADER_LEN + VLAN_TAG_LEN * tags
}

/// A 48-bit IEEE 802 MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Read a MAC address from the first six bytes of `b`.
    #[inline]
    pub fn from_slice(b: &[u8]) -> Result<MacAddr, WireError> {
        check_len(6, b.len())?;
        Ok(MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]))
    }

    /// The six octets.
    #[inline]
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// True when the I/G bit is set (multicast, including broadcast).
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl FromStr for MacAddr {
    type Err = WireError;

    /// Accepts `aa:bb:cc:dd:ee:ff` and `aa-bb-cc-dd-ee-ff`, any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut out {
            let p = parts.next().ok_or(WireError::BadText("MAC address"))?;
            if p.len() != 2 {
                return Err(WireError::BadText("MAC address"));
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| WireError::BadText("MAC address"))?;
        }
        if parts.next().is_some() {
            return Err(WireError::BadText("MAC address"));
        }
        Ok(MacAddr(out))
    }
}

/// One VLAN tag: its TPID and the three fields of its TCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100 or 0x88a8).
    pub tpid: u16,
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// An 802.1Q (0x8100) tag with priority 0.
    #[inline]
    pub const fn dot1q(vid: u16) -> VlanTag {
        VlanTag {
            tpid: ethertype::VLAN,
            pcp: 0,
            dei: false,
            vid,
        }
    }

    /// An 802.1ad (0x88a8) service tag with priority 0.
    #[inline]
    pub const fn dot1ad(vid: u16) -> VlanTag {
        VlanTag {
            tpid: ethertype::QINQ,
            pcp: 0,
            dei: false,
            vid,
        }
    }

    /// Split a tag control information word.
    #[inline]
    pub const fn from_tci(tpid: u16, tci: u16) -> VlanTag {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// The tag control information word.
    #[inline]
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    fn valid(&self) -> bool {
        self.pcp <= 7 && self.vid <= 0x0fff
    }
}

/// A parsed Ethernet II header; also the representation [`L2::emit`] writes.
///
/// With one tag, `outer` is set and `inner` is `None`; `inner` without
/// `outer` is never produced and refused by [`L2::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2 {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// First tag after the source MAC.
    pub outer: Option<VlanTag>,
    /// Second tag (the C-VLAN of a QinQ frame).
    pub inner: Option<VlanTag>,
    /// EtherType after the tags. Values below 0x0600 are 802.3 lengths and
    /// are returned as found; callers drop what they do not handle.
    pub ethertype: u16,
}

impl L2 {
    /// Number of VLAN tags, 0..=2.
    #[inline]
    pub const fn tag_count(&self) -> usize {
        self.outer.is_some() as usize + self.inner.is_some() as usize
    }

    /// Offset of the L3 header in the frame (= header length).
    #[inline]
    pub const fn l3_offset(&self) -> usize {
        header_len(self.tag_count())
    }

    /// Outer VLAN id, if tagged.
    #[inline]
    pub fn outer_vid(&self) -> Option<u16> {
        self.outer.map(|t| t.vid)
    }

    /// Inner VLAN id, if double-tagged.
    #[inline]
    pub fn inner_vid(&self) -> Option<u16> {
        self.inner.map(|t| t.vid)
    }

    /// Write this header to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.l3_offset();
        check_room(len, buf.len())?;
        let tags = match (self.outer, self.inner) {
            (None, Some(t)) => return Err(WireError::BadTag { tpid: t.tpid }),
            (o, i) => [o, i],
        };
        buf[0..6].copy_from_slice(&self.dst.0);
        buf[6..12].copy_from_slice(&self.src.0);
        let mut at = 12;
        for t in tags.into_iter().flatten() {
            if !t.valid() {
                return Err(WireError::BadTag { tpid: t.tpid });
            }
            buf[at..at + 2].copy_from_slice(&t.tpid.to_be_bytes());
            buf[at + 2..at + 4].copy_from_slice(&t.tci().to_be_bytes());
            at += VLAN_TAG_LEN;
        }
        buf[at..at + 2].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(len)
    }
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
const fn is_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | 0x9100)
}

/// Parse the Ethernet II header at the start of `frame`.
///
/// Accepts 0, 1 or 2 tags (outer 0x88a8 or 0x8100, inner 0x8100). Errors:
/// [`WireError::Truncated`], [`WireError::TooManyTags`] for a third tag,
/// [`WireError::BadTag`] for 0x88a8 (or legacy 0x9100) in the inner position
/// or 0x9100 outside it.
#[inline]
pub fn parse_l2(frame: &[u8]) -> Result<L2, WireError> {
    check_len(ETHERNET_HEADER_LEN, frame.len())?;
    let dst = MacAddr([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]]);
    let src = MacAddr([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]);
    let mut l2 = L2 {
        dst,
        src,
        outer: None,
        inner: None,
        ethertype: be16(frame, 12),
    };
    if !is_tpid(l2.ethertype) {
        return Ok(l2);
    }
    if l2.ethertype == 0x9100 {
        return Err(WireError::BadTag { tpid: 0x9100 });
    }
    check_len(header_len(1), frame.len())?;
    l2.outer = Some(VlanTag::from_tci(l2.ethertype, be16(frame, 14)));
    l2.ethertype = be16(frame, 16);
    if !is_tpid(l2.ethertype) {
        return Ok(l2);
    }
    if l2.ethertype != ethertype::VLAN {
        return Err(WireError::BadTag { tpid: l2.ethertype });
    }
    check_len(header_len(2), frame.len())?;
    l2.inner = Some(VlanTag::from_tci(l2.ethertype, be16(frame, 18)));
    l2.ethertype = be16(frame, 20);
    if is_tpid(l2.ethertype) {
        return Err(WireError::TooManyTags);
    }
    Ok(l2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
    const B: MacAddr = MacAddr([0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc]);

    #[test]
    fn untagged() {
        let f = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc, 0x08, 0x06,
        ];
        let l2 = parse_l2(&f).unwrap();
        assert_eq!(l2.dst, MacAddr::BROADCAST);
        assert_eq!(l2.src, B);
        assert_eq!(l2.ethertype, ethertype::ARP);
        assert_eq!(l2.l3_offset(), 14);
        assert_eq!(l2.outer_vid(), None);
    }

    #[test]
    fn qinq_88a8_and_8100_outer_both_accepted() {
        for outer_tpid in [0x88a8u16, 0x8100] {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&outer_tpid.to_be_bytes());
            f.extend_from_slice(&[0xa0, 0x64]); // PCP 5, VID 100
            f.extend_from_slice(&[0x81, 0x00, 0x10, 0xc8]); // DEI, VID 200
            f.extend_from_slice(&[0x08, 0x00]);
            let l2 = parse_l2(&f).unwrap();
            let o = l2.outer.unwrap();
            assert_eq!((o.tpid, o.pcp, o.dei, o.vid), (outer_tpid, 5, false, 100));
            let i = l2.inner.unwrap();
            assert_eq!((i.pcp, i.dei, i.vid), (0, true, 200));
            assert_eq!(l2.ethertype, ethertype::IPV4);
            assert_eq!(l2.l3_offset(), 22);
        }
    }

    #[test]
    fn three_tags_rejected() {
        let mut f = vec![0u8; 12];
        for _ in 0..3 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        assert_eq!(parse_l2(&f), Err(WireError::TooManyTags));
    }

    #[test]
    fn inner_88a8_rejected_and_truncation_reported() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01, 0x88, 0xa8, 0x00, 0x02, 0x08, 0x00]);
        assert_eq!(parse_l2(&f), Err(WireError::BadTag { tpid: 0x88a8 }));
        assert_eq!(
            parse_l2(&f[..16]),
            Err(WireError::Truncated { need: 18, have: 16 })
        );
        assert_eq!(
            parse_l2(&f[..5]),
            Err(WireError::Truncated { need: 14, have: 5 })
        );
    }

    #[test]
    fn mac_text() {
        assert_eq!("00:1B:21:aa:bb:cc".parse::<MacAddr>().unwrap(), B);
        assert_eq!("00-1b-21-aa-bb-cc".parse::<MacAddr>().unwrap(), B);
        assert_eq!(B.to_string(), "00:1b:21:aa:bb:cc");
        for bad in [
            "",
            "00:1b:21:aa:bb",
            "00:1b:21:aa:bb:cc:dd",
            "0:1b:21:aa:bb:cc",
            "zz:1b:21:aa:bb:cc",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn emit_refuses_inner_only_and_small_buffers() {
        let l2 = L2 {
            dst: A,
            src: B,
            outer: None,
            inner: Some(VlanTag::dot1q(1)),
            ethertype: 0x0800,
        };
        assert!(l2.emit(&mut [0u8; 64]).is_err());
        let l2 = L2 {
            outer: Some(VlanTag::dot1ad(1)),
            ..l2
        };
        assert_eq!(
            l2.emit(&mut [0u8; 21]),
            Err(WireError::BufferTooSmall { need: 22, have: 21 })
        );
        assert_eq!(header_len(2), 22);
    }

    fn tag(tpids: &'static [u16]) -> impl Strategy<Value = VlanTag> {
        (
            proptest::sample::select(tpids),
            0u8..8,
            any::<bool>(),
            0u16..4096,
        )
            .prop_map(|(tpid, pcp, dei, vid)| VlanTag {
                tpid,
                pcp,
                dei,
                vid,
            })
    }

    fn l2() -> impl Strategy<Value = L2> {
        let outer = proptest::option::of(tag(&[0x8100, 0x88a8]));
        let inner = proptest::option::of(tag(&[0x8100]));
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            outer,
            inner,
            any::<u16>(),
        )
            .prop_filter_map(
                "ethertype must not be a TPID",
                |(d, s, outer, inner, et)| {
                    if is_tpid(et) {
                        return None;
                    }
                    let inner = if outer.is_some() { inner } else { None };
                    Some(L2 {
                        dst: MacAddr(d),
                        src: MacAddr(s),
                        outer,
                        inner,
                        ethertype: et,
                    })
                },
            )
    }

    proptest! {
        #[test]
        fn parse_emit_roundtrip(x in l2()) {
            let mut buf = [0u8; 32];
            let n = x.emit(&mut buf).unwrap();
            prop_assert_eq!(n, x.l3_offset());
            prop_assert_eq!(parse_l2(&buf[..n]).unwrap(), x);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(l2) = parse_l2(&b) {
                prop_assert!(l2.l3_offset() <= b.len());
            }
        }

        #[test]
        fn mac_display_parse_roundtrip(m in any::<[u8; 6]>()) {
            prop_assert_eq!(MacAddr(m).to_string().parse::<MacAddr>().unwrap(), MacAddr(m));
        }
    }
}
