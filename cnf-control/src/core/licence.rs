//! Licence cap and admission: at most `cap` sessions are active; known subscribers beyond it are
//! admitted captive and wait in arrival order; when capacity frees (a release, a raised cap) the
//! oldest waiting ones are promoted.
//!
//! Lowering the cap never demotes a session that is already active: it only stops admissions
//! until the count falls below the new cap (an operator lowering a licence should not cut
//! subscribers off mid-session).
//!
//! The cap itself comes from a signed grant ([`grant_cap`]: Ed25519, verified here with the
//! same code the operator uses), from a file holding an evaluated cap, or is the free baseline.
//! Whatever applies, [`Cap::report`] says truly where it came from and why.

use std::collections::{BTreeSet, VecDeque};

use ed25519_dalek::VerifyingKey;
use k8s_openapi::jiff::Timestamp;
use kbng_crds::LicenceSpec;
use kbng_crds::grant::{self, FREE_BASELINE_SESSIONS};
use serde::Serialize;

use super::{FastSet, SessionId};

const NS_PER_SEC: u64 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;

/// Where the cap came from, reported truly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum CapSource {
    /// A verified licence grant, in its validity window.
    #[serde(rename_all = "camelCase")]
    Licence {
        licence_id: String,
        expires_unix_secs: i64,
    },
    /// No valid licence: the free baseline.
    FreeBaseline { reason: String },
    /// A licence grant was configured but is not in force (forged, expired, not yet valid,
    /// malformed): the free baseline applies.
    #[serde(rename_all = "camelCase")]
    Refused {
        licence_id: String,
        /// `BadSignature`, `Expired`, `NotYetValid` or `Malformed` (as the operator's status).
        reason: String,
        message: String,
        expires_unix_secs: i64,
    },
    /// A file holding the evaluated cap (written by the operator from the Licence status).
    File { path: String },
}

/// Cap and source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cap {
    pub max_sessions: u64,
    pub source: CapSource,
}

/// The licence as `/v1/status` and `kbngctl licence status` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LicenceReport {
    pub cap: u64,
    /// `licence`, `free-baseline` or `file`.
    pub source: &'static str,
    /// A verified grant in its validity window is in force.
    pub valid: bool,
    /// `Verified`, `BadSignature`, `Expired`, `NotYetValid`, `Malformed`, `NoLicence` or
    /// `CapFile`.
    pub reason: String,
    pub message: String,
    pub licence_id: Option<String>,
    /// RFC 3339.
    pub expires: Option<String>,
    /// Whole days left; only while a licence is in force.
    pub days_remaining: Option<i64>,
}

fn rfc3339(secs: i64) -> Option<String> {
    Timestamp::from_second(secs).ok().map(|t| t.to_string())
}

impl Cap {
    /// The free baseline, for `reason`.
    pub fn free_baseline(reason: impl Into<String>) -> Cap {
        Cap {
            max_sessions: FREE_BASELINE_SESSIONS,
            source: CapSource::FreeBaseline {
                reason: reason.into(),
            },
        }
    }

    /// How this cap reads to an operator at `now_ns`.
    pub fn report(&self, now_ns: u64) -> LicenceReport {
        let now_secs = (now_ns / NS_PER_SEC) as i64;
        let base = LicenceReport {
            cap: self.max_sessions,
            source: "free-baseline",
            valid: false,
            reason: String::new(),
            message: String::new(),
            licence_id: None,
            expires: None,
            days_remaining: None,
        };
        match &self.source {
            CapSource::Licence {
                licence_id,
                expires_unix_secs,
            } => LicenceReport {
                source: "licence",
                valid: true,
                reason: "Verified".into(),
                message: format!("licence {licence_id} verified"),
                licence_id: Some(licence_id.clone()),
                expires: rfc3339(*expires_unix_secs),
                days_remaining: Some((expires_unix_secs - now_secs).max(0) / SECS_PER_DAY),
                ..base
            },
            CapSource::FreeBaseline { reason } => LicenceReport {
                reason: "NoLicence".into(),
                message: reason.clone(),
                ..base
            },
            CapSource::Refused {
                licence_id,
                reason,
                message,
                expires_unix_secs,
            } => LicenceReport {
                reason: reason.clone(),
                message: message.clone(),
                licence_id: Some(licence_id.clone()),
                expires: rfc3339(*expires_unix_secs),
                ..base
            },
            CapSource::File { path } => LicenceReport {
                source: "file",
                valid: true,
                reason: "CapFile".into(),
                message: format!("evaluated cap read from {path}"),
                ..base
            },
        }
    }
}

/// The cap a signed grant gives at `now_ns`. `spec` and `key` are what the adapter could read
/// (or why it could not); either failing leaves the free baseline with that reason.
pub fn grant_cap(
    spec: Result<&LicenceSpec, &str>,
    key: Result<&VerifyingKey, &str>,
    now_ns: u64,
) -> Cap {
    let key = match key {
        Ok(k) => k,
        Err(why) => return Cap::free_baseline(format!("licence public key: {why}")),
    };
    let spec = match spec {
        Ok(s) => s,
        Err(why) => return Cap::free_baseline(format!("licence file: {why}")),
    };
    let now = Timestamp::from_second((now_ns / NS_PER_SEC) as i64).unwrap_or(Timestamp::UNIX_EPOCH);
    let v = grant::evaluate(spec, key, now);
    let expires_unix_secs = v.expires_at.as_second();
    if v.valid {
        Cap {
            max_sessions: v.max_sessions,
            source: CapSource::Licence {
                licence_id: spec.licence_id.clone(),
                expires_unix_secs,
            },
        }
    } else {
        Cap {
            max_sessions: v.max_sessions,
            source: CapSource::Refused {
                licence_id: spec.licence_id.clone(),
                reason: v.reason.as_str().into(),
                message: v.message,
                expires_unix_secs,
            },
        }
    }
}

/// Admission decision for a known subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Active,
    /// Over the cap; waiting for promotion.
    Captive,
}

/// The admission ledger.
#[derive(Debug, Clone)]
pub struct Admission {
    cap: Cap,
    pub(super) active: FastSet<SessionId>,
    /// Waiting known subscribers, oldest first. Lazy deletion via `waiting_set`.
    queue: VecDeque<SessionId>,
    waiting_set: BTreeSet<SessionId>,
}

impl Admission {
    pub fn new(cap: Cap) -> Self {
        Admission {
            cap,
            active: FastSet::default(),
            queue: VecDeque::new(),
            waiting_set: BTreeSet::new(),
        }
    }

    pub fn cap(&self) -> &Cap {
        &self.cap
    }

    pub fn active(&self) -> usize {
        self.active.len()
    }

    pub fn waiting(&self) -> usize {
        self.waiting_set.len()
    }

    fn has_room(&self) -> bool {
        (self.active.len() as u64) < self.cap.max_sessions
    }

    /// Admit `id` (idempotent).
    pub fn admit(&mut self, id: SessionId) -> Admit {
        if self.active.contains(&id) {
            return Admit::Active;
        }
        if self.waiting_set.contains(&id) {
            return Admit::Captive;
        }
        if self.has_room() && self.waiting_set.is_empty() {
            self.active.insert(id);
            Admit::Active
        } else {
            self.queue.push_back(id);
            self.waiting_set.insert(id);
            Admit::Captive
        }
    }

    /// Room for `sessions` active sessions (no more than the cap admits) without rehashing.
    pub fn reserve(&mut self, sessions: usize) {
        let n = sessions.min(usize::try_from(self.cap.max_sessions).unwrap_or(usize::MAX));
        self.active.reserve(n.saturating_sub(self.active.len()));
    }

    /// Count `id` as active without checking the cap (restore of a persisted active session).
    pub fn restore_active(&mut self, id: SessionId) {
        self.active.insert(id);
    }

    /// Forget `id`; returns the sessions promoted into the freed capacity, oldest first.
    pub fn release(&mut self, id: SessionId) -> Vec<SessionId> {
        self.active.remove(&id);
        self.waiting_set.remove(&id);
        self.promote()
    }

    /// A new cap; returns the sessions promoted by a raise.
    pub fn set_cap(&mut self, cap: Cap) -> Vec<SessionId> {
        self.cap = cap;
        self.promote()
    }

    fn promote(&mut self) -> Vec<SessionId> {
        let mut out = Vec::new();
        while self.has_room() {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            if self.waiting_set.remove(&id) {
                self.active.insert(id);
                out.push(id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(n: u64) -> Cap {
        Cap {
            max_sessions: n,
            source: CapSource::FreeBaseline {
                reason: "test".into(),
            },
        }
    }

    #[test]
    fn cap_reached_then_promoted_in_order() {
        let mut a = Admission::new(cap(2));
        assert_eq!(a.admit(1), Admit::Active);
        assert_eq!(a.admit(2), Admit::Active);
        assert_eq!(a.admit(3), Admit::Captive);
        assert_eq!(a.admit(4), Admit::Captive);
        assert_eq!(a.admit(3), Admit::Captive, "idempotent");
        assert!(
            a.release(4).is_empty(),
            "a waiting one leaving frees nothing"
        );
        assert_eq!(a.admit(5), Admit::Captive);
        assert_eq!(a.release(1), vec![3]);
        assert_eq!(a.set_cap(cap(10)), vec![5]);
        assert_eq!((a.active(), a.waiting()), (3, 0));
    }

    #[test]
    fn lowering_the_cap_demotes_nobody() {
        let mut a = Admission::new(cap(3));
        for id in 1..=3 {
            a.admit(id);
        }
        assert!(a.set_cap(cap(1)).is_empty());
        assert_eq!(a.active(), 3);
        assert_eq!(a.admit(9), Admit::Captive);
        assert!(a.release(1).is_empty());
        assert!(a.release(2).is_empty());
        assert_eq!(a.release(3), vec![9], "room only once below the new cap");
    }

    mod grants {
        use super::super::*;
        use ed25519_dalek::SigningKey;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

        const DAY_NS: u64 = 86_400 * NS_PER_SEC;
        /// 2026-01-01T00:00:00Z.
        const START_SECS: i64 = 1_767_225_600;

        fn spec(key: &SigningKey, days: i64) -> LicenceSpec {
            let mut s = LicenceSpec {
                customer: "Lab".into(),
                licence_id: "L-7".into(),
                max_sessions: 500,
                not_before: Time(Timestamp::from_second(START_SECS).unwrap()),
                not_after: Time(Timestamp::from_second(START_SECS + days * 86_400).unwrap()),
                features: vec![],
                signature: String::new(),
            };
            s.signature = grant::sign(&s, key);
            s
        }

        fn at_day(d: u64) -> u64 {
            START_SECS as u64 * NS_PER_SEC + d * DAY_NS
        }

        fn vendor() -> SigningKey {
            SigningKey::from_bytes(&[7; 32])
        }

        #[test]
        fn valid_grant_gives_its_cap_and_days_left() {
            let k = vendor();
            let cap = grant_cap(Ok(&spec(&k, 30)), Ok(&k.verifying_key()), at_day(10));
            assert_eq!(cap.max_sessions, 500);
            let r = cap.report(at_day(10));
            assert_eq!(
                (r.source, r.valid, r.reason.as_str()),
                ("licence", true, "Verified")
            );
            assert_eq!(r.days_remaining, Some(20));
            assert_eq!(r.expires.as_deref(), Some("2026-01-31T00:00:00Z"));
            assert_eq!(r.licence_id.as_deref(), Some("L-7"));
        }

        #[test]
        fn forged_grant_is_the_free_baseline() {
            let forger = SigningKey::from_bytes(&[9; 32]);
            let cap = grant_cap(
                Ok(&spec(&forger, 30)),
                Ok(&vendor().verifying_key()),
                at_day(1),
            );
            assert_eq!(cap.max_sessions, FREE_BASELINE_SESSIONS);
            let r = cap.report(at_day(1));
            assert_eq!(
                (r.source, r.valid, r.reason.as_str()),
                ("free-baseline", false, "BadSignature")
            );
            assert_eq!(r.days_remaining, None);
        }

        #[test]
        fn a_cap_raised_without_resigning_is_refused() {
            let k = vendor();
            let mut s = spec(&k, 30);
            s.max_sessions = 1_000_000;
            let cap = grant_cap(Ok(&s), Ok(&k.verifying_key()), at_day(1));
            assert_eq!(cap.max_sessions, FREE_BASELINE_SESSIONS);
            assert_eq!(cap.report(at_day(1)).reason, "BadSignature");
        }

        #[test]
        fn expired_and_not_yet_valid_grants_say_so() {
            let k = vendor();
            let s = spec(&k, 30);
            let expired = grant_cap(Ok(&s), Ok(&k.verifying_key()), at_day(30));
            assert_eq!(expired.max_sessions, FREE_BASELINE_SESSIONS);
            let r = expired.report(at_day(30));
            assert_eq!((r.source, r.reason.as_str()), ("free-baseline", "Expired"));
            assert_eq!(r.expires.as_deref(), Some("2026-01-31T00:00:00Z"));
            let early = grant_cap(Ok(&s), Ok(&k.verifying_key()), at_day(0) - NS_PER_SEC);
            assert_eq!(early.max_sessions, FREE_BASELINE_SESSIONS);
            assert_eq!(early.report(0).reason, "NotYetValid");
            // The last second before expiry is still licensed.
            let last = grant_cap(Ok(&s), Ok(&k.verifying_key()), at_day(30) - NS_PER_SEC);
            assert_eq!(last.max_sessions, 500);
            assert_eq!(last.report(at_day(30) - NS_PER_SEC).days_remaining, Some(0));
        }

        #[test]
        fn malformed_signature_unreadable_file_and_bad_key_fall_back_with_the_reason() {
            let k = vendor();
            let mut s = spec(&k, 30);
            s.signature = "not base64!".into();
            let r = grant_cap(Ok(&s), Ok(&k.verifying_key()), at_day(1)).report(at_day(1));
            assert_eq!((r.valid, r.reason.as_str()), (false, "Malformed"));
            let r =
                grant_cap(Err("no such file"), Ok(&k.verifying_key()), at_day(1)).report(at_day(1));
            assert_eq!(
                (r.source, r.reason.as_str()),
                ("free-baseline", "NoLicence")
            );
            assert!(r.message.contains("no such file"), "{}", r.message);
            let r = grant_cap(Ok(&s), Err("32 bytes wanted"), at_day(1)).report(at_day(1));
            assert!(r.message.contains("public key"), "{}", r.message);
            assert_eq!(r.cap, FREE_BASELINE_SESSIONS);
        }
    }
}
