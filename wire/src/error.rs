//! The one error type of this crate.
//!
//! A single enum rather than one per module: every parser here fails for the
//! same handful of reasons (too short, a length field that lies, a field value
//! we do not handle), and callers on the packet path map any of them to one
//! drop counter. The variants are precise enough for a control-plane log line.

use thiserror::Error;

/// Why bytes could not be parsed, or a packet could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer ends before a fixed-size part of the header does.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the header or field requires.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// An output buffer is too small for what is to be emitted.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes the emitter requires.
        need: usize,
        /// Bytes the caller provided.
        have: usize,
    },
    /// The IP version nibble is not the one expected.
    #[error("bad IP version {0}")]
    BadVersion(u8),
    /// A length field is inconsistent with the header or the buffer.
    #[error("bad length in {what}: {value}")]
    BadLength {
        /// The field, e.g. `"ipv4 total length"`.
        what: &'static str,
        /// The value the field carried.
        value: usize,
    },
    /// More than two 802.1Q/802.1ad tags.
    #[error("more than two VLAN tags")]
    TooManyTags,
    /// A VLAN tag in a position where its TPID is not allowed (e.g. 0x88a8 as
    /// the inner tag), or a tag that cannot be emitted (inner without outer,
    /// VID above 4095, PCP above 7).
    #[error("bad VLAN tag (TPID {tpid:#06x})")]
    BadTag {
        /// The offending tag protocol identifier.
        tpid: u16,
    },
    /// The DHCP magic cookie (RFC 2131 §3) is missing.
    #[error("bad DHCP magic cookie")]
    BadMagicCookie,
    /// A DHCP option or sub-option is malformed (length runs past the end,
    /// or its value has the wrong size for its code).
    #[error("bad DHCP option {code}")]
    BadOption {
        /// Option code.
        code: u8,
    },
    /// A DHCP option required for the operation is absent.
    #[error("missing DHCP option {code}")]
    MissingOption {
        /// Option code.
        code: u8,
    },
    /// A RADIUS attribute is malformed (length below 2, past the packet end,
    /// or a value of the wrong size for its type).
    #[error("bad RADIUS attribute {kind}")]
    BadAttribute {
        /// Attribute type.
        kind: u8,
    },
    /// A value is longer than its field or TLV can carry.
    #[error("{what} too long: {len} bytes, at most {max}")]
    TooLong {
        /// What was too long.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A well-formed header describes something this crate does not handle
    /// (e.g. ARP for a non-Ethernet/IPv4 pair).
    #[error("unsupported {0}")]
    Unsupported(&'static str),
    /// A RADIUS authenticator or Message-Authenticator does not verify.
    #[error("RADIUS authenticator mismatch")]
    BadAuthenticator,
    /// A RADIUS code is not the one the operation expects.
    #[error("unexpected RADIUS code {0}")]
    UnexpectedCode(u8),
    /// Text could not be parsed (MAC address, CIDR prefix).
    #[error("cannot parse {0}")]
    BadText(&'static str),
}

/// Check that `have` bytes cover `need`; the one length test of a view.
#[inline]
pub(crate) fn check_len(need: usize, have: usize) -> Result<(), WireError> {
    if have < need {
        Err(WireError::Truncated { need, have })
    } else {
        Ok(())
    }
}

/// Check that an output buffer of `have` bytes can take `need`.
#[inline]
pub(crate) fn check_room(need: usize, have: usize) -> Result<(), WireError> {
    if have < need {
        Err(WireError::BufferTooSmall { need, have })
    } else {
        Ok(())
    }
}
