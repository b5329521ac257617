//! UDP header view and emitter (RFC 768).

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{WireError, check_len, check_room};
use crate::ipv4::protocol;

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// A checked view of a UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buf: T,
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Validate once: 8-byte header, 8 <= length field <= buffer length.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(UDP_HEADER_LEN, b.len())?;
        let len = usize::from(be16(b, 4));
        if len < UDP_HEADER_LEN {
            return Err(WireError::BadLength {
                what: "udp length",
                value: len,
            });
        }
        check_len(len, b.len())?;
        Ok(UdpPacket { buf })
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), 0)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }

    /// Length field (header + payload).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.buf.as_ref(), 4)
    }

    /// True when the datagram carries no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) == UDP_HEADER_LEN
    }

    /// Checksum field (0 = not computed by the sender).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 6)
    }

    /// The payload, up to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[UDP_HEADER_LEN..usize::from(self.len())]
    }

    /// True when the checksum is absent (0, allowed over IPv4) or correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let dgram = &self.buf.as_ref()[..usize::from(len)];
        let acc = checksum::pseudo_header_sum(src, dst, protocol::UDP, len);
        checksum::finish(checksum::sum(acc, dgram)) == 0
    }
}

/// UDP header fields for emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Write the header into `buf[..8]` for a payload already placed at
    /// `buf[8..8 + payload_len]`, with the checksum over the IPv4
    /// pseudo-header (a computed 0 is sent as 0xffff, RFC 768).
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<usize, WireError> {
        let len = UDP_HEADER_LEN + payload_len;
        check_room(len, buf.len())?;
        let len16 = u16::try_from(len).map_err(|_| WireError::TooLong {
            what: "udp datagram",
            len,
            max: usize::from(u16::MAX),
        })?;
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..6].copy_from_slice(&len16.to_be_bytes());
        buf[6..8].copy_from_slice(&[0, 0]);
        let acc = checksum::pseudo_header_sum(src, dst, protocol::UDP, len16);
        let c = match checksum::finish(checksum::sum(acc, &buf[..len])) {
            0 => 0xffff,
            c => c,
        };
        buf[6..8].copy_from_slice(&c.to_be_bytes());
        Ok(UDP_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 2);

    #[test]
    fn known_checksum() {
        // 192.168.1.1:1234 -> 192.168.1.2:53, payload "hi"; checksum computed
        // by hand: pseudo 0xc0a8+0x0101+0xc0a8+0x0102+0x0011+0x000a, header
        // 0x04d2+0x0035+0x000a, data 0x6869 -> sum 0x2_ef1b+... folded.
        let mut b = [0u8; 10];
        b[8..].copy_from_slice(b"hi");
        UdpRepr {
            src_port: 1234,
            dst_port: 53,
        }
        .emit(&mut b, 2, SRC, DST)
        .unwrap();
        let acc: u32 =
            0xc0a8 + 0x0101 + 0xc0a8 + 0x0102 + 0x0011 + 0x000a + 0x04d2 + 0x0035 + 0x000a + 0x6869;
        assert_eq!(u16::from_be_bytes([b[6], b[7]]), checksum::finish(acc));
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(SRC, Ipv4Addr::new(192, 168, 1, 3)));
        assert_eq!(
            (p.src_port(), p.dst_port(), p.payload()),
            (1234, 53, &b"hi"[..])
        );
    }

    #[test]
    fn rejects_bad_lengths() {
        let b = [0, 1, 0, 2, 0, 7, 0, 0];
        assert!(matches!(
            UdpPacket::new_checked(&b[..]),
            Err(WireError::BadLength { .. })
        ));
        let b = [0, 1, 0, 2, 0, 9, 0, 0];
        assert_eq!(
            UdpPacket::new_checked(&b[..]).err(),
            Some(WireError::Truncated { need: 9, have: 8 })
        );
    }

    proptest! {
        #[test]
        fn emit_then_verify(sp in any::<u16>(), dp in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = vec![0u8; 8 + data.len()];
            b[8..].copy_from_slice(&data);
            UdpRepr { src_port: sp, dst_port: dp }.emit(&mut b, data.len(), SRC, DST).unwrap();
            let p = UdpPacket::new_checked(&b[..]).unwrap();
            prop_assert!(p.verify_checksum(SRC, DST));
            prop_assert_eq!((p.src_port(), p.dst_port(), p.payload()), (sp, dp, &data[..]));
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UdpPacket::new_checked(&b[..]) {
                let _ = (p.payload(), p.verify_checksum(SRC, DST));
            }
        }
    }
}
