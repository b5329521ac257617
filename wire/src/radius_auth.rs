//! RADIUS authenticators and attribute hiding.
//!
//! - User-Password hiding, RFC 2865 §5.2; the CHAP response of
//!   CHAP-Password, RFC 2865 §5.3.
//! - Response Authenticator, RFC 2865 §3: MD5(Code|Identifier|Length|
//!   RequestAuth|Attributes|Secret); also used for Accounting-Response and
//!   CoA/Disconnect ACK/NAK (RFC 2866 §3, RFC 5176 §2.3).
//! - Request Authenticator of Accounting-Request, RFC 2866 §3 (the same
//!   digest with 16 zero octets in place of RequestAuth); also used by
//!   CoA-Request and Disconnect-Request (RFC 5176 §2.3).
//! - Message-Authenticator, RFC 3579 §3.2: HMAC-MD5 keyed with the secret
//!   over the packet with the attribute's value zeroed, where the
//!   authenticator field holds the Request Authenticator (Access-Request,
//!   and responses, which use the request's), or zeros for
//!   Accounting/CoA/Disconnect requests (RFC 5176 §3.1, as FreeRADIUS does).
//!
//! Comparisons of received authenticators are constant-time.

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};

use crate::error::WireError;
use crate::radius::{RADIUS_HEADER_LEN, RadiusPacket, attr, code};

/// Longest User-Password (RFC 2865 §5.2).
pub const MAX_PASSWORD_LEN: usize = 128;

/// Hide a User-Password (RFC 2865 §5.2): pad to a multiple of 16 with NULs,
/// then `c(i) = p(i) xor MD5(S + c(i-1))` with `c(0)` the Request
/// Authenticator.
pub fn hide_user_password(
    password: &[u8],
    secret: &[u8],
    request_auth: &[u8; 16],
) -> Result<Vec<u8>, WireError> {
    if password.len() > MAX_PASSWORD_LEN {
        return Err(WireError::TooLong {
            what: "User-Password",
            len: password.len(),
            max: MAX_PASSWORD_LEN,
        });
    }
    let padded = password.len().div_ceil(16).max(1) * 16;
    let mut out = password.to_vec();
    out.resize(padded, 0);
    let mut prev: [u8; 16] = *request_auth;
    for chunk in out.chunks_exact_mut(16) {
        let b = Md5::new()
            .chain_update(secret)
            .chain_update(prev)
            .finalize();
        chunk.iter_mut().zip(b.iter()).for_each(|(c, k)| *c ^= k);
        prev.copy_from_slice(chunk);
    }
    Ok(out)
}

/// Reverse [`hide_user_password`], dropping trailing NUL padding.
pub fn unhide_user_password(
    hidden: &[u8],
    secret: &[u8],
    request_auth: &[u8; 16],
) -> Result<Vec<u8>, WireError> {
    if hidden.is_empty() || !hidden.len().is_multiple_of(16) || hidden.len() > MAX_PASSWORD_LEN {
        return Err(WireError::BadAttribute {
            kind: attr::USER_PASSWORD,
        });
    }
    let mut out = Vec::with_capacity(hidden.len());
    let mut prev: &[u8] = request_auth;
    for chunk in hidden.chunks_exact(16) {
        let b = Md5::new()
            .chain_update(secret)
            .chain_update(prev)
            .finalize();
        out.extend(chunk.iter().zip(b.iter()).map(|(c, k)| c ^ k));
        prev = chunk;
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    Ok(out)
}

/// The CHAP response (RFC 1994 §4.1, carried per RFC 2865 §5.3):
/// MD5(Identifier | secret | Challenge), where the CHAP secret is the
/// subscriber's password, not the RADIUS shared secret.
pub fn chap_response(ident: u8, password: &[u8], challenge: &[u8]) -> [u8; 16] {
    Md5::new()
        .chain_update([ident])
        .chain_update(password)
        .chain_update(challenge)
        .finalize()
        .into()
}

/// MD5(Code|Identifier|Length|`auth`|Attributes|Secret) over `packet`
/// (its own authenticator field is replaced by `auth`).
pub fn packet_digest(packet: &[u8], auth: &[u8; 16], secret: &[u8]) -> [u8; 16] {
    let (head, attrs) = packet.split_at(RADIUS_HEADER_LEN.min(packet.len()));
    let d = Md5::new()
        .chain_update(&head[..4.min(head.len())])
        .chain_update(auth)
        .chain_update(attrs)
        .chain_update(secret)
        .finalize();
    d.into()
}

/// Is this code authenticated like an Accounting-Request (zeros in place of
/// a random Request Authenticator)?
pub const fn is_accounting_style_request(c: u8) -> bool {
    matches!(
        c,
        code::ACCOUNTING_REQUEST | code::COA_REQUEST | code::DISCONNECT_REQUEST
    )
}

/// Offset of the Message-Authenticator value in `packet`, if present.
pub(crate) fn message_authenticator_offset(packet: &[u8]) -> Result<Option<usize>, WireError> {
    let p = RadiusPacket::new_checked(packet)?;
    let mut at = RADIUS_HEADER_LEN;
    for a in p.attributes() {
        let a = a?;
        if a.kind == attr::MESSAGE_AUTHENTICATOR {
            if a.value.len() != 16 {
                return Err(WireError::BadAttribute { kind: a.kind });
            }
            return Ok(Some(at + 2));
        }
        at += 2 + a.value.len();
    }
    Ok(None)
}

/// HMAC-MD5 of `packet` with the authenticator field set to `auth` and the
/// Message-Authenticator value at `ma_at` zeroed (RFC 3579 §3.2).
pub(crate) fn hmac_md5(packet: &[u8], auth: &[u8; 16], ma_at: usize, secret: &[u8]) -> [u8; 16] {
    let mut mac =
        <Hmac<Md5> as Mac>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(&packet[..4]);
    mac.update(auth);
    mac.update(&packet[RADIUS_HEADER_LEN..ma_at]);
    mac.update(&[0u8; 16]);
    mac.update(&packet[ma_at + 16..]);
    mac.finalize().into_bytes().into()
}

/// Verify the Message-Authenticator of `packet` if it has one; `auth` is
/// what the authenticator field held when it was computed (see the module
/// docs). Returns whether the attribute was present.
pub fn verify_message_authenticator(
    packet: &[u8],
    auth: &[u8; 16],
    secret: &[u8],
) -> Result<bool, WireError> {
    let p = RadiusPacket::new_checked(packet)?;
    let bytes = p.as_bytes();
    let Some(at) = message_authenticator_offset(bytes)? else {
        return Ok(false);
    };
    let mut got = [0u8; 16];
    got.copy_from_slice(&bytes[at..at + 16]);
    if ct_eq(&hmac_md5(bytes, auth, at, secret), &got) {
        Ok(true)
    } else {
        Err(WireError::BadAuthenticator)
    }
}

fn ct_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Verify a response (Access-Accept/Reject/Challenge, Accounting-Response,
/// CoA/Disconnect ACK/NAK) to a request whose authenticator was
/// `request_auth`: the Response Authenticator (RFC 2865 §3) and, if present,
/// the Message-Authenticator. Identifier matching is the caller's job.
pub fn verify_response<'a>(
    response: &'a [u8],
    request_auth: &[u8; 16],
    secret: &[u8],
) -> Result<RadiusPacket<&'a [u8]>, WireError> {
    let p = RadiusPacket::new_checked(response)?;
    p.validate_attributes()?;
    if !ct_eq(
        &packet_digest(p.as_bytes(), request_auth, secret),
        &p.authenticator(),
    ) {
        return Err(WireError::BadAuthenticator);
    }
    verify_message_authenticator(p.as_bytes(), request_auth, secret)?;
    Ok(p)
}

/// Verify an Accounting-Request, CoA-Request or Disconnect-Request: its
/// Request Authenticator (RFC 2866 §3, RFC 5176 §2.3) and, if present, its
/// Message-Authenticator.
pub fn verify_accounting_style_request<'a>(
    request: &'a [u8],
    secret: &[u8],
) -> Result<RadiusPacket<&'a [u8]>, WireError> {
    let p = RadiusPacket::new_checked(request)?;
    if !is_accounting_style_request(p.code()) {
        return Err(WireError::UnexpectedCode(p.code()));
    }
    p.validate_attributes()?;
    if !ct_eq(
        &packet_digest(p.as_bytes(), &[0; 16], secret),
        &p.authenticator(),
    ) {
        return Err(WireError::BadAuthenticator);
    }
    verify_message_authenticator(p.as_bytes(), &[0; 16], secret)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"xyzzy5461";
    const RA: [u8; 16] = [
        0x0f, 0x40, 0x3f, 0x94, 0x73, 0x97, 0x80, 0x57, 0xbd, 0x83, 0xd5, 0xcb, 0x98, 0xf4, 0x22,
        0x7a,
    ];

    #[test]
    fn rfc2865_example_password() {
        let hidden = hide_user_password(b"arctangent", SECRET, &RA).unwrap();
        assert_eq!(
            hidden,
            [
                0x0d, 0xbe, 0x70, 0x8d, 0x93, 0xd4, 0x13, 0xce, 0x31, 0x96, 0xe4, 0x3f, 0x78, 0x2a,
                0x0a, 0xee
            ]
        );
        assert_eq!(
            unhide_user_password(&hidden, SECRET, &RA).unwrap(),
            b"arctangent"
        );
    }

    #[test]
    fn long_password_chains_blocks() {
        let pw = [b'x'; 40];
        let hidden = hide_user_password(&pw, SECRET, &RA).unwrap();
        assert_eq!(hidden.len(), 48);
        assert_eq!(unhide_user_password(&hidden, SECRET, &RA).unwrap(), pw);
        assert!(hide_user_password(&[b'x'; 129], SECRET, &RA).is_err());
        assert!(unhide_user_password(&hidden[..47], SECRET, &RA).is_err());
    }

    #[test]
    fn rfc2865_example_accept_verifies() {
        // RFC 2865 §7.1 Access-Accept: Service-Type Framed, Framed-Protocol
        // PPP, Framed-IP-Address 192.168.1.3.
        let accept = [
            0x02, 0x00, 0x00, 0x26, 0x86, 0xfe, 0x22, 0x0e, 0x76, 0x24, 0xba, 0x2a, 0x10, 0x05,
            0xf6, 0xbf, 0x9b, 0x55, 0xe0, 0xb2, 0x06, 0x06, 0x00, 0x00, 0x00, 0x01, 0x0f, 0x06,
            0x00, 0x00, 0x00, 0x00, 0x0e, 0x06, 0xc0, 0xa8, 0x01, 0x03,
        ];
        let p = verify_response(&accept, &RA, SECRET).unwrap();
        assert_eq!(p.code(), code::ACCESS_ACCEPT);
        assert_eq!(
            verify_response(&accept, &RA, b"wrong").err(),
            Some(WireError::BadAuthenticator)
        );
        let mut tampered = accept;
        tampered[37] = 4;
        assert_eq!(
            verify_response(&tampered, &RA, SECRET).err(),
            Some(WireError::BadAuthenticator)
        );
    }
}
