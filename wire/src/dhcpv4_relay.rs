//! DHCP Relay Agent Information, option 82 (RFC 3046).
//!
//! An access node inserts circuit-id (sub-option 1) and remote-id
//! (sub-option 2), which a BNG uses to identify the subscriber line. A
//! server must echo the option back unchanged in its replies (RFC 3046
//! §2.2), so unknown sub-options are kept in order.

use crate::error::WireError;

/// Sub-option code of Agent Circuit ID.
pub const CIRCUIT_ID: u8 = 1;
/// Sub-option code of Agent Remote ID.
pub const REMOTE_ID: u8 = 2;

/// The parsed contents of option 82.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct RelayAgentInfo {
    /// Agent Circuit ID (sub-option 1), e.g. an access-node port string.
    pub circuit_id: Option<Vec<u8>>,
    /// Agent Remote ID (sub-option 2), e.g. the CPE's identity.
    pub remote_id: Option<Vec<u8>>,
    /// Other sub-options, `(code, value)`, in the order received.
    pub other: Vec<(u8, Vec<u8>)>,
}

impl RelayAgentInfo {
    /// Parse the value of option 82. Sub-options share the option TLV
    /// format but have no pad/end codes, so `DhcpOptionIter` is not reused:
    /// every byte is part of a TLV. A
    /// repeated circuit-id or remote-id keeps the first.
    pub fn parse(data: &[u8]) -> Result<RelayAgentInfo, WireError> {
        let mut info = RelayAgentInfo::default();
        let mut rest = data;
        while let [code, len, tail @ ..] = rest {
            let len = usize::from(*len);
            if tail.len() < len {
                return Err(WireError::BadOption {
                    code: crate::dhcpv4::option::RELAY_AGENT_INFO,
                });
            }
            let (value, next) = tail.split_at(len);
            match *code {
                CIRCUIT_ID if info.circuit_id.is_none() => info.circuit_id = Some(value.to_vec()),
                REMOTE_ID if info.remote_id.is_none() => info.remote_id = Some(value.to_vec()),
                CIRCUIT_ID | REMOTE_ID => {}
                c => info.other.push((c, value.to_vec())),
            }
            rest = next;
        }
        if rest.is_empty() {
            Ok(info)
        } else {
            Err(WireError::BadOption {
                code: crate::dhcpv4::option::RELAY_AGENT_INFO,
            })
        }
    }

    /// The encoded option value (sub-options 1, 2, then the others).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::new();
        let subs = self
            .circuit_id
            .as_deref()
            .map(|v| (CIRCUIT_ID, v))
            .into_iter()
            .chain(self.remote_id.as_deref().map(|v| (REMOTE_ID, v)))
            .chain(self.other.iter().map(|(c, v)| (*c, v.as_slice())));
        for (code, v) in subs {
            let len = u8::try_from(v.len()).map_err(|_| WireError::TooLong {
                what: "option 82 sub-option",
                len: v.len(),
                max: 255,
            })?;
            out.push(code);
            out.push(len);
            out.extend_from_slice(v);
        }
        if out.len() > 255 {
            return Err(WireError::TooLong {
                what: "option 82",
                len: out.len(),
                max: 255,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn circuit_and_remote_id() {
        // circuit-id "eth 1/1/3:100.200", remote-id 00:11:22:33:44:55.
        let mut v = vec![1, 17];
        v.extend_from_slice(b"eth 1/1/3:100.200");
        v.extend_from_slice(&[2, 6, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        let info = RelayAgentInfo::parse(&v).unwrap();
        assert_eq!(info.circuit_id.as_deref(), Some(&b"eth 1/1/3:100.200"[..]));
        assert_eq!(
            info.remote_id.as_deref(),
            Some(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55][..])
        );
        assert_eq!(info.to_bytes().unwrap(), v);
    }

    #[test]
    fn truncated_sub_option() {
        assert!(RelayAgentInfo::parse(&[1, 5, b'a']).is_err());
        assert!(RelayAgentInfo::parse(&[1]).is_err());
        assert_eq!(
            RelayAgentInfo::parse(&[]).unwrap(),
            RelayAgentInfo::default()
        );
    }

    proptest! {
        #[test]
        fn roundtrip(
            c in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            r in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            o in proptest::collection::vec((3u8.., proptest::collection::vec(any::<u8>(), 0..20)), 0..3),
        ) {
            let info = RelayAgentInfo { circuit_id: c, remote_id: r, other: o };
            let b = info.to_bytes().unwrap();
            prop_assert_eq!(RelayAgentInfo::parse(&b).unwrap(), info);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = RelayAgentInfo::parse(&b);
        }
    }
}
