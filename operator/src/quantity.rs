//! Kubernetes storage quantities as bytes, to compare a claim's size with what a BNG needs.
//!
//! Accepts what the API server writes and what an operator types: an integer or decimal number
//! with an optional binary (`Ki`..`Ei`) or decimal (`k`..`E`) suffix, or an exponent (`1e9`).
//! Fractions of a byte round up. Anything else is `None`, never a guess.

/// Bytes of `q`, or `None` when it is not a quantity or exceeds `u64`.
pub fn bytes(q: &str) -> Option<u64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let scale: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        e => {
            let exp: u32 = e.strip_prefix(['e', 'E'])?.parse().ok()?;
            10u128.checked_pow(exp)?
        }
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let digits = |s: &str| -> Option<u128> {
        if s.is_empty() {
            Some(0)
        } else {
            s.parse().ok()
        }
    };
    let (whole, frac_value) = (digits(whole)?, digits(frac)?);
    let frac_scale = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let total = whole
        .checked_mul(scale)?
        .checked_add((frac_value.checked_mul(scale)?).div_ceil(frac_scale))?;
    u64::try_from(total).ok()
}

/// `b` bytes as whole GiB, rounded up: the form the operator writes into claims.
pub fn gib_ceil(b: u64) -> String {
    format!("{}Gi", b.div_ceil(1 << 30).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_the_api_server_and_people_write() {
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("500Mi"), Some(500 << 20));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("10G"), Some(10_000_000_000));
        assert_eq!(bytes("2147483648"), Some(1 << 31));
        assert_eq!(bytes("1e9"), Some(1_000_000_000));
        assert_eq!(bytes("0.5"), Some(1));
        assert_eq!(bytes(" 3Ti "), Some(3 << 40));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "", "Gi", "1GB", "1.2.3Gi", "-1Gi", "1 Gi", "abc", "1e", "99999Ei", "1e40",
        ] {
            assert_eq!(bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn whole_gib_round_up() {
        assert_eq!(gib_ceil(1), "1Gi");
        assert_eq!(gib_ceil(1 << 30), "1Gi");
        assert_eq!(gib_ceil((1 << 30) + 1), "2Gi");
        assert_eq!(gib_ceil(0), "1Gi");
    }
}
