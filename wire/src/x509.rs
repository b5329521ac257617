//! The validity period of an X.509 certificate (RFC 5280 §4.1.2.5), read from its DER.
//!
//! The gRPC certificates are renewed by cert-manager and picked up by running processes; a
//! renewal that never reaches a process shows only on the day its certificate expires, when
//! the control can no longer connect. So each process exports when the certificate it holds
//! expires, and for that reads only the validity: no signature or extension is looked at
//! (rustls verifies the certificate itself at each handshake).
//!
//! `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
//! signature, issuer, validity SEQUENCE { notBefore Time, notAfter Time }, ... }, ... }`

use crate::error::{WireError, check_len};

/// When a certificate starts and stops being valid, in seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: i64,
    /// `notAfter`.
    pub not_after: i64,
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The validity of the DER certificate `der`; an error for anything that is not a
/// certificate's structure up to its validity.
pub fn validity(der: &[u8]) -> Result<Validity, WireError> {
    let (cert, _) = tlv(der, SEQUENCE, "certificate")?;
    let (mut tbs, _) = tlv(cert, SEQUENCE, "tbsCertificate")?;
    if tbs.first() == Some(&VERSION) {
        tbs = tlv(tbs, VERSION, "version")?.1;
    }
    let (_, rest) = tlv(tbs, INTEGER, "serialNumber")?;
    let (_, rest) = tlv(rest, SEQUENCE, "signature")?;
    let (_, rest) = tlv(rest, SEQUENCE, "issuer")?;
    let (validity, _) = tlv(rest, SEQUENCE, "validity")?;
    let (not_before, rest) = time(validity)?;
    let (not_after, _) = time(rest)?;
    Ok(Validity {
        not_before,
        not_after,
    })
}

/// The earliest notAfter of `certs` (DER): a chain is only as valid as its first certificate
/// to expire, and a set of CAs admits all its clients only until its first one expires. None
/// for no certificate, or one whose validity cannot be read.
pub fn earliest_not_after<'a>(certs: impl IntoIterator<Item = &'a [u8]>) -> Option<i64> {
    certs
        .into_iter()
        .try_fold(None, |earliest: Option<i64>, c| {
            let t = validity(c).ok()?.not_after;
            Some(Some(earliest.map_or(t, |e: i64| e.min(t))))
        })?
}

/// One DER element of tag `tag` at the start of `b`: its contents and what follows it.
fn tlv<'a>(b: &'a [u8], tag: u8, what: &'static str) -> Result<(&'a [u8], &'a [u8]), WireError> {
    check_len(2, b.len())?;
    if b[0] != tag {
        return Err(WireError::Unsupported(what));
    }
    let (len, head) = match b[1] {
        n @ 0..=0x7f => (usize::from(n), 2),
        // Long form with 1-4 length bytes; 0x80 (indefinite) is not DER.
        n @ 0x81..=0x84 => {
            let k = usize::from(n & 0x7f);
            check_len(2 + k, b.len())?;
            let len = b[2..2 + k]
                .iter()
                .fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
            (len, 2 + k)
        }
        n => {
            return Err(WireError::BadLength {
                what,
                value: usize::from(n),
            });
        }
    };
    let end = head
        .checked_add(len)
        .ok_or(WireError::BadLength { what, value: len })?;
    check_len(end, b.len())?;
    Ok((&b[head..end], &b[end..]))
}

/// A `Time` (UTCTime or GeneralizedTime, in DER's `...Z` form) at the start of `b`, as Unix
/// seconds, and what follows it.
fn time(b: &[u8]) -> Result<(i64, &[u8]), WireError> {
    let (year, text, rest) = match b.first() {
        Some(&UTC_TIME) => {
            let (t, rest) = tlv(b, UTC_TIME, "UTCTime")?;
            if t.len() != 13 {
                return Err(WireError::BadText("UTCTime"));
            }
            // RFC 5280 §4.1.2.5.1: YY of 50 and above is 19YY, below is 20YY.
            let yy = digits(&t[..2], "UTCTime")?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &t[2..], rest)
        }
        Some(&GENERALIZED_TIME) => {
            let (t, rest) = tlv(b, GENERALIZED_TIME, "GeneralizedTime")?;
            if t.len() != 15 {
                return Err(WireError::BadText("GeneralizedTime"));
            }
            (digits(&t[..4], "GeneralizedTime")?, &t[4..], rest)
        }
        _ => return Err(WireError::Unsupported("validity time")),
    };
    // `text` is MMDDHHMMSSZ.
    if text[10] != b'Z' {
        return Err(WireError::BadText("certificate time zone"));
    }
    let field = |i: usize| digits(&text[i..i + 2], "certificate time");
    let (month, day) = (field(0)?, field(2)?);
    let (hour, min, sec) = (field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 59 {
        return Err(WireError::BadText("certificate time"));
    }
    let days = days_from_civil(year, month, day);
    Ok((days * 86_400 + hour * 3_600 + min * 60 + sec, rest))
}

fn digits(b: &[u8], what: &'static str) -> Result<i64, WireError> {
    b.iter().try_fold(0i64, |acc, &c| {
        if c.is_ascii_digit() {
            Ok(acc * 10 + i64::from(c - b'0'))
        } else {
            Err(WireError::BadText(what))
        }
    })
}

/// Days from 1970-01-01 to the proleptic Gregorian date: eras of 400 years from 0000-03-01,
/// so that the leap day falls at the end of each counted year.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
#[path = "x509_tests.rs"]
mod tests;
