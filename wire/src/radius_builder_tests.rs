use super::*;
use crate::radius::RadiusAttrIter;
use crate::radius_auth::{
    unhide_user_password, verify_accounting_style_request, verify_message_authenticator,
};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rebuilds_the_rfc2865_example_request() {
    let ra = [
        0x0f, 0x40, 0x3f, 0x94, 0x73, 0x97, 0x80, 0x57, 0xbd, 0x83, 0xd5, 0xcb, 0x98, 0xf4, 0x22,
        0x7a,
    ];
    let mut b = RadiusBuilder::access_request(0, ra);
    b.user_name("nemo").unwrap();
    b.user_password(b"arctangent", b"xyzzy5461").unwrap();
    b.nas_ip_address(Ipv4Addr::new(192, 168, 1, 16)).unwrap();
    b.attr_u32(attr::NAS_PORT, 3).unwrap();
    let expect = hex(
        "010000380f403f9473978057bd83d5cb98f4227a01066e656d6f02120dbe708d93d413ce3196e43f782a0aee\
         0406c0a80110050600000003",
    );
    assert_eq!(b.finish(b"xyzzy5461").unwrap(), expect);
}

// Expected bytes below were computed independently with Python's hashlib
// and hmac modules from the RFC 2866 §3 and RFC 3579 §3.2 definitions.

#[test]
fn access_request_message_authenticator_known_value() {
    let ra: [u8; 16] = std::array::from_fn(|i| i as u8 + 1);
    let mut b = RadiusBuilder::access_request(42, ra);
    b.user_name("bob").unwrap();
    b.message_authenticator().unwrap();
    b.message_authenticator().unwrap(); // idempotent
    let p = b.finish(b"testing123").unwrap();
    assert_eq!(
        p,
        hex(
            "012a002b0102030405060708090a0b0c0d0e0f100105626f625012fe61043ab64312fc644f4a098265b191"
        )
    );
    assert_eq!(
        verify_message_authenticator(&p, &ra, b"testing123"),
        Ok(true)
    );
    assert_eq!(
        verify_message_authenticator(&p, &ra, b"testing124"),
        Err(WireError::BadAuthenticator)
    );
}

#[test]
fn accounting_request_authenticator_known_value() {
    let mut b = RadiusBuilder::accounting_request(9);
    b.acct_status_type(1).unwrap();
    b.acct_session_id("s1").unwrap();
    b.message_authenticator().unwrap();
    let p = b.finish(b"testing123").unwrap();
    assert_eq!(
        p,
        hex(
            "04090030d05092db833c3745c7668bab9681a4dc2806000000012c047331501261c57d723e08a0834e0146cb6e1a5520"
        )
    );
    assert!(verify_accounting_style_request(&p, b"testing123").is_ok());
    assert_eq!(
        verify_accounting_style_request(&p, b"nope").err(),
        Some(WireError::BadAuthenticator)
    );
}

#[test]
fn full_bng_access_request_and_accept_roundtrip() {
    let secret = b"s3cret";
    let ra = [0x5a; 16];
    let mut b = RadiusBuilder::access_request(3, ra);
    b.user_name("00:1b:21:aa:bb:cc").unwrap();
    b.user_password(b"pw", secret).unwrap();
    b.nas_ip_address(Ipv4Addr::new(10, 0, 0, 1)).unwrap();
    b.nas_port_id("eth0:100.200").unwrap();
    b.calling_station_id("00-1B-21-AA-BB-CC").unwrap();
    b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 10)).unwrap();
    b.acct_session_id("kbng-1").unwrap();
    b.vendor_specific(9, 1, b"subscriber:sla=gold").unwrap();
    b.message_authenticator().unwrap();
    let req_bytes = b.finish(secret).unwrap();
    let req = RadiusPacket::new_checked(&req_bytes[..]).unwrap();
    assert_eq!(req.authenticator(), ra);
    let hidden = req.attr(attr::USER_PASSWORD).unwrap();
    assert_eq!(unhide_user_password(hidden, secret, &ra).unwrap(), b"pw");
    let vsa = req
        .attributes()
        .flatten()
        .find(|a| a.kind == attr::VENDOR_SPECIFIC)
        .unwrap();
    let (vendor, mut subs) = vsa.as_vendor().unwrap();
    assert_eq!(vendor, 9);
    assert_eq!(subs.next().unwrap().unwrap().value, b"subscriber:sla=gold");

    let mut accept = RadiusBuilder::response(code::ACCESS_ACCEPT, &req);
    accept.attr_u32(attr::SESSION_TIMEOUT, 86400).unwrap();
    accept.message_authenticator().unwrap();
    let acc = accept.finish(secret).unwrap();
    let p = crate::radius_auth::verify_response(&acc, &ra, secret).unwrap();
    assert_eq!((p.code(), p.identifier()), (code::ACCESS_ACCEPT, 3));
    // A reply to some other request does not verify.
    assert!(crate::radius_auth::verify_response(&acc, &[0x5b; 16], secret).is_err());
}

#[test]
fn builder_limits() {
    let mut b = RadiusBuilder::accounting_request(1);
    assert!(b.attr(1, &[0; 254]).is_err());
    assert!(b.attr(1, &[0; 253]).is_ok());
    assert_eq!(
        b.user_password(b"x", b"s").err(),
        Some(WireError::UnexpectedCode(4))
    );
    for _ in 0..14 {
        b.attr(1, &[0; 253]).unwrap();
    }
    assert!(matches!(
        b.attr(1, &[0; 253]),
        Err(WireError::TooLong { .. })
    ));
    assert!(RadiusBuilder::dynamic_authorization_request(code::ACCESS_REQUEST, 1).is_err());
    let req = RadiusPacket::new_checked(
        &[
            4u8, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ][..],
    )
    .unwrap();
    assert!(
        RadiusBuilder::response(code::COA_REQUEST, &req)
            .finish(b"s")
            .is_err()
    );
}

#[test]
fn counters_wrap_into_gigawords_and_vendor_attrs_are_found() {
    let mut b = RadiusBuilder::accounting_request(3);
    b.counter64(attr::ACCT_INPUT_OCTETS, attr::ACCT_INPUT_GIGAWORDS, 7)
        .unwrap();
    b.counter64(
        attr::ACCT_OUTPUT_OCTETS,
        attr::ACCT_OUTPUT_GIGAWORDS,
        (5 << 32) + 9,
    )
    .unwrap();
    b.vendor_specific(9, 1, b"other vendor").unwrap();
    b.vendor_specific(crate::radius::vendor::DSL_FORUM, 2, b"remote")
        .unwrap();
    b.vendor_specific(crate::radius::vendor::DSL_FORUM, 1, b"eth0/1:100")
        .unwrap();
    let p = b.finish(b"s").unwrap();
    let p = verify_accounting_style_request(&p, b"s").unwrap();
    let u32_of = |k| u32::from_be_bytes(p.attr(k).unwrap().try_into().unwrap());
    assert_eq!(u32_of(attr::ACCT_INPUT_OCTETS), 7);
    assert_eq!(p.attr(attr::ACCT_INPUT_GIGAWORDS), None);
    assert_eq!(u32_of(attr::ACCT_OUTPUT_OCTETS), 9);
    assert_eq!(u32_of(attr::ACCT_OUTPUT_GIGAWORDS), 5);
    assert_eq!(
        p.vendor_attr(crate::radius::vendor::DSL_FORUM, 1),
        Some(&b"eth0/1:100"[..])
    );
    assert_eq!(
        p.vendor_attr(crate::radius::vendor::DSL_FORUM, 2),
        Some(&b"remote"[..])
    );
    assert_eq!(p.vendor_attr(9, 2), None);
}

// The expected response was computed with Python's hashlib:
// md5(bytes([7]) + b"hello" + bytes(range(1, 17))).
#[test]
fn chap_password_known_value_and_challenge() {
    let ra: [u8; 16] = std::array::from_fn(|i| i as u8 + 1);
    let mut b = RadiusBuilder::access_request(7, ra);
    b.user_name("bob").unwrap();
    b.chap_password(b"hello").unwrap();
    let p = b.finish(b"secret").unwrap();
    let p = RadiusPacket::new_checked(&p[..]).unwrap();
    let mut want = vec![7];
    want.extend(hex("dd5430c751f6837e18a1e8c34a944c87"));
    assert_eq!(p.attr(attr::CHAP_PASSWORD), Some(&want[..]));
    assert_eq!(p.attr(attr::CHAP_CHALLENGE), Some(&ra[..]));
    assert_eq!(p.attr(attr::USER_PASSWORD), None);
}

#[test]
fn chap_password_only_in_access_request() {
    let mut b = RadiusBuilder::accounting_request(1);
    assert!(b.chap_password(b"x").is_err());
}

proptest! {
    #[test]
    fn attributes_roundtrip(attrs in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u8>(), 0..=253)), 0..12)) {
        let mut b = RadiusBuilder::accounting_request(1);
        for (k, v) in &attrs {
            b.attr(*k, v).unwrap();
        }
        let p = b.finish(b"secret").unwrap();
        let parsed = verify_accounting_style_request(&p, b"secret").map(|p| {
            p.attributes().map(|a| a.map(|a| (a.kind, a.value.to_vec()))).collect::<Result<Vec<_>, _>>()
        });
        // A random attribute 80 of the wrong size makes MA verification fail;
        // everything else must round-trip.
        if attrs.iter().all(|(k, v)| *k != attr::MESSAGE_AUTHENTICATOR || v.len() == 16) {
            if attrs.iter().all(|(k, _)| *k != attr::MESSAGE_AUTHENTICATOR) {
                prop_assert_eq!(parsed.unwrap().unwrap(), attrs);
            }
        } else {
            prop_assert!(parsed.is_err());
        }
    }

    #[test]
    fn password_hide_roundtrip(pw in proptest::collection::vec(1u8.., 0..=128), secret in proptest::collection::vec(any::<u8>(), 1..32), ra in any::<[u8; 16]>()) {
        let h = hide_user_password(&pw, &secret, &ra).unwrap();
        prop_assert_eq!(h.len() % 16, 0);
        prop_assert_eq!(unhide_user_password(&h, &secret, &ra).unwrap(), pw);
    }

    #[test]
    fn vendor_attr_iter_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
        let _ = RadiusAttrIter::new(&b).count();
    }
}
