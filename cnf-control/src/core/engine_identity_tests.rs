//! Script tests of who a subscriber is: its MAC, its option 82, or its access line.

use super::*;
use crate::core::dhcp::tests::client_frame;
use crate::core::test_support::{S, cap, engine_config, msg, programs, replies};
use kbng_wire::RelayAgentInfo;

/// Line identity on (option 82 identity as given), records for two lines of port 0 and for
/// the circuit-id an access node puts in option 82.
fn engine(option82: bool) -> Engine {
    let mut cfg = engine_config(UnknownPolicy::Captive);
    cfg.line_identity = true;
    cfg.option82_identity = option82;
    let mut e = Engine::new(cfg, cap(10), 0).unwrap();
    e.subscribers
        .import_csv(",0/0/100/200,,silver\n,0/0/100/0,,gold\n,an-7,,silver\n")
        .unwrap();
    e
}

/// DORA for MAC `m` on `tags` (outer, inner), its DISCOVER and REQUEST carrying `opt82`; the
/// session's dataplane form.
fn bind(e: &mut Engine, m: u8, tags: (u16, u16), opt82: Option<&[u8]>) -> DpSession {
    let info = opt82.map(|c| RelayAgentInfo {
        circuit_id: Some(c.to_vec()),
        ..Default::default()
    });
    let mut d = msg(DhcpMessageType::Discover, m, 1);
    d.relay_agent_info = info.clone();
    let out = e.handle_dhcp(0, 0, &client_frame(&d, Some(tags)), S);
    let offer = replies(&out).pop().expect("an OFFER");
    let mut r = msg(DhcpMessageType::Request, m, 2);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    r.relay_agent_info = info;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, Some(tags)), S);
    match programs(&out)[..] {
        [ProgramOp::Install(d)] => d,
        _ => panic!("no install: {out:?}"),
    }
}

#[test]
fn the_line_names_the_subscriber_whatever_its_mac() {
    let mut e = engine(false);
    let d = bind(&mut e, 1, (100, 200), None);
    assert_eq!(
        (d.plan_id, d.captive, d.outer_vlan, d.inner_vlan),
        (11, false, 100, 200)
    );
    let s = e.session(d.id).unwrap();
    assert_eq!(s.circuit_id.as_deref(), Some(&b"0/0/100/200"[..]));
    assert!(
        matches!(&s.key, SubscriberKey::Opt82(k) if k.circuit_id.as_deref() == Some(&b"0/0/100/200"[..]))
    );
    // Single-tagged line 100: its own record.
    assert_eq!(bind(&mut e, 2, (100, 0), None).plan_id, 10);
    // A line without a record: captive, though its MAC has none either way.
    assert!(bind(&mut e, 3, (101, 200), None).captive);
    // Option 82 is not the identity here: the line is, and the access node's is ignored.
    assert!(bind(&mut e, 4, (102, 7), Some(b"an-7")).captive);
}

#[test]
fn a_cpe_swapped_on_the_line_ends_the_old_session_and_gets_the_lines_address() {
    let mut e = engine(false);
    let old = bind(&mut e, 1, (100, 200), None);
    // Another MAC on the same line: the old session ends (the dataplane checks its MAC
    // upstream), Port-Preempted to RADIUS, and the new device is answered once it is gone.
    let d = msg(DhcpMessageType::Discover, 9, 5);
    let out = e.handle_dhcp(0, 0, &client_frame(&d, Some((100, 200))), 2 * S);
    assert!(replies(&out).is_empty(), "{out:?}");
    assert_eq!(programs(&out), [ProgramOp::Remove(old.id)]);
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Accounting {
            kind: AcctKind::Stop,
            reason: Some(EndReason::Replaced),
            ..
        }
    )));
    let out = e.removed(old.id, 2 * S);
    let offer = replies(&out).pop().expect("its DISCOVER answered");
    assert_eq!((offer.xid, offer.yiaddr), (5, old.ip), "the line's address");
    // Its REQUEST binds its own session, on the line's address.
    let mut r = msg(DhcpMessageType::Request, 9, 5);
    r.requested_ip = Some(offer.yiaddr);
    r.server_id = offer.server_id;
    let out = e.handle_dhcp(0, 0, &client_frame(&r, Some((100, 200))), 2 * S);
    let [ProgramOp::Install(new)] = programs(&out)[..] else {
        panic!("no install: {out:?}");
    };
    assert_ne!(new.id, old.id);
    assert_eq!(
        (new.ip, new.mac, new.plan_id),
        (old.ip, [2, 0, 0, 0, 0, 9], 11)
    );
    // A REQUEST from yet another MAC (INIT-REBOOT with the line's address) is NAKed.
    let mut r = msg(DhcpMessageType::Request, 7, 6);
    r.requested_ip = Some(new.ip);
    let out = e.handle_dhcp(0, 0, &client_frame(&r, Some((100, 200))), 3 * S);
    assert_eq!(
        replies(&out).pop().map(|r| r.message_type),
        Some(DhcpMessageType::Nak)
    );
    assert_eq!(programs(&out), [ProgramOp::Remove(new.id)]);
}

#[test]
fn with_option82_identity_the_carried_option_82_comes_first() {
    let mut e = engine(true);
    let by_opt82 = bind(&mut e, 4, (102, 7), Some(b"an-7"));
    assert_eq!((by_opt82.plan_id, by_opt82.captive), (11, false));
    assert_eq!(
        e.session(by_opt82.id).unwrap().circuit_id.as_deref(),
        Some(&b"an-7"[..])
    );
    // A message without option 82 falls back to its line.
    assert_eq!(bind(&mut e, 5, (100, 200), None).plan_id, 11);
}
