//! Access-Request for a subscriber (RFC 2865) and what its answer means for the engine.
//!
//! MAC authentication as BNGs do it for DHCP subscribers: User-Name is the MAC (or an option 82
//! field, per `userName`); the password is the configured one or the User-Name again, sent as
//! User-Password hidden per RFC 2865 §5.2 (PAP, the default: every server checks it however it
//! stores passwords) or, with `authMethod: chap`, as a CHAP-Password answering a challenge the
//! NAS makes up itself (RFC 2865 §5.3; the subscriber takes no part, so its DHCP is unchanged).
//! The request names the NAS (NAS-Identifier, NAS-IP-Address), the
//! line (NAS-Port, NAS-Port-Id, NAS-Port-Type Ethernet), the subscriber (Calling-Station-Id =
//! MAC) and carries option 82 as the Broadband Forum's Agent-Circuit-Id and Agent-Remote-Id
//! (RFC 4679), plus a Message-Authenticator (RFC 3579; required by servers since BlastRADIUS).

use std::net::Ipv4Addr;

use kbng_wire::RadiusAttr;
use kbng_wire::radius::{attr, code, value, vendor};

use super::Req;
use super::config::{AuthMethod, PlanAttribute, RadiusConfig, UserNameSource};
use crate::core::aaa::{AddressChoice, AuthOutcome};
use crate::core::{Line, MacAddr, SessionId};

/// Who is asking, as the engine knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub id: SessionId,
    pub mac: MacAddr,
    pub circuit_id: Option<Vec<u8>>,
    pub remote_id: Option<Vec<u8>>,
    pub line: Line,
}

/// The User-Name for `s` under `cfg`.
pub fn user_name(cfg: &RadiusConfig, s: &Subject) -> String {
    let opt82 = match cfg.user_name {
        UserNameSource::Mac => None,
        UserNameSource::CircuitId => s.circuit_id.as_ref(),
        UserNameSource::RemoteId => s.remote_id.as_ref(),
    };
    match opt82 {
        Some(v) if !v.is_empty() => String::from_utf8_lossy(v).into_owned(),
        _ => cfg.mac_format.format(&s.mac),
    }
}

/// NAS-Port-Id: dataplane, port and VLANs, e.g. `dp0/port0:100.200`.
pub fn nas_port_id(line: &Line) -> String {
    let mut s = format!("dp{}/port{}", line.dataplane, line.port);
    if line.outer_vlan != 0 {
        s.push_str(&format!(":{}", line.outer_vlan));
        if line.inner_vlan != 0 {
            s.push_str(&format!(".{}", line.inner_vlan));
        }
    }
    s
}

/// The DSL-Forum vendor attribute value (vendor id, type, length, value; RFC 2865 §5.26).
fn dsl_forum(kind: u8, v: &[u8]) -> Option<(u8, Vec<u8>)> {
    let v = &v[..v.len().min(245)];
    let len = u8::try_from(v.len() + 2).ok()?;
    let mut out = vendor::DSL_FORUM.to_be_bytes().to_vec();
    out.push(kind);
    out.push(len);
    out.extend_from_slice(v);
    Some((attr::VENDOR_SPECIFIC, out))
}

/// Attributes that name the NAS, shared by Access- and Accounting-Requests.
pub fn nas_attributes(cfg: &RadiusConfig, s: &Subject) -> Vec<(u8, Vec<u8>)> {
    let mut a = vec![(attr::NAS_IDENTIFIER, cfg.nas_identifier.as_bytes().to_vec())];
    if let Some(ip) = cfg.nas_ip {
        a.push((attr::NAS_IP_ADDRESS, ip.octets().to_vec()));
    }
    a.push((attr::NAS_PORT, s.line.port.to_be_bytes().to_vec()));
    a.push((
        attr::NAS_PORT_TYPE,
        value::NAS_PORT_TYPE_ETHERNET.to_be_bytes().to_vec(),
    ));
    a.push((attr::NAS_PORT_ID, nas_port_id(&s.line).into_bytes()));
    a.push((
        attr::CALLING_STATION_ID,
        cfg.mac_format.format(&s.mac).into_bytes(),
    ));
    if let Some(c) = &s.circuit_id {
        a.extend(dsl_forum(vendor::AGENT_CIRCUIT_ID, c));
    }
    if let Some(r) = &s.remote_id {
        a.extend(dsl_forum(vendor::AGENT_REMOTE_ID, r));
    }
    a
}

/// The Access-Request for `s`; `bound` is its address when it is already bound (asked again
/// at its Session-Timeout, Termination-Action RADIUS-Request). Acct-Session-Id is the one its
/// accounting carries, so that a server can tie the two (RFC 2866 §5.5).
pub fn access_request(cfg: &RadiusConfig, s: &Subject, bound: Option<Ipv4Addr>) -> Req {
    let name = user_name(cfg, s);
    let password = cfg.password.clone().unwrap_or_else(|| name.clone());
    let mut attrs = vec![
        (
            attr::SERVICE_TYPE,
            value::SERVICE_TYPE_FRAMED.to_be_bytes().to_vec(),
        ),
        (
            attr::ACCT_SESSION_ID,
            super::accounting::acct_session_id(s.id).into_bytes(),
        ),
    ];
    attrs.extend(bound.map(|ip| (attr::FRAMED_IP_ADDRESS, ip.octets().to_vec())));
    attrs.extend(nas_attributes(cfg, s));
    Req::Auth {
        session: s.id,
        user_name: name,
        password: password.into_bytes(),
        chap: cfg.auth_method == AuthMethod::Chap,
        attrs,
    }
}

/// The plan name carried in `attrs` per `which`, as text.
pub fn plan_of(which: PlanAttribute, attrs: &[(u8, Vec<u8>)]) -> Option<String> {
    let raw = match which {
        PlanAttribute::FilterId => attrs.iter().find(|(k, _)| *k == attr::FILTER_ID),
        PlanAttribute::Class => attrs.iter().find(|(k, _)| *k == attr::CLASS),
        PlanAttribute::Vendor {
            vendor_id,
            vendor_type,
        } => {
            return attrs
                .iter()
                .filter(|(k, _)| *k == attr::VENDOR_SPECIFIC)
                .filter_map(|(kind, value)| RadiusAttr { kind: *kind, value }.as_vendor().ok())
                .filter(|(v, _)| *v == vendor_id)
                .find_map(|(_, subs)| {
                    subs.map_while(Result::ok)
                        .find(|s| s.kind == vendor_type)
                        .map(|s| text(s.value))
                });
        }
    };
    raw.map(|(_, v)| text(v))
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v)
        .trim_end_matches('\0')
        .to_string()
}

/// What an Access-Accept sets for its session's accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcceptAcct {
    /// Acct-Interim-Interval.
    pub interim_secs: Option<u32>,
    /// Every Class (RFC 2865 §5.25), in order: sent back unmodified in each of the session's
    /// Accounting-Requests, which is how billing systems tie usage to the authorization.
    pub class: Vec<Vec<u8>>,
    /// Idle-Timeout (RFC 2865 §5.28), when nonzero: the accounting task reads the session's
    /// counters, so it watches for idleness too.
    pub idle_secs: Option<u32>,
}

impl AcceptAcct {
    pub fn is_empty(&self) -> bool {
        self.interim_secs.is_none() && self.class.is_empty() && self.idle_secs.is_none()
    }
}

/// The address an Access-Accept asks for: Framed-IP-Address, else Framed-Pool, else any.
/// 255.255.255.255 ("the user may choose") and 255.255.255.254 ("the NAS chooses") ask for
/// no particular address (RFC 2865 §5.8); so does a malformed value.
fn address_of(attrs: &[(u8, Vec<u8>)]) -> AddressChoice {
    let first = |kind: u8| attrs.iter().find(|(k, _)| *k == kind).map(|(_, v)| v);
    let fixed = first(attr::FRAMED_IP_ADDRESS)
        .and_then(|v| <[u8; 4]>::try_from(v.as_slice()).ok())
        .map(Ipv4Addr::from)
        .filter(|ip| u32::from(*ip) < 0xffff_fffe);
    if let Some(ip) = fixed {
        return AddressChoice::Fixed(ip);
    }
    match first(attr::FRAMED_POOL).and_then(|v| std::str::from_utf8(v).ok()) {
        Some(name) if !name.is_empty() => AddressChoice::Pool(name.to_owned()),
        _ => AddressChoice::Any,
    }
}

/// The attributes of an answer this control reads as 4-byte values (integers, an address)
/// that carry another length. Each is ignored, as RFC 6929 §2.8 has an invalid attribute
/// treated like an unknown one; the caller counts them, since an ignored Session-Timeout is a
/// session without its limit.
pub fn malformed(attrs: &[(u8, Vec<u8>)]) -> Vec<u8> {
    const FOUR_BYTES: [u8; 5] = [
        attr::SESSION_TIMEOUT,
        attr::IDLE_TIMEOUT,
        attr::TERMINATION_ACTION,
        attr::ACCT_INTERIM_INTERVAL,
        attr::FRAMED_IP_ADDRESS,
    ];
    attrs
        .iter()
        .filter(|(k, v)| FOUR_BYTES.contains(k) && v.len() != 4)
        .map(|(k, _)| *k)
        .collect()
}

/// What an answer (already verified) means: the outcome, and what an Access-Accept set for
/// the accounting.
pub fn outcome(
    cfg: &RadiusConfig,
    answer_code: u8,
    attrs: &[(u8, Vec<u8>)],
) -> (AuthOutcome, AcceptAcct) {
    match answer_code {
        code::ACCESS_ACCEPT => {
            let u32_attr = |kind: u8| {
                attrs
                    .iter()
                    .find(|(k, _)| *k == kind)
                    .and_then(|(_, v)| <[u8; 4]>::try_from(v.as_slice()).ok())
                    .map(u32::from_be_bytes)
            };
            let interim_secs = u32_attr(attr::ACCT_INTERIM_INTERVAL);
            let class = attrs
                .iter()
                .filter(|(k, _)| *k == attr::CLASS)
                .map(|(_, v)| v.clone())
                .collect();
            (
                AuthOutcome::Accept {
                    plan: plan_of(cfg.plan_attribute, attrs),
                    session_timeout_secs: u32_attr(attr::SESSION_TIMEOUT),
                    address: address_of(attrs),
                    reauthorize: u32_attr(attr::TERMINATION_ACTION)
                        == Some(value::TERMINATION_RADIUS_REQUEST),
                },
                AcceptAcct {
                    interim_secs,
                    class,
                    idle_secs: u32_attr(attr::IDLE_TIMEOUT).filter(|&t| t > 0),
                },
            )
        }
        // Access-Challenge asks for an exchange a DHCP subscriber cannot have.
        _ => (AuthOutcome::Reject, AcceptAcct::default()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::radius::client::Request;
    use crate::radius::config::{MacFormat, Secret, Server};
    use kbng_wire::RadiusPacket;
    use kbng_wire::radius_auth::{unhide_user_password, verify_message_authenticator};
    use std::net::Ipv4Addr;
    use std::time::Duration;

    pub(crate) fn cfg() -> RadiusConfig {
        RadiusConfig {
            servers: vec![Server {
                auth: "127.0.0.1:1812".parse().unwrap(),
                acct: "127.0.0.1:1813".parse().unwrap(),
                secret: Secret(b"s3cret".to_vec()),
            }],
            timeout: Duration::from_secs(1),
            retries: 2,
            nas_identifier: "kbng-test".into(),
            nas_ip: Some(Ipv4Addr::new(192, 0, 2, 9)),
            user_name: UserNameSource::Mac,
            mac_format: MacFormat::Colon,
            password: None,
            auth_method: AuthMethod::Pap,
            plan_attribute: PlanAttribute::FilterId,
            accounting: true,
            interim_secs: 0,
            counters_read_secs: 0,
            das: None,
        }
    }

    fn subject() -> Subject {
        Subject {
            id: 5,
            mac: [2, 0, 0, 0, 1, 1],
            circuit_id: Some(b"eth0/1:100".to_vec()),
            remote_id: None,
            line: Line {
                dataplane: 0,
                port: 1,
                outer_vlan: 100,
                inner_vlan: 0,
            },
        }
    }

    #[test]
    fn attributes_of_the_wrong_length_are_named_and_ignored() {
        let attrs = vec![
            (attr::SESSION_TIMEOUT, vec![0, 0, 14]),
            (attr::IDLE_TIMEOUT, vec![0, 0, 1, 44]),
            (attr::FRAMED_IP_ADDRESS, vec![100, 64, 0, 9, 9]),
            (attr::CLASS, vec![1, 2, 3]),
        ];
        assert_eq!(
            malformed(&attrs),
            [attr::SESSION_TIMEOUT, attr::FRAMED_IP_ADDRESS]
        );
        let c = cfg();
        match outcome(&c, code::ACCESS_ACCEPT, &attrs).0 {
            AuthOutcome::Accept {
                session_timeout_secs,
                address,
                ..
            } => {
                assert_eq!(session_timeout_secs, None);
                assert_eq!(address, AddressChoice::Any);
            }
            other => panic!("{other:?}"),
        }
        assert!(malformed(&attrs[1..2]).is_empty());
    }

    #[test]
    fn access_request_carries_the_subscriber_and_the_nas() {
        let c = cfg();
        let req = access_request(&c, &subject(), None);
        let ra = [9u8; 16];
        let bytes = req.build(17, ra, b"s3cret").unwrap();
        let p = RadiusPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.code(), p.identifier()), (code::ACCESS_REQUEST, 17));
        assert_eq!(p.attr(attr::USER_NAME), Some(&b"02:00:00:00:01:01"[..]));
        let pw = unhide_user_password(p.attr(attr::USER_PASSWORD).unwrap(), b"s3cret", &ra);
        assert_eq!(pw.unwrap(), b"02:00:00:00:01:01");
        assert_eq!(
            p.attr(attr::CALLING_STATION_ID),
            Some(&b"02:00:00:00:01:01"[..])
        );
        assert_eq!(p.attr(attr::NAS_IDENTIFIER), Some(&b"kbng-test"[..]));
        assert_eq!(p.attr(attr::NAS_IP_ADDRESS), Some(&[192, 0, 2, 9][..]));
        assert_eq!(p.attr(attr::NAS_PORT_TYPE), Some(&15u32.to_be_bytes()[..]));
        assert_eq!(p.attr(attr::NAS_PORT_ID), Some(&b"dp0/port1:100"[..]));
        assert_eq!(
            p.attr(attr::ACCT_SESSION_ID),
            Some(&b"0000000000000005"[..])
        );
        assert_eq!(p.attr(attr::FRAMED_IP_ADDRESS), None, "not bound yet");
        assert_eq!(
            p.vendor_attr(vendor::DSL_FORUM, vendor::AGENT_CIRCUIT_ID),
            Some(&b"eth0/1:100"[..])
        );
        assert_eq!(
            p.vendor_attr(vendor::DSL_FORUM, vendor::AGENT_REMOTE_ID),
            None
        );
        assert_eq!(
            verify_message_authenticator(&bytes, &ra, b"s3cret"),
            Ok(true)
        );
    }

    #[test]
    fn a_reauthorization_names_the_bound_address() {
        let ip = Ipv4Addr::new(100, 64, 0, 7);
        let bytes = access_request(&cfg(), &subject(), Some(ip))
            .build(1, [1; 16], b"s3cret")
            .unwrap();
        let p = RadiusPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.attr(attr::FRAMED_IP_ADDRESS), Some(&ip.octets()[..]));
    }

    #[test]
    fn chap_sends_a_response_to_its_own_challenge_and_no_user_password() {
        let mut c = cfg();
        c.auth_method = AuthMethod::Chap;
        let ra = [3u8; 16];
        let bytes = access_request(&c, &subject(), None)
            .build(9, ra, b"s3cret")
            .unwrap();
        let p = RadiusPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.attr(attr::USER_PASSWORD), None);
        let chap = p.attr(attr::CHAP_PASSWORD).unwrap();
        let challenge = p.attr(attr::CHAP_CHALLENGE).unwrap();
        assert_eq!(chap[0], 9);
        let want = kbng_wire::radius_auth::chap_response(9, b"02:00:00:00:01:01", challenge);
        assert_eq!(&chap[1..], &want[..]);
        assert_eq!(
            verify_message_authenticator(&bytes, &ra, b"s3cret"),
            Ok(true)
        );
    }

    #[test]
    fn user_name_from_option_82_falls_back_to_the_mac() {
        let mut c = cfg();
        c.user_name = UserNameSource::CircuitId;
        assert_eq!(user_name(&c, &subject()), "eth0/1:100");
        c.user_name = UserNameSource::RemoteId;
        c.mac_format = MacFormat::Bare;
        assert_eq!(user_name(&c, &subject()), "020000000101");
    }

    #[test]
    fn plan_from_each_kind_of_attribute() {
        let vsa = |vid: u32, t: u8, v: &[u8]| {
            let mut b = vid.to_be_bytes().to_vec();
            b.extend([t, v.len() as u8 + 2]);
            b.extend_from_slice(v);
            (attr::VENDOR_SPECIFIC, b)
        };
        let attrs = vec![
            (attr::CLASS, b"silver".to_vec()),
            vsa(9, 1, b"cisco"),
            vsa(65000, 3, b"gold"),
            (attr::FILTER_ID, b"bronze".to_vec()),
        ];
        assert_eq!(
            plan_of(PlanAttribute::FilterId, &attrs).as_deref(),
            Some("bronze")
        );
        assert_eq!(
            plan_of(PlanAttribute::Class, &attrs).as_deref(),
            Some("silver")
        );
        let v = PlanAttribute::Vendor {
            vendor_id: 65000,
            vendor_type: 3,
        };
        assert_eq!(plan_of(v, &attrs).as_deref(), Some("gold"));
        assert_eq!(plan_of(v, &attrs[..2]), None);
    }

    #[test]
    fn outcomes() {
        let c = cfg();
        let attrs = vec![
            (attr::CLASS, b"billing-1".to_vec()),
            (attr::FILTER_ID, b"gold".to_vec()),
            (attr::ACCT_INTERIM_INTERVAL, 60u32.to_be_bytes().to_vec()),
            (attr::CLASS, vec![0, 0xff]),
            (attr::SESSION_TIMEOUT, 86_400u32.to_be_bytes().to_vec()),
            (attr::IDLE_TIMEOUT, 900u32.to_be_bytes().to_vec()),
            (attr::TERMINATION_ACTION, 1u32.to_be_bytes().to_vec()),
        ];
        assert_eq!(
            outcome(&c, code::ACCESS_ACCEPT, &attrs),
            (
                AuthOutcome::Accept {
                    plan: Some("gold".into()),
                    session_timeout_secs: Some(86_400),
                    address: AddressChoice::Any,
                    reauthorize: true,
                },
                AcceptAcct {
                    interim_secs: Some(60),
                    class: vec![b"billing-1".to_vec(), vec![0, 0xff]],
                    idle_secs: Some(900),
                }
            )
        );
        assert_eq!(
            outcome(&c, code::ACCESS_ACCEPT, &[]),
            (
                AuthOutcome::Accept {
                    plan: None,
                    session_timeout_secs: None,
                    address: AddressChoice::Any,
                    reauthorize: false,
                },
                AcceptAcct::default()
            )
        );
        let address = |attrs: &[(u8, Vec<u8>)]| match outcome(&c, code::ACCESS_ACCEPT, attrs).0 {
            AuthOutcome::Accept { address, .. } => address,
            o => panic!("{o:?}"),
        };
        let framed = |ip: [u8; 4]| (attr::FRAMED_IP_ADDRESS, ip.to_vec());
        let pool = (attr::FRAMED_POOL, b"business".to_vec());
        assert_eq!(
            address(&[pool.clone(), framed([100, 64, 0, 9])]),
            AddressChoice::Fixed(Ipv4Addr::new(100, 64, 0, 9))
        );
        assert_eq!(
            address(&[framed([255, 255, 255, 254]), pool.clone()]),
            AddressChoice::Pool("business".into()),
            "the NAS chooses, from the named pool"
        );
        assert_eq!(address(&[framed([255; 4])]), AddressChoice::Any);
        assert_eq!(
            address(&[(attr::FRAMED_IP_ADDRESS, vec![1, 2])]),
            AddressChoice::Any
        );
        assert_eq!(address(&[(attr::FRAMED_POOL, vec![])]), AddressChoice::Any);
        assert_eq!(
            outcome(&c, code::ACCESS_REJECT, &attrs).0,
            AuthOutcome::Reject
        );
        assert_eq!(
            outcome(&c, code::ACCESS_CHALLENGE, &[]).0,
            AuthOutcome::Reject
        );
    }
}
