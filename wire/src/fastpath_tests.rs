use super::*;
use crate::checksum::checksum;
use crate::{Ipv4Packet, parse_l2};
use proptest::prelude::*;

/// The generic parsers' answer in the fast path's shape.
fn generic(frame: &[u8]) -> Option<L2Ipv4> {
    let l2 = parse_l2(frame).ok()?;
    if l2.ethertype != ethertype::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(frame.get(l2.l3_offset()..)?).ok()?;
    Some(L2Ipv4::from_parsed(&l2, &ip))
}

/// Frames near the accepted shapes: 0-3 tags with likely and unlikely TPIDs, an ethertype,
/// then an IPv4-ish header with a plausible or random version/IHL and total length.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let tpid = prop_oneof![
        Just(0x8100u16),
        Just(0x88a8),
        Just(0x9100),
        Just(0x0800),
        any::<u16>()
    ];
    let et = prop_oneof![Just(0x0800u16), Just(0x0806), any::<u16>()];
    let ver_ihl = prop_oneof![
        Just(0x45u8),
        Just(0x46),
        Just(0x44),
        Just(0x65),
        any::<u8>()
    ];
    (
        prop::collection::vec(tpid, 0..4),
        et,
        ver_ihl,
        0u16..120,
        prop::collection::vec(any::<u8>(), 60..120),
    )
        .prop_map(|(tags, et, vi, total, mut rest)| {
            let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
            for (i, t) in tags.iter().enumerate() {
                f.extend_from_slice(&t.to_be_bytes());
                f.extend_from_slice(&(0x1000u16 + i as u16 * 7).to_be_bytes());
            }
            f.extend_from_slice(&et.to_be_bytes());
            rest[0] = vi;
            rest[2..4].copy_from_slice(&total.to_be_bytes());
            f.extend_from_slice(&rest);
            f
        })
}

proptest! {
    #[test]
    fn fast_agrees_with_the_generic_parsers(f in frame(), cut in 0usize..140) {
        let f = &f[..cut.min(f.len())];
        match l2_ipv4(f) {
            Some(fast) => prop_assert_eq!(Some(fast), generic(f)),
            // Short frames may be valid but are left to the generic path.
            None => prop_assert!(f.len() < FAST_PREFIX || generic(f).is_none()),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(f in prop::collection::vec(any::<u8>(), 0..80)) {
        let _ = l2_ipv4(&f);
        let mut g = f.clone();
        let _ = decrement_ttl(&mut g);
    }

    #[test]
    fn ttl_decrement_matches_the_generic_one(
        mut h in prop::array::uniform20(any::<u8>()), ttl in any::<u8>()
    ) {
        h[0] = 0x45;
        h[2..4].copy_from_slice(&20u16.to_be_bytes());
        h[8] = ttl;
        h[10] = 0;
        h[11] = 0;
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut fast = h;
        let mut slow = h;
        let fast_ok = decrement_ttl(&mut fast);
        let slow_ok = Ipv4Packet::new_checked(&mut slow[..]).is_ok_and(|mut ip| ip.decrement_ttl());
        prop_assert_eq!(fast_ok, slow_ok);
        prop_assert_eq!(fast, slow);
        prop_assert!(Ipv4Packet::new_checked(&fast[..]).is_ok_and(|ip| ip.verify_checksum()));
    }
}

#[test]
fn qinq_ipv4_frame_is_read_whole() {
    let mut f = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0xbb];
    f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x20, 0xc8, 0x08, 0x00]);
    let ip = [
        0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 100, 64, 0, 5, 192, 0, 2, 1,
    ];
    f.extend_from_slice(&ip);
    f.resize(64, 0);
    let got = l2_ipv4(&f).unwrap();
    assert_eq!((got.outer_vid, got.inner_vid, got.l3), (100, 200, 22));
    assert_eq!((got.src_ip, got.dst_ip), (0x6440_0005, 0xc000_0201));
    assert_eq!((got.protocol, got.total_len, got.fragment), (17, 28, false));
    assert_eq!(got.dst, [0x02, 0, 0, 0, 0, 0xaa]);
}

#[test]
fn ttl_of_one_is_left_alone() {
    let mut h = [0u8; 20];
    h[8] = 1;
    let before = h;
    assert!(!decrement_ttl(&mut h));
    assert_eq!(h, before);
    assert!(!decrement_ttl(&mut [64u8; 11]));
}
