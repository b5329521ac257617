//! TCP header view and a minimal emitter (RFC 793 / RFC 9293).
//!
//! The dataplane needs ports and flags (walled-garden checks); the control
//! plane needs to emit option-less segments for the captive-portal HTTP
//! redirect. Options, window scaling and reassembly are out of scope.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::{WireError, check_len, check_room};
use crate::ipv4::protocol;

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

/// TCP control flags (the low 9 bits of bytes 12..14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// FIN.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// SYN.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// RST.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// PSH.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// ACK.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// URG.
    pub const URG: TcpFlags = TcpFlags(0x020);

    /// True when every flag of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

/// A checked view of a TCP segment.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Validate once: 20-byte header, 5 <= data offset, header within buffer.
    /// The buffer is the segment (the IPv4 payload), so its end is the
    /// segment end.
    #[inline]
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(TCP_HEADER_LEN, b.len())?;
        let hlen = usize::from(b[12] >> 4) * 4;
        if hlen < TCP_HEADER_LEN {
            return Err(WireError::BadLength {
                what: "tcp data offset",
                value: hlen,
            });
        }
        check_len(hlen, b.len())?;
        Ok(TcpPacket { buf })
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

    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u32 {
        be32(self.buf.as_ref(), 4)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack(&self) -> u32 {
        be32(self.buf.as_ref(), 8)
    }

    /// Header length in bytes (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[12] >> 4) * 4
    }

    /// Control flags.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(be16(self.buf.as_ref(), 12) & 0x01ff)
    }

    /// Window.
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.buf.as_ref(), 14)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), 16)
    }

    /// The payload after the header (and options).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..]
    }

    /// True when the checksum over the pseudo-header and segment is correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let b = self.buf.as_ref();
        let Ok(len) = u16::try_from(b.len()) else {
            return false;
        };
        let acc = checksum::pseudo_header_sum(src, dst, protocol::TCP, len);
        checksum::finish(checksum::sum(acc, b)) == 0
    }
}

/// An option-less TCP header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Control flags.
    pub flags: TcpFlags,
    /// Window.
    pub window: u16,
}

impl TcpRepr {
    /// Read the fields of a checked segment (options are skipped).
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> TcpRepr {
        TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            ack: p.ack(),
            flags: p.flags(),
            window: p.window(),
        }
    }

    /// Write a 20-byte header into `buf[..20]` for a payload already placed
    /// at `buf[20..20 + payload_len]`, with the checksum over the IPv4
    /// pseudo-header (RFC 9293 §3.1).
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<usize, WireError> {
        let len = TCP_HEADER_LEN + payload_len;
        check_room(len, buf.len())?;
        let len16 = u16::try_from(len).map_err(|_| WireError::TooLong {
            what: "tcp segment",
            len,
            max: usize::from(u16::MAX),
        })?;
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..8].copy_from_slice(&self.seq.to_be_bytes());
        buf[8..12].copy_from_slice(&self.ack.to_be_bytes());
        let off_flags = (5u16 << 12) | (self.flags.0 & 0x01ff);
        buf[12..14].copy_from_slice(&off_flags.to_be_bytes());
        buf[14..16].copy_from_slice(&self.window.to_be_bytes());
        buf[16..20].copy_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        let acc = checksum::pseudo_header_sum(src, dst, protocol::TCP, len16);
        let c = checksum::finish(checksum::sum(acc, &buf[..len]));
        buf[16..18].copy_from_slice(&c.to_be_bytes());
        Ok(TCP_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 7);

    #[test]
    fn syn_view() {
        // 100.64.0.7:49152 -> 10.0.0.1:80 SYN, data offset 6 (one MSS option).
        let seg = [
            0xc0, 0x00, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x60, 0x02,
            0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4,
        ];
        let p = TcpPacket::new_checked(&seg[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.header_len()),
            (49152, 80, 24)
        );
        assert!(p.flags().contains(TcpFlags::SYN) && !p.flags().contains(TcpFlags::ACK));
        assert!(p.payload().is_empty());
        assert!(TcpPacket::new_checked(&seg[..22]).is_err());
    }

    #[test]
    fn http_redirect_segment_checksums() {
        let body = b"HTTP/1.1 302 Found\r\nLocation: http://portal/\r\n\r\n";
        let mut b = vec![0u8; 20 + body.len()];
        b[20..].copy_from_slice(body);
        let r = TcpRepr {
            src_port: 80,
            dst_port: 49152,
            seq: 1000,
            ack: 2,
            flags: TcpFlags::PSH | TcpFlags::ACK | TcpFlags::FIN,
            window: 65535,
        };
        r.emit(&mut b, body.len(), SRC, DST).unwrap();
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        assert_eq!(TcpRepr::parse(&p), r);
        assert_eq!(p.payload(), body);
    }

    proptest! {
        #[test]
        fn roundtrip(sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(), fl in 0u16..0x200, w in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = TcpRepr { src_port: sp, dst_port: dp, seq, ack, flags: TcpFlags(fl), window: w };
            let mut b = vec![0u8; 20 + data.len()];
            b[20..].copy_from_slice(&data);
            r.emit(&mut b, data.len(), SRC, DST).unwrap();
            let p = TcpPacket::new_checked(&b[..]).unwrap();
            prop_assert!(p.verify_checksum(SRC, DST));
            prop_assert_eq!(TcpRepr::parse(&p), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = TcpPacket::new_checked(&b[..]) {
                let _ = (p.payload(), p.flags(), p.verify_checksum(SRC, DST));
            }
        }
    }
}
