#![allow(
    clippy::unwrap_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use proptest::prelude::*;

use super::*;

// Made with `openssl req -x509 -newkey ec -days 3650` and `-days 10000`; the expected seconds
// are `date -u -d '<openssl x509 -startdate/-enddate>' +%s`, not this module's arithmetic.
const UTC: &[u8] = include_bytes!("../fuzz/seeds/x509/utc_time.der");
const GENERALIZED: &[u8] = include_bytes!("../fuzz/seeds/x509/generalized_time.der");

#[test]
fn reads_the_validity_openssl_wrote() {
    assert_eq!(
        validity(UTC).unwrap(),
        Validity {
            not_before: 1_796_413_675, // 2026-12-04 19:47:55 UTC
            not_after: 2_111_773_675,  // 2036-12-01 19:47:55 UTC
        }
    );
    // notAfter in 2054 is a GeneralizedTime (RFC 5280: from 2050 on); notBefore a UTCTime.
    assert_eq!(
        validity(GENERALIZED).unwrap(),
        Validity {
            not_before: 1_796_413_675,
            not_after: 2_660_413_675, // 2054-04-21 19:47:55 UTC
        }
    );
}

#[test]
fn the_earliest_expiry_of_a_chain_counts() {
    assert_eq!(earliest_not_after([GENERALIZED, UTC]), Some(2_111_773_675));
    assert_eq!(earliest_not_after([UTC, GENERALIZED]), Some(2_111_773_675));
    assert_eq!(earliest_not_after([GENERALIZED]), Some(2_660_413_675));
    assert_eq!(earliest_not_after([UTC, &b"junk"[..]]), None);
    assert_eq!(earliest_not_after([]), None);
}

#[test]
fn civil_days_match_known_dates() {
    assert_eq!(days_from_civil(1970, 1, 1), 0);
    assert_eq!(days_from_civil(2000, 3, 1), 11_017); // after a leap day of a /400 year
    assert_eq!(days_from_civil(2100, 3, 1), 47_541); // 2100 has no leap day
    assert_eq!(days_from_civil(1969, 12, 31), -1);
}

#[test]
fn utc_time_years_pivot_at_1950() {
    let t = |s: &[u8]| {
        let mut b = vec![UTC_TIME, s.len() as u8];
        b.extend_from_slice(s);
        time(&b).map(|(t, _)| t)
    };
    assert_eq!(t(b"500101000000Z"), Ok(-631_152_000)); // 1950
    assert_eq!(t(b"491231235959Z"), Ok(2_524_607_999)); // 2049
    assert_eq!(t(b"491231235959+0100"), Err(WireError::BadText("UTCTime")));
    assert_eq!(
        t(b"4912312359590"),
        Err(WireError::BadText("certificate time zone"))
    );
    assert_eq!(
        t(b"491331235959Z"),
        Err(WireError::BadText("certificate time"))
    );
}

#[test]
fn what_is_not_a_certificate_is_refused() {
    assert!(matches!(validity(&[]), Err(WireError::Truncated { .. })));
    assert_eq!(
        validity(b"-----BEGIN CERTIFICATE-----"),
        Err(WireError::Unsupported("certificate"))
    );
    // Cut anywhere before the end of notAfter: never a validity.
    let not_after = b"\x17\x0d361201194755Z";
    let end_of_validity = UTC.windows(15).position(|w| w == not_after).unwrap() + 15;
    for cut in 0..end_of_validity {
        assert!(validity(&UTC[..cut]).is_err(), "cut at {cut}");
    }
    // An indefinite length is not DER.
    let mut b = UTC.to_vec();
    b[1] = 0x80;
    assert!(matches!(validity(&b), Err(WireError::BadLength { .. })));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = validity(&b);
    }

    #[test]
    fn flipped_bytes_never_panic(i in 0usize..UTC.len(), x in any::<u8>()) {
        let mut b = UTC.to_vec();
        b[i] ^= x;
        let _ = validity(&b);
    }
}
