//! RADIUS packet view and attribute iterator (RFC 2865 §3, §5).
//!
//! Control-plane code. [`RadiusPacket::new_checked`] validates the 20-byte
//! header and the Length field once (20..=4096, within the buffer; octets
//! past Length are padding and ignored, §3). [`RadiusAttrIter`] yields one
//! [`WireError::BadAttribute`] for an attribute whose length is below 2 or
//! runs past the packet, then ends. Authenticators live in
//! [`crate::radius_auth`], building in [`crate::radius_builder`], CoA and
//! Disconnect handling in [`crate::radius_coa`].

use std::net::Ipv4Addr;

use crate::error::{WireError, check_len};

/// Length of the RADIUS header.
pub const RADIUS_HEADER_LEN: usize = 20;
/// Maximum RADIUS packet length (RFC 2865 §3).
pub const RADIUS_MAX_LEN: usize = 4096;

/// Packet codes (RFC 2865 §3, RFC 2866 §4, RFC 5176 §2.3).
pub mod code {
    /// Access-Request.
    pub const ACCESS_REQUEST: u8 = 1;
    /// Access-Accept.
    pub const ACCESS_ACCEPT: u8 = 2;
    /// Access-Reject.
    pub const ACCESS_REJECT: u8 = 3;
    /// Accounting-Request.
    pub const ACCOUNTING_REQUEST: u8 = 4;
    /// Accounting-Response.
    pub const ACCOUNTING_RESPONSE: u8 = 5;
    /// Access-Challenge.
    pub const ACCESS_CHALLENGE: u8 = 11;
    /// Status-Server (RFC 5997).
    pub const STATUS_SERVER: u8 = 12;
    /// Disconnect-Request.
    pub const DISCONNECT_REQUEST: u8 = 40;
    /// Disconnect-ACK.
    pub const DISCONNECT_ACK: u8 = 41;
    /// Disconnect-NAK.
    pub const DISCONNECT_NAK: u8 = 42;
    /// CoA-Request.
    pub const COA_REQUEST: u8 = 43;
    /// CoA-ACK.
    pub const COA_ACK: u8 = 44;
    /// CoA-NAK.
    pub const COA_NAK: u8 = 45;
}

/// Attribute types used by a BNG.
pub mod attr {
    /// User-Name (text).
    pub const USER_NAME: u8 = 1;
    /// User-Password (hidden, RFC 2865 §5.2).
    pub const USER_PASSWORD: u8 = 2;
    /// CHAP-Password (RFC 2865 §5.3): CHAP identifier, then the 16-octet response.
    pub const CHAP_PASSWORD: u8 = 3;
    /// NAS-IP-Address.
    pub const NAS_IP_ADDRESS: u8 = 4;
    /// NAS-Port.
    pub const NAS_PORT: u8 = 5;
    /// Service-Type.
    pub const SERVICE_TYPE: u8 = 6;
    /// Framed-IP-Address.
    pub const FRAMED_IP_ADDRESS: u8 = 8;
    /// Framed-IP-Netmask.
    pub const FRAMED_IP_NETMASK: u8 = 9;
    /// Filter-Id.
    pub const FILTER_ID: u8 = 11;
    /// Reply-Message.
    pub const REPLY_MESSAGE: u8 = 18;
    /// State.
    pub const STATE: u8 = 24;
    /// Class.
    pub const CLASS: u8 = 25;
    /// Vendor-Specific (§5.26).
    pub const VENDOR_SPECIFIC: u8 = 26;
    /// Session-Timeout.
    pub const SESSION_TIMEOUT: u8 = 27;
    /// Idle-Timeout.
    pub const IDLE_TIMEOUT: u8 = 28;
    /// Termination-Action (§5.29).
    pub const TERMINATION_ACTION: u8 = 29;
    /// Called-Station-Id.
    pub const CALLED_STATION_ID: u8 = 30;
    /// Calling-Station-Id.
    pub const CALLING_STATION_ID: u8 = 31;
    /// NAS-Identifier.
    pub const NAS_IDENTIFIER: u8 = 32;
    /// Acct-Status-Type (RFC 2866 §5.1).
    pub const ACCT_STATUS_TYPE: u8 = 40;
    /// Acct-Delay-Time (RFC 2866 §5.2).
    pub const ACCT_DELAY_TIME: u8 = 41;
    /// Acct-Input-Octets.
    pub const ACCT_INPUT_OCTETS: u8 = 42;
    /// Acct-Output-Octets.
    pub const ACCT_OUTPUT_OCTETS: u8 = 43;
    /// Acct-Session-Id (RFC 2866 §5.5).
    pub const ACCT_SESSION_ID: u8 = 44;
    /// Acct-Session-Time.
    pub const ACCT_SESSION_TIME: u8 = 46;
    /// Acct-Input-Packets.
    pub const ACCT_INPUT_PACKETS: u8 = 47;
    /// Acct-Output-Packets.
    pub const ACCT_OUTPUT_PACKETS: u8 = 48;
    /// Acct-Terminate-Cause.
    pub const ACCT_TERMINATE_CAUSE: u8 = 49;
    /// Acct-Input-Gigawords (RFC 2869 §5.1): times Acct-Input-Octets wrapped 2^32.
    pub const ACCT_INPUT_GIGAWORDS: u8 = 52;
    /// Acct-Output-Gigawords (RFC 2869 §5.2).
    pub const ACCT_OUTPUT_GIGAWORDS: u8 = 53;
    /// Event-Timestamp.
    pub const EVENT_TIMESTAMP: u8 = 55;
    /// CHAP-Challenge (RFC 2865 §5.40).
    pub const CHAP_CHALLENGE: u8 = 60;
    /// NAS-Port-Type.
    pub const NAS_PORT_TYPE: u8 = 61;
    /// Message-Authenticator (RFC 3579 §3.2).
    pub const MESSAGE_AUTHENTICATOR: u8 = 80;
    /// Acct-Interim-Interval.
    pub const ACCT_INTERIM_INTERVAL: u8 = 85;
    /// NAS-Port-Id (RFC 2869 §5.17).
    pub const NAS_PORT_ID: u8 = 87;
    /// Framed-Pool (RFC 2869 §5.18).
    pub const FRAMED_POOL: u8 = 88;
    /// Error-Cause (RFC 5176 §3.5).
    pub const ERROR_CAUSE: u8 = 101;
}

/// Values of enumerated attributes.
pub mod value {
    /// Service-Type Framed-User (RFC 2865 §5.6).
    pub const SERVICE_TYPE_FRAMED: u32 = 2;
    /// Termination-Action RADIUS-Request: at its Session-Timeout the session is authorized
    /// again rather than ended (RFC 2865 §5.29).
    pub const TERMINATION_RADIUS_REQUEST: u32 = 1;
    /// NAS-Port-Type Ethernet (RFC 2865 §5.41).
    pub const NAS_PORT_TYPE_ETHERNET: u32 = 15;
    /// Acct-Status-Type Start (RFC 2866 §5.1).
    pub const ACCT_START: u32 = 1;
    /// Acct-Status-Type Stop.
    pub const ACCT_STOP: u32 = 2;
    /// Acct-Status-Type Interim-Update (RFC 2869 §2.1).
    pub const ACCT_INTERIM_UPDATE: u32 = 3;
    /// Acct-Status-Type Accounting-On (the NAS restarted, RFC 2866 §5.1).
    pub const ACCT_ON: u32 = 7;
    /// Acct-Status-Type Accounting-Off (the NAS goes out of service, RFC 2866 §5.1).
    pub const ACCT_OFF: u32 = 8;
    /// Acct-Terminate-Cause (RFC 2866 §5.10): User-Request.
    pub const TERMINATE_USER_REQUEST: u32 = 1;
    /// Lost-Carrier.
    pub const TERMINATE_LOST_CARRIER: u32 = 2;
    /// Idle-Timeout.
    pub const TERMINATE_IDLE_TIMEOUT: u32 = 4;
    /// Session-Timeout.
    pub const TERMINATE_SESSION_TIMEOUT: u32 = 5;
    /// Admin-Reset.
    pub const TERMINATE_ADMIN_RESET: u32 = 6;
    /// NAS-Error.
    pub const TERMINATE_NAS_ERROR: u32 = 9;
    /// NAS-Request.
    pub const TERMINATE_NAS_REQUEST: u32 = 10;
    /// Port-Preempted.
    pub const TERMINATE_PORT_PREEMPTED: u32 = 13;
    /// User-Error.
    pub const TERMINATE_USER_ERROR: u32 = 17;
}

/// Vendor-Specific attributes a BNG sends.
pub mod vendor {
    /// The Broadband Forum (formerly ADSL/DSL Forum) enterprise number.
    pub const DSL_FORUM: u32 = 3561;
    /// Agent-Circuit-Id (RFC 4679 §4.1): option 82 sub-option 1.
    pub const AGENT_CIRCUIT_ID: u8 = 1;
    /// Agent-Remote-Id (RFC 4679 §4.2): option 82 sub-option 2.
    pub const AGENT_REMOTE_ID: u8 = 2;
}

/// One attribute: type and value (without the 2-byte header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RadiusAttr<'a> {
    /// Attribute type.
    pub kind: u8,
    /// Value bytes.
    pub value: &'a [u8],
}

impl<'a> RadiusAttr<'a> {
    /// The value as a 32-bit integer (integer, time, enum types).
    pub fn as_u32(&self) -> Result<u32, WireError> {
        match self.value {
            [a, b, c, d] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
            _ => Err(WireError::BadAttribute { kind: self.kind }),
        }
    }

    /// The value as an IPv4 address.
    pub fn as_ipv4(&self) -> Result<Ipv4Addr, WireError> {
        self.as_u32().map(Ipv4Addr::from)
    }

    /// A Vendor-Specific value split into vendor id and its sub-attributes,
    /// in the type/length/value layout RFC 2865 §5.26 recommends (the same
    /// layout as attributes, so the same iterator walks them).
    pub fn as_vendor(&self) -> Result<(u32, RadiusAttrIter<'a>), WireError> {
        match self.value {
            [a, b, c, d, rest @ ..] if self.kind == attr::VENDOR_SPECIFIC => Ok((
                u32::from_be_bytes([*a, *b, *c, *d]),
                RadiusAttrIter::new(rest),
            )),
            _ => Err(WireError::BadAttribute { kind: self.kind }),
        }
    }
}

/// Iterator over attributes (or vendor sub-attributes).
#[derive(Debug, Clone)]
pub struct RadiusAttrIter<'a> {
    rest: &'a [u8],
}

impl<'a> RadiusAttrIter<'a> {
    /// Iterate over raw attribute bytes.
    pub fn new(attrs: &'a [u8]) -> Self {
        RadiusAttrIter { rest: attrs }
    }
}

impl<'a> Iterator for RadiusAttrIter<'a> {
    type Item = Result<RadiusAttr<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, tail) = self.rest.split_first()?;
        let len = tail.first().map_or(0, |l| usize::from(*l));
        if len < 2 || len > self.rest.len() {
            self.rest = &[];
            return Some(Err(WireError::BadAttribute { kind }));
        }
        let (a, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(Ok(RadiusAttr {
            kind,
            value: &a[2..],
        }))
    }
}

impl std::iter::FusedIterator for RadiusAttrIter<'_> {}

/// A checked view of a RADIUS packet.
#[derive(Debug, Clone, Copy)]
pub struct RadiusPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> RadiusPacket<T> {
    /// Validate the header and Length field once.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        check_len(RADIUS_HEADER_LEN, b.len())?;
        let len = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if !(RADIUS_HEADER_LEN..=RADIUS_MAX_LEN).contains(&len) {
            return Err(WireError::BadLength {
                what: "radius length",
                value: len,
            });
        }
        check_len(len, b.len())?;
        Ok(RadiusPacket { buf })
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buf.as_ref()[0]
    }

    /// Identifier.
    pub fn identifier(&self) -> u8 {
        self.buf.as_ref()[1]
    }

    /// Length field.
    pub fn len(&self) -> usize {
        let b = self.buf.as_ref();
        usize::from(u16::from_be_bytes([b[2], b[3]]))
    }

    /// True when the packet has no attributes.
    pub fn is_empty(&self) -> bool {
        self.len() == RADIUS_HEADER_LEN
    }

    /// The 16-byte authenticator field.
    pub fn authenticator(&self) -> [u8; 16] {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buf.as_ref()[4..20]);
        a
    }

    /// The packet up to its Length (padding excluded).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[..self.len()]
    }

    /// The attributes.
    pub fn attributes(&self) -> RadiusAttrIter<'_> {
        RadiusAttrIter::new(&self.as_bytes()[RADIUS_HEADER_LEN..])
    }

    /// The first well-formed attribute of `kind`, if any.
    pub fn attr(&self, kind: u8) -> Option<&[u8]> {
        self.attributes()
            .map_while(Result::ok)
            .find(|a| a.kind == kind)
            .map(|a| a.value)
    }

    /// The first well-formed vendor sub-attribute `(vendor_id, vendor_type)`.
    pub fn vendor_attr(&self, vendor_id: u32, vendor_type: u8) -> Option<&[u8]> {
        self.attributes()
            .map_while(Result::ok)
            .filter_map(|a| a.as_vendor().ok())
            .filter(|(v, _)| *v == vendor_id)
            .find_map(|(_, subs)| {
                subs.map_while(Result::ok)
                    .find(|s| s.kind == vendor_type)
                    .map(|s| s.value)
            })
    }

    /// Check every attribute is well-formed.
    pub fn validate_attributes(&self) -> Result<(), WireError> {
        self.attributes().try_for_each(|a| a.map(|_| ()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 2865 §7.1: Access-Request for "nemo" (password "arctangent",
    /// secret "xyzzy5461") from NAS 192.168.1.16 port 3.
    pub(crate) const RFC2865_REQUEST: [u8; 56] = [
        0x01, 0x00, 0x00, 0x38, 0x0f, 0x40, 0x3f, 0x94, 0x73, 0x97, 0x80, 0x57, 0xbd, 0x83, 0xd5,
        0xcb, 0x98, 0xf4, 0x22, 0x7a, 0x01, 0x06, 0x6e, 0x65, 0x6d, 0x6f, 0x02, 0x12, 0x0d, 0xbe,
        0x70, 0x8d, 0x93, 0xd4, 0x13, 0xce, 0x31, 0x96, 0xe4, 0x3f, 0x78, 0x2a, 0x0a, 0xee, 0x04,
        0x06, 0xc0, 0xa8, 0x01, 0x10, 0x05, 0x06, 0x00, 0x00, 0x00, 0x03,
    ];

    #[test]
    fn rfc2865_example_view() {
        let p = RadiusPacket::new_checked(&RFC2865_REQUEST[..]).unwrap();
        assert_eq!(
            (p.code(), p.identifier(), p.len()),
            (code::ACCESS_REQUEST, 0, 56)
        );
        assert_eq!(p.attr(attr::USER_NAME), Some(&b"nemo"[..]));
        let kinds: Vec<u8> = p.attributes().map(|a| a.unwrap().kind).collect();
        assert_eq!(kinds, [1, 2, 4, 5]);
        let nas = p
            .attributes()
            .find(|a| a.as_ref().unwrap().kind == 4)
            .unwrap()
            .unwrap();
        assert_eq!(nas.as_ipv4().unwrap(), Ipv4Addr::new(192, 168, 1, 16));
    }

    #[test]
    fn length_rules() {
        let mut b = RFC2865_REQUEST.to_vec();
        b.extend_from_slice(&[0; 8]); // padding past Length is ignored
        assert_eq!(
            RadiusPacket::new_checked(&b[..]).unwrap().as_bytes().len(),
            56
        );
        assert!(matches!(
            RadiusPacket::new_checked(&RFC2865_REQUEST[..55]),
            Err(WireError::Truncated { .. })
        ));
        let mut b = RFC2865_REQUEST;
        b[3] = 19;
        assert!(matches!(
            RadiusPacket::new_checked(&b[..]),
            Err(WireError::BadLength { .. })
        ));
    }

    #[test]
    fn bad_attribute_lengths() {
        for attrs in [&[1u8, 0][..], &[1, 1], &[1, 9, 0], &[1]] {
            let v: Vec<_> = RadiusAttrIter::new(attrs).collect();
            assert_eq!(v, [Err(WireError::BadAttribute { kind: 1 })], "{attrs:?}");
        }
    }

    #[test]
    fn vendor_specific_sub_attributes() {
        // Vendor 9 (Cisco), sub-attribute 1 "a=b".
        let v = [0, 0, 0, 9, 1, 5, b'a', b'=', b'b'];
        let a = RadiusAttr {
            kind: attr::VENDOR_SPECIFIC,
            value: &v,
        };
        let (vendor, mut subs) = a.as_vendor().unwrap();
        assert_eq!(vendor, 9);
        assert_eq!(
            subs.next(),
            Some(Ok(RadiusAttr {
                kind: 1,
                value: b"a=b"
            }))
        );
        assert_eq!(subs.next(), None);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(p) = RadiusPacket::new_checked(&b[..]) {
                for a in p.attributes().flatten() {
                    let _ = (a.as_u32(), a.as_vendor().map(|(_, it)| it.count()));
                }
            }
            prop_assert!(RadiusAttrIter::new(&b).count() <= b.len());
        }
    }
}
