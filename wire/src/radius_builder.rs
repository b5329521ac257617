//! Building RADIUS packets with the right authenticators.
//!
//! One builder for every code; [`RadiusBuilder::finish`] picks the
//! authenticator rule from the code (see [`crate::radius_auth`]) and fills
//! the Message-Authenticator first when one was asked for, since the MD5
//! authenticators cover it. The builder does not invent randomness: the
//! caller supplies an unpredictable Request Authenticator for
//! Access-Request (RFC 2865 §3).

use std::net::Ipv4Addr;

use crate::error::WireError;
use crate::radius::{RADIUS_HEADER_LEN, RADIUS_MAX_LEN, RadiusPacket, attr, code};
use crate::radius_auth::{
    chap_response, hide_user_password, hmac_md5, is_accounting_style_request, packet_digest,
};

/// How the authenticator field is computed in [`RadiusBuilder::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuthRule {
    /// Access-Request / Status-Server: the given random value.
    Random([u8; 16]),
    /// Accounting/CoA/Disconnect request: MD5 over zeros (RFC 2866 §3).
    Accounting,
    /// Any response: MD5 over the request's authenticator (RFC 2865 §3).
    Response([u8; 16]),
}

/// A RADIUS packet under construction.
#[derive(Debug, Clone)]
pub struct RadiusBuilder {
    code: u8,
    identifier: u8,
    rule: AuthRule,
    attrs: Vec<u8>,
    /// Offset in `attrs` of the Message-Authenticator value.
    message_auth_at: Option<usize>,
}

impl RadiusBuilder {
    /// An Access-Request with Request Authenticator `request_auth`, which
    /// must be unpredictable and unique per secret (RFC 2865 §3).
    pub fn access_request(identifier: u8, request_auth: [u8; 16]) -> Self {
        Self::with_rule(
            code::ACCESS_REQUEST,
            identifier,
            AuthRule::Random(request_auth),
        )
    }

    /// An Accounting-Request (RFC 2866 §4.1).
    pub fn accounting_request(identifier: u8) -> Self {
        Self::with_rule(code::ACCOUNTING_REQUEST, identifier, AuthRule::Accounting)
    }

    /// A CoA-Request or Disconnect-Request (RFC 5176 §2.3); other codes are
    /// refused.
    pub fn dynamic_authorization_request(req_code: u8, identifier: u8) -> Result<Self, WireError> {
        if !matches!(req_code, code::COA_REQUEST | code::DISCONNECT_REQUEST) {
            return Err(WireError::UnexpectedCode(req_code));
        }
        Ok(Self::with_rule(req_code, identifier, AuthRule::Accounting))
    }

    /// A response with `resp_code` to `request` (same identifier, Response
    /// Authenticator over the request's authenticator).
    pub fn response<T: AsRef<[u8]>>(resp_code: u8, request: &RadiusPacket<T>) -> Self {
        Self::with_rule(
            resp_code,
            request.identifier(),
            AuthRule::Response(request.authenticator()),
        )
    }

    fn with_rule(code: u8, identifier: u8, rule: AuthRule) -> Self {
        RadiusBuilder {
            code,
            identifier,
            rule,
            attrs: Vec::new(),
            message_auth_at: None,
        }
    }

    /// Append a raw attribute (value at most 253 bytes).
    pub fn attr(&mut self, kind: u8, value: &[u8]) -> Result<&mut Self, WireError> {
        let len = u8::try_from(value.len() + 2).map_err(|_| WireError::TooLong {
            what: "radius attribute",
            len: value.len(),
            max: 253,
        })?;
        let total = RADIUS_HEADER_LEN + self.attrs.len() + usize::from(len);
        if total > RADIUS_MAX_LEN {
            return Err(WireError::TooLong {
                what: "radius packet",
                len: total,
                max: RADIUS_MAX_LEN,
            });
        }
        self.attrs.push(kind);
        self.attrs.push(len);
        self.attrs.extend_from_slice(value);
        Ok(self)
    }

    /// Append an integer attribute.
    pub fn attr_u32(&mut self, kind: u8, value: u32) -> Result<&mut Self, WireError> {
        self.attr(kind, &value.to_be_bytes())
    }

    /// Append an address attribute.
    pub fn attr_ipv4(&mut self, kind: u8, value: Ipv4Addr) -> Result<&mut Self, WireError> {
        self.attr(kind, &value.octets())
    }

    /// User-Name (1).
    pub fn user_name(&mut self, name: &str) -> Result<&mut Self, WireError> {
        self.attr(attr::USER_NAME, name.as_bytes())
    }

    /// User-Password (2), hidden per RFC 2865 §5.2. Only for Access-Request.
    pub fn user_password(
        &mut self,
        password: &[u8],
        secret: &[u8],
    ) -> Result<&mut Self, WireError> {
        let AuthRule::Random(ra) = self.rule else {
            return Err(WireError::UnexpectedCode(self.code));
        };
        let hidden = hide_user_password(password, secret, &ra)?;
        self.attr(attr::USER_PASSWORD, &hidden)
    }

    /// CHAP-Password (3) and CHAP-Challenge (60) for `password` (RFC 2865
    /// §5.3, §5.40), instead of a User-Password. The challenge is the Request
    /// Authenticator, unpredictable by the rule of [`Self::access_request`];
    /// it is sent as CHAP-Challenge too, so no server need know the shortcut
    /// of §5.3. The CHAP identifier is the packet's. Only for Access-Request.
    pub fn chap_password(&mut self, password: &[u8]) -> Result<&mut Self, WireError> {
        let AuthRule::Random(ra) = self.rule else {
            return Err(WireError::UnexpectedCode(self.code));
        };
        let mut v = [0u8; 17];
        v[0] = self.identifier;
        v[1..].copy_from_slice(&chap_response(self.identifier, password, &ra));
        self.attr(attr::CHAP_PASSWORD, &v)?;
        self.attr(attr::CHAP_CHALLENGE, &ra)
    }

    /// NAS-IP-Address (4).
    pub fn nas_ip_address(&mut self, ip: Ipv4Addr) -> Result<&mut Self, WireError> {
        self.attr_ipv4(attr::NAS_IP_ADDRESS, ip)
    }

    /// NAS-Identifier (32).
    pub fn nas_identifier(&mut self, id: &str) -> Result<&mut Self, WireError> {
        self.attr(attr::NAS_IDENTIFIER, id.as_bytes())
    }

    /// A 64-bit counter as the 32-bit attribute `low` and, when it wrapped, its
    /// gigawords attribute `high` (RFC 2869 §5.1, §5.2).
    pub fn counter64(&mut self, low: u8, high: u8, value: u64) -> Result<&mut Self, WireError> {
        let wraps = u32::try_from(value >> 32).unwrap_or(u32::MAX);
        if wraps > 0 {
            self.attr_u32(high, wraps)?;
        }
        // Truncation to the low 32 bits is the encoding.
        self.attr_u32(low, value as u32)
    }

    /// NAS-Port-Id (87), e.g. the access interface and VLANs.
    pub fn nas_port_id(&mut self, id: &str) -> Result<&mut Self, WireError> {
        self.attr(attr::NAS_PORT_ID, id.as_bytes())
    }

    /// Calling-Station-Id (31), e.g. the client MAC or option 82 remote-id.
    pub fn calling_station_id(&mut self, id: &str) -> Result<&mut Self, WireError> {
        self.attr(attr::CALLING_STATION_ID, id.as_bytes())
    }

    /// Framed-IP-Address (8).
    pub fn framed_ip_address(&mut self, ip: Ipv4Addr) -> Result<&mut Self, WireError> {
        self.attr_ipv4(attr::FRAMED_IP_ADDRESS, ip)
    }

    /// Acct-Session-Id (44).
    pub fn acct_session_id(&mut self, id: &str) -> Result<&mut Self, WireError> {
        self.attr(attr::ACCT_SESSION_ID, id.as_bytes())
    }

    /// Acct-Status-Type (40): 1 Start, 2 Stop, 3 Interim-Update.
    pub fn acct_status_type(&mut self, status: u32) -> Result<&mut Self, WireError> {
        self.attr_u32(attr::ACCT_STATUS_TYPE, status)
    }

    /// Error-Cause (101), for CoA/Disconnect NAKs (RFC 5176 §3.5).
    pub fn error_cause(&mut self, cause: u32) -> Result<&mut Self, WireError> {
        self.attr_u32(attr::ERROR_CAUSE, cause)
    }

    /// Vendor-Specific (26) holding one sub-attribute in the RFC 2865 §5.26
    /// layout: vendor id, vendor type, vendor length, value.
    pub fn vendor_specific(
        &mut self,
        vendor_id: u32,
        vendor_type: u8,
        value: &[u8],
    ) -> Result<&mut Self, WireError> {
        let vlen = u8::try_from(value.len() + 2)
            .ok()
            .filter(|l| *l <= 247)
            .ok_or(WireError::TooLong {
                what: "vendor attribute",
                len: value.len(),
                max: 245,
            })?;
        let mut v = Vec::with_capacity(value.len() + 6);
        v.extend_from_slice(&vendor_id.to_be_bytes());
        v.push(vendor_type);
        v.push(vlen);
        v.extend_from_slice(value);
        self.attr(attr::VENDOR_SPECIFIC, &v)
    }

    /// Add a Message-Authenticator (80), computed in [`Self::finish`]. Add
    /// it to every Access-Request (BlastRADIUS, CVE-2024-3596). Idempotent.
    pub fn message_authenticator(&mut self) -> Result<&mut Self, WireError> {
        if self.message_auth_at.is_none() {
            self.attr(attr::MESSAGE_AUTHENTICATOR, &[0; 16])?;
            self.message_auth_at = Some(self.attrs.len() - 16);
        }
        Ok(self)
    }

    /// The finished packet with its authenticator (and
    /// Message-Authenticator, if added) computed with `secret`.
    pub fn finish(&self, secret: &[u8]) -> Result<Vec<u8>, WireError> {
        let len = RADIUS_HEADER_LEN + self.attrs.len();
        let len16 = u16::try_from(len).map_err(|_| WireError::TooLong {
            what: "radius packet",
            len,
            max: RADIUS_MAX_LEN,
        })?;
        if is_accounting_style_request(self.code) != (self.rule == AuthRule::Accounting) {
            return Err(WireError::UnexpectedCode(self.code));
        }
        let mut p = Vec::with_capacity(len);
        p.push(self.code);
        p.push(self.identifier);
        p.extend_from_slice(&len16.to_be_bytes());
        let field = match self.rule {
            AuthRule::Random(a) | AuthRule::Response(a) => a,
            AuthRule::Accounting => [0; 16],
        };
        p.extend_from_slice(&field);
        p.extend_from_slice(&self.attrs);
        if let Some(at) = self.message_auth_at {
            let at = RADIUS_HEADER_LEN + at;
            let mac = hmac_md5(&p, &field, at, secret);
            p[at..at + 16].copy_from_slice(&mac);
        }
        let auth = match self.rule {
            AuthRule::Random(a) => a,
            AuthRule::Accounting | AuthRule::Response(_) => packet_digest(&p, &field, secret),
        };
        p[4..20].copy_from_slice(&auth);
        Ok(p)
    }
}

#[cfg(test)]
#[path = "radius_builder_tests.rs"]
mod tests;
