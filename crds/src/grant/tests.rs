use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

const DAY: i64 = SECS_PER_DAY;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

fn spec(not_before: i64, not_after: i64) -> LicenceSpec {
    LicenceSpec {
        customer: "Example Telco".into(),
        licence_id: "LIC-0001".into(),
        max_sessions: 10_000,
        not_before: Time(ts(not_before)),
        not_after: Time(ts(not_after)),
        features: vec!["radius".into(), "qinq".into()],
        signature: String::new(),
    }
}

fn signed(not_before: i64, not_after: i64, by: &SigningKey) -> LicenceSpec {
    let mut s = spec(not_before, not_after);
    s.signature = sign(&s, by);
    s
}

const NOW: i64 = 1_800_000_000;

#[test]
fn valid_licence_is_in_force() {
    let k = key(1);
    let v = evaluate(
        &signed(NOW - DAY, NOW + 30 * DAY + 5, &k),
        &k.verifying_key(),
        ts(NOW),
    );
    assert!(v.valid);
    assert_eq!(v.reason, VerdictReason::Verified);
    assert_eq!(v.source, LicenceSource::Licence);
    assert_eq!(v.max_sessions, 10_000);
    assert_eq!(v.days_remaining, Some(30));
    assert_eq!(v.review_at, Some(ts(NOW + 30 * DAY + 5)));
}

#[test]
fn forged_licence_falls_back_to_free_baseline() {
    let genuine = key(1);
    let forger = key(2);
    let v = evaluate(
        &signed(NOW - DAY, NOW + DAY, &forger),
        &genuine.verifying_key(),
        ts(NOW),
    );
    assert!(!v.valid);
    assert_eq!(v.reason, VerdictReason::BadSignature);
    assert_eq!(v.source, LicenceSource::FreeBaseline);
    assert_eq!(v.max_sessions, FREE_BASELINE_SESSIONS);
    assert_eq!(v.days_remaining, None);
}

#[test]
fn raising_the_cap_after_signing_breaks_the_signature() {
    let k = key(1);
    let mut s = signed(NOW - DAY, NOW + DAY, &k);
    s.max_sessions = 1_000_000;
    let v = evaluate(&s, &k.verifying_key(), ts(NOW));
    assert_eq!(v.reason, VerdictReason::BadSignature);
    assert_eq!(v.max_sessions, FREE_BASELINE_SESSIONS);
}

#[test]
fn expired_licence_falls_back() {
    let k = key(1);
    let v = evaluate(
        &signed(NOW - 10 * DAY, NOW - DAY, &k),
        &k.verifying_key(),
        ts(NOW),
    );
    assert!(!v.valid);
    assert_eq!(v.reason, VerdictReason::Expired);
    assert_eq!(v.source, LicenceSource::FreeBaseline);
    assert_eq!(v.expires_at, ts(NOW - DAY));
}

#[test]
fn expiry_instant_is_exclusive() {
    let k = key(1);
    let s = signed(NOW - DAY, NOW, &k);
    assert!(evaluate(&s, &k.verifying_key(), ts(NOW - 1)).valid);
    assert!(!evaluate(&s, &k.verifying_key(), ts(NOW)).valid);
}

#[test]
fn future_licence_is_not_yet_valid_and_asks_for_review() {
    let k = key(1);
    let v = evaluate(
        &signed(NOW + DAY, NOW + 2 * DAY, &k),
        &k.verifying_key(),
        ts(NOW),
    );
    assert_eq!(v.reason, VerdictReason::NotYetValid);
    assert_eq!(v.review_at, Some(ts(NOW + DAY)));
}

#[test]
fn garbage_signature_is_malformed_not_a_panic() {
    let k = key(1);
    let mut s = spec(NOW - DAY, NOW + DAY);
    s.signature = "not base64 !!".into();
    assert_eq!(
        evaluate(&s, &k.verifying_key(), ts(NOW)).reason,
        VerdictReason::Malformed
    );
    s.signature = B64.encode([0u8; 10]);
    assert_eq!(
        evaluate(&s, &k.verifying_key(), ts(NOW)).reason,
        VerdictReason::Malformed
    );
}

#[test]
fn feature_order_does_not_change_the_payload() {
    let mut a = spec(0, 1);
    let mut b = spec(0, 1);
    a.features = vec!["x".into(), "y".into()];
    b.features = vec!["y".into(), "x".into()];
    assert_eq!(canonical_payload(&a), canonical_payload(&b));
}

#[test]
fn keys_round_trip_through_base64() {
    let k = key(9);
    let (seed, public) = encode_key_pair(&k);
    assert_eq!(
        signing_key_from_base64(&seed).unwrap().to_bytes(),
        k.to_bytes()
    );
    assert_eq!(public_key_from_base64(&public).unwrap(), k.verifying_key());
    assert!(matches!(
        public_key_from_base64("AAAA"),
        Err(GrantError::KeyLength { got: 3, .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn any_field_change_invalidates(customer in "[a-zA-Z ]{1,20}", cap in 1u64..1_000_000, delta in 1u64..1000) {
        let k = key(3);
        let mut s = spec(NOW - DAY, NOW + DAY);
        s.customer = customer;
        s.max_sessions = cap;
        s.signature = sign(&s, &k);
        prop_assert!(evaluate(&s, &k.verifying_key(), ts(NOW)).valid);
        s.max_sessions = cap + delta;
        prop_assert!(!evaluate(&s, &k.verifying_key(), ts(NOW)).valid);
    }
}
