//! Dynamic authorization: CoA-Request and Disconnect-Request (RFC 5176).
//!
//! The BNG is the Dynamic Authorization Server: it receives these requests
//! from the RADIUS server, identifies the session from the attributes of
//! RFC 5176 §3 and answers with an ACK or a NAK (with Error-Cause, §3.5).

use std::net::Ipv4Addr;

use crate::error::WireError;
use crate::radius::{RadiusPacket, attr, code};
use crate::radius_auth::verify_accounting_style_request;
use crate::radius_builder::RadiusBuilder;

/// Error-Cause values (RFC 5176 §3.5).
pub mod error_cause {
    /// Residual Session Context Removed.
    pub const RESIDUAL_SESSION_CONTEXT_REMOVED: u32 = 201;
    /// Unsupported Attribute.
    pub const UNSUPPORTED_ATTRIBUTE: u32 = 401;
    /// Missing Attribute.
    pub const MISSING_ATTRIBUTE: u32 = 402;
    /// NAS Identification Mismatch.
    pub const NAS_IDENTIFICATION_MISMATCH: u32 = 403;
    /// Invalid Request.
    pub const INVALID_REQUEST: u32 = 404;
    /// Unsupported Service.
    pub const UNSUPPORTED_SERVICE: u32 = 405;
    /// Invalid Attribute Value.
    pub const INVALID_ATTRIBUTE_VALUE: u32 = 407;
    /// Administratively Prohibited.
    pub const ADMINISTRATIVELY_PROHIBITED: u32 = 501;
    /// Session Context Not Found.
    pub const SESSION_CONTEXT_NOT_FOUND: u32 = 503;
    /// Session Context Not Removable.
    pub const SESSION_CONTEXT_NOT_REMOVABLE: u32 = 504;
    /// Resources Unavailable.
    pub const RESOURCES_UNAVAILABLE: u32 = 506;
}

/// Which dynamic-authorization request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoaKind {
    /// Disconnect-Request (40).
    Disconnect,
    /// CoA-Request (43).
    Coa,
}

/// A verified CoA-Request or Disconnect-Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoaRequest {
    /// Which request.
    pub kind: CoaKind,
    /// Identifier, echoed in the answer.
    pub identifier: u8,
    /// Request Authenticator, used for the answer's authenticator.
    pub authenticator: [u8; 16],
    /// User-Name.
    pub user_name: Option<Vec<u8>>,
    /// Acct-Session-Id.
    pub acct_session_id: Option<Vec<u8>>,
    /// Framed-IP-Address.
    pub framed_ip: Option<Ipv4Addr>,
    /// Calling-Station-Id.
    pub calling_station_id: Option<Vec<u8>>,
    /// NAS-IP-Address.
    pub nas_ip: Option<Ipv4Addr>,
    /// NAS-Port-Id.
    pub nas_port_id: Option<Vec<u8>>,
    /// Every attribute in order, `(type, value)`, including the above, for
    /// the policy changes a CoA carries (Filter-Id, Session-Timeout, VSAs).
    pub attributes: Vec<(u8, Vec<u8>)>,
}

impl CoaRequest {
    /// Parse `packet` and verify its Request Authenticator (and
    /// Message-Authenticator, if any) with `secret`.
    pub fn parse(packet: &[u8], secret: &[u8]) -> Result<CoaRequest, WireError> {
        let p = verify_accounting_style_request(packet, secret)?;
        let kind = match p.code() {
            code::COA_REQUEST => CoaKind::Coa,
            code::DISCONNECT_REQUEST => CoaKind::Disconnect,
            other => return Err(WireError::UnexpectedCode(other)),
        };
        let mut r = CoaRequest {
            kind,
            identifier: p.identifier(),
            authenticator: p.authenticator(),
            user_name: None,
            acct_session_id: None,
            framed_ip: None,
            calling_station_id: None,
            nas_ip: None,
            nas_port_id: None,
            attributes: Vec::new(),
        };
        for a in p.attributes() {
            let a = a?;
            let first = |slot: &mut Option<Vec<u8>>| {
                slot.get_or_insert_with(|| a.value.to_vec());
            };
            match a.kind {
                attr::USER_NAME => first(&mut r.user_name),
                attr::ACCT_SESSION_ID => first(&mut r.acct_session_id),
                attr::CALLING_STATION_ID => first(&mut r.calling_station_id),
                attr::NAS_PORT_ID => first(&mut r.nas_port_id),
                attr::FRAMED_IP_ADDRESS if r.framed_ip.is_none() => {
                    r.framed_ip = Some(a.as_ipv4()?);
                }
                attr::NAS_IP_ADDRESS if r.nas_ip.is_none() => r.nas_ip = Some(a.as_ipv4()?),
                _ => {}
            }
            r.attributes.push((a.kind, a.value.to_vec()));
        }
        Ok(r)
    }

    fn answer(&self, ack: bool) -> RadiusBuilder {
        let c = match (self.kind, ack) {
            (CoaKind::Coa, true) => code::COA_ACK,
            (CoaKind::Coa, false) => code::COA_NAK,
            (CoaKind::Disconnect, true) => code::DISCONNECT_ACK,
            (CoaKind::Disconnect, false) => code::DISCONNECT_NAK,
        };
        let mut head = [0u8; 20];
        head[0] = c;
        head[1] = self.identifier;
        head[3] = 20;
        head[4..].copy_from_slice(&self.authenticator);
        let req = RadiusPacket::new_checked(&head[..])
            .expect("a 20-byte header with Length 20 is a valid packet");
        RadiusBuilder::response(c, &req)
    }

    /// The CoA-ACK or Disconnect-ACK (RFC 5176 §2.3), with a
    /// Message-Authenticator.
    pub fn ack(&self, secret: &[u8]) -> Result<Vec<u8>, WireError> {
        self.answer(true).message_authenticator()?.finish(secret)
    }

    /// The CoA-NAK or Disconnect-NAK with an optional Error-Cause
    /// (see [`error_cause`]), with a Message-Authenticator.
    pub fn nak(&self, cause: Option<u32>, secret: &[u8]) -> Result<Vec<u8>, WireError> {
        let mut b = self.answer(false);
        if let Some(c) = cause {
            b.error_cause(c)?;
        }
        b.message_authenticator()?.finish(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radius_auth::verify_response;
    use proptest::prelude::*;

    const SECRET: &[u8] = b"coa-secret";

    fn disconnect() -> Vec<u8> {
        let mut b =
            RadiusBuilder::dynamic_authorization_request(code::DISCONNECT_REQUEST, 7).unwrap();
        b.acct_session_id("kbng-0001").unwrap();
        b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 10)).unwrap();
        b.message_authenticator().unwrap();
        b.finish(SECRET).unwrap()
    }

    #[test]
    fn disconnect_parse_and_ack() {
        let req = CoaRequest::parse(&disconnect(), SECRET).unwrap();
        assert_eq!((req.kind, req.identifier), (CoaKind::Disconnect, 7));
        assert_eq!(req.acct_session_id.as_deref(), Some(&b"kbng-0001"[..]));
        assert_eq!(req.framed_ip, Some(Ipv4Addr::new(100, 64, 0, 10)));
        let ack = req.ack(SECRET).unwrap();
        let p = verify_response(&ack, &req.authenticator, SECRET).unwrap();
        assert_eq!((p.code(), p.identifier()), (code::DISCONNECT_ACK, 7));
    }

    #[test]
    fn coa_nak_carries_error_cause() {
        let mut b = RadiusBuilder::dynamic_authorization_request(code::COA_REQUEST, 9).unwrap();
        b.user_name("alice").unwrap();
        b.attr(attr::FILTER_ID, b"gold").unwrap();
        let req = CoaRequest::parse(&b.finish(SECRET).unwrap(), SECRET).unwrap();
        assert_eq!(req.kind, CoaKind::Coa);
        assert_eq!(req.attributes[1], (attr::FILTER_ID, b"gold".to_vec()));
        let nak = req
            .nak(Some(error_cause::SESSION_CONTEXT_NOT_FOUND), SECRET)
            .unwrap();
        let p = verify_response(&nak, &req.authenticator, SECRET).unwrap();
        assert_eq!(p.code(), code::COA_NAK);
        let cause = p.attr(attr::ERROR_CAUSE).unwrap();
        assert_eq!(cause, 503u32.to_be_bytes());
    }

    #[test]
    fn wrong_secret_or_tampering_rejected() {
        let pkt = disconnect();
        assert_eq!(
            CoaRequest::parse(&pkt, b"other").err(),
            Some(WireError::BadAuthenticator)
        );
        let mut t = pkt.clone();
        let last = t.len() - 1;
        t[last] ^= 1;
        assert_eq!(
            CoaRequest::parse(&t, SECRET).err(),
            Some(WireError::BadAuthenticator)
        );
        // An Access-Request is not a dynamic-authorization request.
        let ar = RadiusBuilder::access_request(1, [7; 16])
            .finish(SECRET)
            .unwrap();
        assert_eq!(
            CoaRequest::parse(&ar, SECRET).err(),
            Some(WireError::UnexpectedCode(1))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = CoaRequest::parse(&b, SECRET);
        }
    }
}
