use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;

fn lease(ip: u32, n: u64) -> Lease {
    Lease {
        ip: Ipv4Addr::from(ip),
        lease_secs: (n % 86_400) as u32 + 1,
        bound_at_ns: n,
        renewed_at_ns: n.wrapping_mul(2),
    }
}

fn every_state(n: u64) -> Vec<State> {
    let ip = Ipv4Addr::new(100, 64, (n >> 8) as u8, n as u8);
    let reasons = REASONS.map(|(r, _)| r);
    let mut out = vec![
        State::Discovering {
            xid: n as u32,
            ip,
            since_ns: n,
        },
        State::Offered {
            xid: 7,
            ip,
            grant: Grant::Captive {
                plan_id: 3,
                over_cap: true,
            },
            until_ns: u64::MAX,
        },
        State::Authenticating {
            xid: u32::MAX,
            ip,
            since_ns: 0,
        },
        State::Active {
            lease: lease(u32::from(ip), n),
            plan_id: u32::MAX,
        },
        State::Captive {
            lease: lease(0, n),
            plan_id: 0,
            over_cap: false,
        },
    ];
    for phase in [RenewPhase::Renewing, RenewPhase::Rebinding] {
        out.push(State::Renewing {
            lease: lease(u32::MAX, n),
            grant: Grant::Active { plan_id: 9 },
            phase,
        });
    }
    for reason in reasons {
        out.push(State::Releasing {
            ip,
            since_ns: n,
            reason,
        });
        out.push(State::Expired { reason });
    }
    out
}

fn session(id: u64, key82: bool, state: State) -> Session {
    let line = Line {
        dataplane: 2,
        port: 1,
        outer_vlan: 4094,
        inner_vlan: (id % 4095) as u16,
    };
    let mac = [2, 0, 0, (id >> 16) as u8, (id >> 8) as u8, id as u8];
    Session {
        id,
        key: if key82 {
            SubscriberKey::Opt82(Box::new(Opt82Key {
                dataplane: 2,
                circuit_id: Some(b"olt-7/1/1".to_vec()),
                remote_id: None,
            }))
        } else {
            SubscriberKey::Mac { line, mac }
        },
        line,
        mac,
        circuit_id: key82.then(|| b"olt-7/1/1".to_vec()),
        remote_id: Some(Vec::new()),
        created_ns: id.wrapping_add(1_700_000_000_000_000_000),
        state,
        // Every other session has an end (a RADIUS Session-Timeout).
        ends_at_ns: id
            .is_multiple_of(2)
            .then(|| NonZeroU64::new(id.wrapping_add(1_700_000_086_400_000_000)))
            .flatten(),
        reauthorize_at_end: id.is_multiple_of(4),
        pending: None,
        last_offer_ns: 0,
    }
}

fn round_trip(s: &Session) -> Session {
    let mut row = Vec::new();
    encode(s, &mut row);
    decode(&row).expect("a row just encoded decodes")
}

#[test]
fn every_state_and_key_round_trips_exactly() {
    for key82 in [false, true] {
        for (i, state) in every_state(42).into_iter().enumerate() {
            let s = session(i as u64 + 1, key82, state);
            assert_eq!(round_trip(&s), s);
        }
    }
}

#[test]
fn an_option_82_key_keeps_the_json_of_the_struct_variant_it_was() {
    let key = SubscriberKey::Opt82(Box::new(Opt82Key {
        dataplane: 2,
        circuit_id: Some(b"c".to_vec()),
        remote_id: None,
    }));
    let old = r#"{"Opt82":{"dataplane":2,"circuit_id":[99],"remote_id":null}}"#;
    assert_eq!(serde_json::to_string(&key).unwrap(), old);
    assert_eq!(serde_json::from_str::<SubscriberKey>(old).unwrap(), key);
    assert_eq!(std::mem::size_of::<SubscriberKey>(), 24);
}

#[test]
fn json_rows_of_the_first_format_still_load() {
    for state in every_state(5) {
        let s = session(77, false, state);
        let json = serde_json::to_vec(&s).unwrap();
        assert_eq!(decode(&json).unwrap(), s);
    }
}

#[test]
fn a_bound_row_is_a_fraction_of_its_json() {
    let s = session(123_456, false, every_state(9).remove(3));
    let mut row = Vec::new();
    encode(&s, &mut row);
    let json = serde_json::to_vec(&s).unwrap().len();
    assert!(
        row.len() * 3 < json,
        "{} bytes against {json} as JSON",
        row.len()
    );
}

#[test]
fn bad_rows_are_errors_naming_what_is_wrong() {
    assert!(matches!(decode(&[]), Err(RowError::Empty)));
    assert!(matches!(decode(&[7, 1, 2]), Err(RowError::Format(7))));
    assert!(matches!(decode(b"{\"id\":"), Err(RowError::Json(_))));
    // A protobuf row without its state, and one with an unknown end reason.
    let mut row = vec![PROTOBUF_V1];
    let mut r = SessionRow::from(&session(
        1,
        false,
        State::Expired {
            reason: EndReason::Drained,
        },
    ));
    r.state = None;
    r.encode(&mut row).unwrap();
    assert!(matches!(decode(&row), Err(RowError::Field("state"))));
    r.state = Some(StateRow::Expired(ReleasingRow {
        reason: 99,
        ..ReleasingRow::default()
    }));
    row.truncate(1);
    r.encode(&mut row).unwrap();
    assert!(matches!(decode(&row), Err(RowError::Field("reason"))));
    // A VLAN beyond 16 bits.
    r.state = Some(state_row(&State::Expired {
        reason: EndReason::Released,
    }));
    r.line = Some(LineRow {
        outer_vlan: 70_000,
        ..LineRow::default()
    });
    row.truncate(1);
    r.encode(&mut row).unwrap();
    assert!(matches!(decode(&row), Err(RowError::Field("line"))));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
        let mut row = vec![PROTOBUF_V1];
        row.extend_from_slice(&bytes);
        let _ = decode(&row);
    }

    #[test]
    fn arbitrary_sessions_round_trip(id in any::<u64>(), n in any::<u64>(), key82 in any::<bool>(),
                                     pick in 0usize..23) {
        let states = every_state(n);
        let s = session(id, key82, states[pick % states.len()].clone());
        prop_assert_eq!(round_trip(&s), s);
    }
}
