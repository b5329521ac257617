//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are kept in a `u32` accumulator and folded once at the end; the
//! accumulator cannot overflow for any buffer below 128 KiB, far above any
//! frame this crate handles.

use std::net::Ipv4Addr;

/// Add `data` as big-endian 16-bit words to `acc` (odd trailing byte padded
/// with zero, RFC 1071 §4.1).
#[inline]
pub fn sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

/// Fold a 32-bit accumulator to 16 bits and complement it.
#[inline]
pub fn finish(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    // `acc` now fits in 16 bits.
    !(acc as u16)
}

/// The checksum of `data`, ready to store in a header whose checksum field
/// is zero in `data`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(0, data))
}

/// The sum of the IPv4 pseudo-header used by UDP and TCP (RFC 768, RFC 793).
#[inline]
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, l4_len: u16) -> u32 {
    let mut acc = sum(0, &src.octets());
    acc = sum(acc, &dst.octets());
    acc + u32::from(protocol) + u32::from(l4_len)
}

/// Update checksum `hc` after one 16-bit word of the covered data changed
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`, RFC 1624 §3 eqn. 3, which
/// avoids the -0 result of the older RFC 1141 formula.
#[inline]
pub fn update(hc: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!hc) + u32::from(!old) + u32::from(new);
    finish(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A commonly cited IPv4 header whose checksum is 0xb861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn known_ipv4_header_checksum() {
        assert_eq!(checksum(&HDR), 0xb861);
        let mut h = HDR;
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(checksum(&h), 0);
    }

    #[test]
    fn rfc1071_odd_length() {
        // RFC 1071 §3 example words 0001 f203 f4f5 f6f7 sum to 0xddf2.
        assert_eq!(
            finish(sum(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            !0xddf2
        );
        assert_eq!(sum(0, &[0xab]), 0xab00);
    }

    #[test]
    fn incremental_matches_full_recompute() {
        let mut h = HDR;
        let hc = checksum(&h);
        // TTL 0x40 -> 0x3f in the word (ttl << 8 | protocol).
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] = 0x3f;
        let new = u16::from_be_bytes([h[8], h[9]]);
        assert_eq!(update(hc, old, new), checksum(&h));
    }

    proptest::proptest! {
        #[test]
        fn incremental_equals_recompute(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 2..64), idx in 0usize..32, new in proptest::prelude::any::<u16>()) {
            let mut d = data;
            if d.len() % 2 == 1 { d.push(0); }
            let words = d.len() / 2;
            let i = idx % words;
            let hc = checksum(&d);
            let old = u16::from_be_bytes([d[2 * i], d[2 * i + 1]]);
            d[2 * i..2 * i + 2].copy_from_slice(&new.to_be_bytes());
            let full = checksum(&d);
            let inc = update(hc, old, new);
            // 0x0000 and 0xffff are the two encodings of zero in one's complement.
            proptest::prop_assert!(inc == full || (inc | full) == 0xffff && (inc & full) == 0);
        }
    }
}
