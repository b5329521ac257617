//! Licence grants: the canonical payload, Ed25519 signing and verification, and the verdict
//! the operator writes to a Licence's status.
//!
//! The payload is a JSON array of the signed fields in a fixed order, with times as Unix
//! seconds and features sorted, so that two encodings of the same grant (YAML key order,
//! fractional seconds, feature order) sign the same bytes and no field can be moved into
//! another by quoting tricks. A plain `key=value` text was the alternative; JSON needs no
//! escaping rules of our own.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use k8s_openapi::jiff::Timestamp;

use crate::licence::{LicenceSource, LicenceSpec};

/// Sessions allowed without a valid licence.
pub const FREE_BASELINE_SESSIONS: u64 = 64;

const PAYLOAD_TAG: &str = "kbng.dev/licence/v1";
const SECS_PER_DAY: i64 = 86_400;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantError {
    #[error("{what} is not valid base64: {reason}")]
    Base64 { what: &'static str, reason: String },
    #[error("{what} must be {want} bytes, got {got}")]
    KeyLength {
        what: &'static str,
        want: usize,
        got: usize,
    },
    #[error("public key is not a valid Ed25519 point")]
    BadPublicKey,
    #[error("signature does not verify against the configured public key")]
    BadSignature,
}

/// Why a licence is, or is not, in force. The string forms go to `status.reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictReason {
    Verified,
    Malformed,
    BadSignature,
    NotYetValid,
    Expired,
}

impl VerdictReason {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictReason::Verified => "Verified",
            VerdictReason::Malformed => "Malformed",
            VerdictReason::BadSignature => "BadSignature",
            VerdictReason::NotYetValid => "NotYetValid",
            VerdictReason::Expired => "Expired",
        }
    }
}

/// The outcome of evaluating a licence at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub valid: bool,
    pub reason: VerdictReason,
    pub message: String,
    /// The cap in force: the licence's when valid, [`FREE_BASELINE_SESSIONS`] otherwise.
    pub max_sessions: u64,
    pub source: LicenceSource,
    pub expires_at: Timestamp,
    /// Whole days until expiry; only for a valid licence.
    pub days_remaining: Option<i64>,
    /// When the verdict changes by itself (becoming valid, or expiring), if ever.
    pub review_at: Option<Timestamp>,
}

/// The bytes a licence's signature covers.
pub fn canonical_payload(spec: &LicenceSpec) -> Vec<u8> {
    let mut features: Vec<&str> = spec.features.iter().map(String::as_str).collect();
    features.sort_unstable();
    features.dedup();
    let fields = (
        PAYLOAD_TAG,
        &spec.customer,
        &spec.licence_id,
        spec.max_sessions,
        spec.not_before.0.as_second(),
        spec.not_after.0.as_second(),
        features,
    );
    serde_json::to_vec(&fields).expect("a tuple of strings and integers always serialises")
}

/// Signs `spec` (its `signature` field is ignored) and returns the base64 signature.
pub fn sign(spec: &LicenceSpec, key: &SigningKey) -> String {
    B64.encode(key.sign(&canonical_payload(spec)).to_bytes())
}

/// Checks the signature of `spec` against `key`.
pub fn verify(spec: &LicenceSpec, key: &VerifyingKey) -> Result<(), GrantError> {
    let raw = decode("signature", &spec.signature)?;
    let bytes: [u8; 64] = raw
        .as_slice()
        .try_into()
        .map_err(|_| GrantError::KeyLength {
            what: "signature",
            want: 64,
            got: raw.len(),
        })?;
    key.verify(&canonical_payload(spec), &Signature::from_bytes(&bytes))
        .map_err(|_| GrantError::BadSignature)
}

/// Evaluates a licence at `now`: signature first, then the validity window.
pub fn evaluate(spec: &LicenceSpec, key: &VerifyingKey, now: Timestamp) -> Verdict {
    let not_before = spec.not_before.0;
    let not_after = spec.not_after.0;
    let fallback = |reason: VerdictReason, message: String, review_at| Verdict {
        valid: false,
        reason,
        message,
        max_sessions: FREE_BASELINE_SESSIONS,
        source: LicenceSource::FreeBaseline,
        expires_at: not_after,
        days_remaining: None,
        review_at,
    };
    if let Err(err) = verify(spec, key) {
        let reason = match err {
            GrantError::BadSignature => VerdictReason::BadSignature,
            _ => VerdictReason::Malformed,
        };
        return fallback(reason, err.to_string(), None);
    }
    if not_after <= not_before {
        return fallback(
            VerdictReason::Malformed,
            "notAfter is not later than notBefore".into(),
            None,
        );
    }
    if now < not_before {
        return fallback(
            VerdictReason::NotYetValid,
            format!("valid from {not_before}"),
            Some(not_before),
        );
    }
    if now >= not_after {
        return fallback(
            VerdictReason::Expired,
            format!("expired at {not_after}"),
            None,
        );
    }
    let left_secs = not_after.as_second() - now.as_second();
    Verdict {
        valid: true,
        reason: VerdictReason::Verified,
        message: format!(
            "signed grant for {} ({}), {} sessions",
            spec.customer, spec.licence_id, spec.max_sessions
        ),
        max_sessions: spec.max_sessions,
        source: LicenceSource::Licence,
        expires_at: not_after,
        days_remaining: Some(left_secs / SECS_PER_DAY),
        review_at: Some(not_after),
    }
}

/// A verifying key from the base64 of its 32 bytes (the chart's `licence.publicKey`).
pub fn public_key_from_base64(text: &str) -> Result<VerifyingKey, GrantError> {
    let raw = decode("public key", text)?;
    let bytes: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| GrantError::KeyLength {
            what: "public key",
            want: 32,
            got: raw.len(),
        })?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| GrantError::BadPublicKey)
}

/// A signing key from the base64 of its 32-byte seed.
pub fn signing_key_from_base64(text: &str) -> Result<SigningKey, GrantError> {
    let raw = decode("signing key", text)?;
    let bytes: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| GrantError::KeyLength {
            what: "signing key",
            want: 32,
            got: raw.len(),
        })?;
    Ok(SigningKey::from_bytes(&bytes))
}

/// The base64 forms of a key pair: (signing seed, public key).
pub fn encode_key_pair(key: &SigningKey) -> (String, String) {
    (
        B64.encode(key.to_bytes()),
        B64.encode(key.verifying_key().to_bytes()),
    )
}

fn decode(what: &'static str, text: &str) -> Result<Vec<u8>, GrantError> {
    B64.decode(text.trim()).map_err(|e| GrantError::Base64 {
        what,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests;
