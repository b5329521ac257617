//! DHCPv4 message view and option iterator (RFC 2131, RFC 2132).
//!
//! [`DhcpPacket::new_checked`] checks the 236-byte BOOTP header, the hardware
//! address length and the magic cookie once. [`DhcpPacket::options`] walks
//! the options field; an option whose length runs past the end yields one
//! [`WireError::BadOption`] and then the iterator ends, so absurd lengths
//! cannot panic or loop. The `sname`/`file` fields are not searched for
//! options (option overload, RFC 2132 §9.3, is ignored): a BNG's clients do
//! not use it, and not following it keeps the parser one pass.
//!
//! The allocating representation lives in [`crate::dhcpv4_repr`].

use std::net::Ipv4Addr;

use crate::error::{WireError, check_len};
use crate::ethernet::MacAddr;

/// UDP port of DHCP servers and relays.
pub const SERVER_PORT: u16 = 67;
/// UDP port of DHCP clients.
pub const CLIENT_PORT: u16 = 68;
/// The magic cookie 99.130.83.99 (RFC 2131 §3).
pub const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
/// Length of the fixed BOOTP header before the cookie.
pub const BOOTP_HEADER_LEN: usize = 236;
/// Offset of the first option (header + cookie).
pub const OPTIONS_OFFSET: usize = 240;
/// Minimum BOOTP message length (RFC 951's 64-byte vendor area; RFC 2131 §2
/// requires accepting, and relays expect, at least this size).
pub const MIN_MESSAGE_LEN: usize = 300;

/// Option codes (RFC 2132 unless noted).
pub mod option {
    /// Pad.
    pub const PAD: u8 = 0;
    /// Subnet mask (§3.3).
    pub const SUBNET_MASK: u8 = 1;
    /// Router (§3.5).
    pub const ROUTER: u8 = 3;
    /// Domain name server (§3.8).
    pub const DNS_SERVER: u8 = 6;
    /// Host name (§3.14).
    pub const HOST_NAME: u8 = 12;
    /// Requested IP address (§9.1).
    pub const REQUESTED_IP: u8 = 50;
    /// IP address lease time (§9.2).
    pub const LEASE_TIME: u8 = 51;
    /// Option overload (§9.3), not followed.
    pub const OVERLOAD: u8 = 52;
    /// DHCP message type (§9.6).
    pub const MESSAGE_TYPE: u8 = 53;
    /// Server identifier (§9.7).
    pub const SERVER_ID: u8 = 54;
    /// Parameter request list (§9.8).
    pub const PARAMETER_REQUEST_LIST: u8 = 55;
    /// Renewal (T1) time (§9.11).
    pub const RENEWAL_TIME: u8 = 58;
    /// Rebinding (T2) time (§9.12).
    pub const REBINDING_TIME: u8 = 59;
    /// Client identifier (§9.14).
    pub const CLIENT_ID: u8 = 61;
    /// Relay agent information (RFC 3046).
    pub const RELAY_AGENT_INFO: u8 = 82;
    /// End.
    pub const END: u8 = 255;
}

mod field {
    use std::ops::Range;
    pub const OP: usize = 0;
    pub const HTYPE: usize = 1;
    pub const HLEN: usize = 2;
    pub const HOPS: usize = 3;
    pub const XID: Range<usize> = 4..8;
    pub const SECS: Range<usize> = 8..10;
    pub const FLAGS: Range<usize> = 10..12;
    pub const CIADDR: usize = 12;
    pub const YIADDR: usize = 16;
    pub const SIADDR: usize = 20;
    pub const GIADDR: usize = 24;
    pub const CHADDR: usize = 28;
    pub const COOKIE: Range<usize> = 236..240;
}

/// BOOTP op code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DhcpOp {
    /// 1: client (or relay) to server.
    BootRequest,
    /// 2: server to client (or relay).
    BootReply,
}

/// DHCP message type, option 53 (RFC 2132 §9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DhcpMessageType {
    /// 1.
    Discover,
    /// 2.
    Offer,
    /// 3.
    Request,
    /// 4.
    Decline,
    /// 5.
    Ack,
    /// 6.
    Nak,
    /// 7.
    Release,
    /// 8.
    Inform,
}

impl DhcpMessageType {
    /// From the option value; `None` for unassigned values.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use DhcpMessageType::*;
        Some(match v {
            1 => Discover,
            2 => Offer,
            3 => Request,
            4 => Decline,
            5 => Ack,
            6 => Nak,
            7 => Release,
            8 => Inform,
            _ => return None,
        })
    }

    /// The option value.
    pub const fn to_u8(self) -> u8 {
        self as u8 + 1
    }
}

/// One option: its code and value bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DhcpOption<'a> {
    /// Option code.
    pub code: u8,
    /// Value (without code and length).
    pub data: &'a [u8],
}

/// Iterator over the options of a message; see the module docs.
#[derive(Debug, Clone)]
pub struct DhcpOptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> DhcpOptionIter<'a> {
    /// Iterate over a raw options area (also used for RFC 3046 sub-options
    /// when `pad_end` handling is not wanted; see `RelayAgentInfo`).
    pub fn new(options: &'a [u8]) -> Self {
        DhcpOptionIter { rest: options }
    }
}

impl<'a> Iterator for DhcpOptionIter<'a> {
    type Item = Result<DhcpOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (&code, tail) = self.rest.split_first()?;
            match code {
                option::PAD => self.rest = tail,
                option::END => {
                    self.rest = &[];
                    return None;
                }
                _ => {
                    let Some((&len, tail)) = tail.split_first() else {
                        self.rest = &[];
                        return Some(Err(WireError::BadOption { code }));
                    };
                    let len = usize::from(len);
                    if tail.len() < len {
                        self.rest = &[];
                        return Some(Err(WireError::BadOption { code }));
                    }
                    let (data, rest) = tail.split_at(len);
                    self.rest = rest;
                    return Some(Ok(DhcpOption { code, data }));
                }
            }
        }
    }
}

impl std::iter::FusedIterator for DhcpOptionIter<'_> {}

/// A checked view of a DHCP message (the UDP payload).
#[derive(Debug, Clone, Copy)]
pub struct DhcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

#[inline]
fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

impl<T: AsRef<[u8]>> DhcpPacket<T> {
    /// Validate once: at least 240 bytes, hlen <= 16, magic cookie present.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(OPTIONS_OFFSET, b.len())?;
        if b[field::HLEN] > 16 {
            return Err(WireError::BadLength {
                what: "dhcp hlen",
                value: usize::from(b[field::HLEN]),
            });
        }
        if b[field::COOKIE] != MAGIC_COOKIE {
            return Err(WireError::BadMagicCookie);
        }
        Ok(DhcpPacket { buf })
    }

    /// Op code; `None` for values other than 1 and 2.
    pub fn op(&self) -> Option<DhcpOp> {
        match self.buf.as_ref()[field::OP] {
            1 => Some(DhcpOp::BootRequest),
            2 => Some(DhcpOp::BootReply),
            _ => None,
        }
    }

    /// Hardware type (1 = Ethernet).
    pub fn htype(&self) -> u8 {
        self.buf.as_ref()[field::HTYPE]
    }

    /// Hardware address length.
    pub fn hlen(&self) -> u8 {
        self.buf.as_ref()[field::HLEN]
    }

    /// Relay hops.
    pub fn hops(&self) -> u8 {
        self.buf.as_ref()[field::HOPS]
    }

    /// Transaction id.
    pub fn xid(&self) -> u32 {
        let b = &self.buf.as_ref()[field::XID];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Seconds since the client began.
    pub fn secs(&self) -> u16 {
        let b = &self.buf.as_ref()[field::SECS];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Flags word.
    pub fn flags(&self) -> u16 {
        let b = &self.buf.as_ref()[field::FLAGS];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The BROADCAST flag (RFC 2131 §2, figure 2).
    pub fn broadcast(&self) -> bool {
        self.flags() & 0x8000 != 0
    }

    /// Client IP address.
    pub fn ciaddr(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), field::CIADDR)
    }

    /// "Your" (offered) IP address.
    pub fn yiaddr(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), field::YIADDR)
    }

    /// Next server IP address.
    pub fn siaddr(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), field::SIADDR)
    }

    /// Relay agent IP address.
    pub fn giaddr(&self) -> Ipv4Addr {
        ip_at(self.buf.as_ref(), field::GIADDR)
    }

    /// The `hlen` significant bytes of chaddr.
    pub fn chaddr(&self) -> &[u8] {
        let n = usize::from(self.hlen());
        &self.buf.as_ref()[field::CHADDR..field::CHADDR + n]
    }

    /// The client MAC for Ethernet (htype 1, hlen 6), else `None`.
    pub fn client_mac(&self) -> Option<MacAddr> {
        if self.htype() == 1 && self.hlen() == 6 {
            MacAddr::from_slice(self.chaddr()).ok()
        } else {
            None
        }
    }

    /// The options after the magic cookie.
    pub fn options(&self) -> DhcpOptionIter<'_> {
        DhcpOptionIter::new(&self.buf.as_ref()[OPTIONS_OFFSET..])
    }

    /// The message type (option 53), if present and valid.
    pub fn message_type(&self) -> Option<DhcpMessageType> {
        self.options()
            .map_while(Result::ok)
            .find(|o| o.code == option::MESSAGE_TYPE)
            .and_then(|o| match o.data {
                [v] => DhcpMessageType::from_u8(*v),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn discover() -> Vec<u8> {
        let mut b = vec![0u8; 240];
        b[0] = 1;
        b[1] = 1;
        b[2] = 6;
        b[4..8].copy_from_slice(&0x3903_f326u32.to_be_bytes());
        b[10] = 0x80;
        b[28..34].copy_from_slice(&[0x00, 0x05, 0x3c, 0x04, 0x8d, 0x59]);
        b[236..240].copy_from_slice(&MAGIC_COOKIE);
        b.extend_from_slice(&[53, 1, 1, 0, 0, 50, 4, 192, 168, 1, 100, 55, 3, 1, 3, 6, 255]);
        b.resize(300, 0);
        b
    }

    #[test]
    fn discover_fields_and_options() {
        let b = discover();
        let p = DhcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.op(), Some(DhcpOp::BootRequest));
        assert_eq!(p.xid(), 0x3903_f326);
        assert!(p.broadcast());
        assert_eq!(
            p.client_mac(),
            Some(MacAddr([0x00, 0x05, 0x3c, 0x04, 0x8d, 0x59]))
        );
        assert_eq!(p.message_type(), Some(DhcpMessageType::Discover));
        let codes: Vec<u8> = p.options().map(|o| o.unwrap().code).collect();
        assert_eq!(codes, [53, 50, 55]);
    }

    #[test]
    fn bad_cookie_short_and_hlen() {
        let mut b = discover();
        assert!(matches!(
            DhcpPacket::new_checked(&b[..239]),
            Err(WireError::Truncated { .. })
        ));
        b[2] = 17;
        assert!(matches!(
            DhcpPacket::new_checked(&b[..]),
            Err(WireError::BadLength { .. })
        ));
        b[2] = 6;
        b[236] = 0;
        assert_eq!(
            DhcpPacket::new_checked(&b[..]).err(),
            Some(WireError::BadMagicCookie)
        );
    }

    #[test]
    fn absurd_option_length_is_one_error_then_end() {
        let mut b = discover();
        b.truncate(240);
        b.extend_from_slice(&[53, 1, 1, 12, 200, b'x']);
        let p = DhcpPacket::new_checked(&b[..]).unwrap();
        let v: Vec<_> = p.options().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1], Err(WireError::BadOption { code: 12 }));
        // A code byte with no length byte.
        let v: Vec<_> = DhcpOptionIter::new(&[0, 0, 61]).collect();
        assert_eq!(v, [Err(WireError::BadOption { code: 61 })]);
    }

    proptest! {
        #[test]
        fn arbitrary_options_never_panic(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(p) = DhcpPacket::new_checked(&b[..]) {
                let _ = (p.chaddr(), p.client_mac(), p.message_type(), p.options().count());
            }
            prop_assert!(DhcpOptionIter::new(&b).count() <= b.len());
        }
    }
}
