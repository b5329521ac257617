//! The Dynamic Authorization Server (RFC 5176): CoA-Request changes a live session's plan,
//! its Session-Timeout (from now), its Termination-Action (authorized again at that timeout,
//! or ended), its Idle-Timeout, its Acct-Interim-Interval, the Class its accounting carries,
//! or several at once; Disconnect-Request ends it.
//!
//! - Only configured clients are heard; a request from anyone else, or whose authenticator
//!   does not verify with that client's secret, is silently discarded and counted (§3, §5):
//!   a NAK would need the secret the sender evidently lacks.
//! - A session is identified by Acct-Session-Id, Framed-IP-Address, Calling-Station-Id or a
//!   MAC User-Name (§3), all of which must match. None of them: NAK 402 Missing-Attribute; no
//!   such session: 503 Session-Context-Not-Found; a NAS-Identifier or NAS-IP-Address that is
//!   not ours: 403 NAS-Identification-Mismatch; a CoA with none of a plan, a
//!   Session-Timeout, a Termination-Action, an Idle-Timeout, an Acct-Interim-Interval or a
//!   Class: 402; a plan name the control does not know, or one of those four that is not 4
//!   bytes: 407 Invalid-Attribute-Value; an Idle-Timeout or Acct-Interim-Interval while
//!   accounting is off: 401 Unsupported-Attribute (idleness is read from the counters the
//!   accounting reads). A CoA's Class values replace the Access-Accept's in
//!   the session's accounting from then on (a change of service billed apart); with
//!   accounting off they are ignored. Other attributes are ignored.
//! - A retransmitted request (same source, identifier and authenticator) gets the cached
//!   answer again instead of being applied twice (RFC 5080 §2.2.2).
//! - The engine applies the change and the answer leaves after the engine task's batch: its
//!   store commit and dataplane programming have been issued.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbng_wire::radius::{attr, value};
use kbng_wire::radius_coa::error_cause;
use kbng_wire::{CoaKind, CoaRequest, WireError};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::accounting::parse_acct_session_id;
use super::auth::plan_of;
use super::config::{RadiusConfig, UserNameSource};
use super::{RadiusEvent, Tally};
use crate::core::aaa::parse_mac;
use crate::core::engine::{Engine, Output};
use crate::core::{MacAddr, SessionId};

/// Which session a request names; every given field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// `Some(None)`: an Acct-Session-Id that is not one of ours.
    pub session_id: Option<Option<SessionId>>,
    pub ip: Option<Ipv4Addr>,
    pub mac: Option<MacAddr>,
}

/// A verified request, as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DasRequest {
    pub kind: CoaKind,
    pub selector: Selector,
    pub plan: Option<String>,
    /// Session-Timeout: the seconds the session may last from now (0: without limit).
    pub session_timeout_secs: Option<u32>,
    /// Termination-Action: whether the session is authorized again at its Session-Timeout
    /// (RADIUS-Request) or ended there (Default).
    pub reauthorize: Option<bool>,
    /// Idle-Timeout: the seconds without upstream traffic that end the session, counted from
    /// now (0: without limit). The RADIUS task watches it, not the engine.
    pub idle_timeout_secs: Option<u32>,
    /// Acct-Interim-Interval: the session's interims from its next one (0: none).
    pub interim_secs: Option<u32>,
    /// Class: the values the session's accounting carries from now (RFC 2865 §5.25), in
    /// order; `None` when the CoA has none (the ones before stay) or accounting is off.
    pub class: Option<Vec<Vec<u8>>>,
}

impl DasRequest {
    /// Whether a CoA asks for any change the NAS makes.
    fn changes_something(&self) -> bool {
        self.plan.is_some()
            || self.session_timeout_secs.is_some()
            || self.reauthorize.is_some()
            || self.idle_timeout_secs.is_some()
            || self.interim_secs.is_some()
            || self.class.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DasAnswer {
    Ack,
    Nak(u32),
}

/// What `req` asks, or the Error-Cause to NAK it with.
pub fn interpret(cfg: &RadiusConfig, req: &CoaRequest) -> Result<DasRequest, u32> {
    let nas_id = req
        .attributes
        .iter()
        .find(|(k, _)| *k == attr::NAS_IDENTIFIER)
        .map(|(_, v)| v.as_slice());
    if nas_id.is_some_and(|v| v != cfg.nas_identifier.as_bytes())
        || matches!((req.nas_ip, cfg.nas_ip), (Some(a), Some(b)) if a != b)
    {
        return Err(error_cause::NAS_IDENTIFICATION_MISMATCH);
    }
    let text_mac = |v: &Vec<u8>| std::str::from_utf8(v).ok().and_then(parse_mac);
    let mut mac = req.calling_station_id.as_ref().and_then(text_mac);
    if cfg.user_name == UserNameSource::Mac {
        mac = mac.or_else(|| req.user_name.as_ref().and_then(text_mac));
    }
    let selector = Selector {
        session_id: req
            .acct_session_id
            .as_ref()
            .map(|v| parse_acct_session_id(v)),
        ip: req.framed_ip,
        mac,
    };
    if selector == Selector::default() {
        return Err(error_cause::MISSING_ATTRIBUTE);
    }
    let seconds = |kind: u8| -> Result<Option<u32>, u32> {
        match req.attributes.iter().find(|(k, _)| *k == kind) {
            Some((_, v)) => <[u8; 4]>::try_from(v.as_slice())
                .map(|b| Some(u32::from_be_bytes(b)))
                .map_err(|_| error_cause::INVALID_ATTRIBUTE_VALUE),
            None => Ok(None),
        }
    };
    let class: Vec<Vec<u8>> = req
        .attributes
        .iter()
        .filter(|(k, _)| *k == attr::CLASS)
        .map(|(_, v)| v.clone())
        .collect();
    let r = DasRequest {
        kind: req.kind,
        selector,
        plan: plan_of(cfg.plan_attribute, &req.attributes),
        session_timeout_secs: seconds(attr::SESSION_TIMEOUT)?,
        reauthorize: seconds(attr::TERMINATION_ACTION)?
            .map(|v| v == value::TERMINATION_RADIUS_REQUEST),
        idle_timeout_secs: seconds(attr::IDLE_TIMEOUT)?,
        interim_secs: seconds(attr::ACCT_INTERIM_INTERVAL)?,
        class: (cfg.accounting && !class.is_empty()).then_some(class),
    };
    if req.kind == CoaKind::Coa && !r.changes_something() {
        return Err(error_cause::MISSING_ATTRIBUTE);
    }
    let needs_accounting = r.idle_timeout_secs.is_some() || r.interim_secs.is_some();
    if req.kind == CoaKind::Coa && needs_accounting && !cfg.accounting {
        return Err(error_cause::UNSUPPORTED_ATTRIBUTE);
    }
    Ok(r)
}

/// The bound session `sel` names.
pub fn resolve(engine: &Engine, sel: &Selector) -> Result<SessionId, u32> {
    let not_found = error_cause::SESSION_CONTEXT_NOT_FOUND;
    let id = match sel.session_id {
        Some(None) => return Err(not_found),
        Some(Some(id)) => id,
        None => engine.find(sel.ip, sel.mac).ok_or(not_found)?,
    };
    let s = engine.session(id).ok_or(not_found)?;
    let (lease, _) = s.state.bound().ok_or(not_found)?;
    if sel.ip.is_some_and(|ip| ip != lease.ip) || sel.mac.is_some_and(|m| m != s.mac) {
        return Err(not_found);
    }
    Ok(id)
}

/// What [`apply`] did: the engine's outputs, the answer, and what the RADIUS task is to change
/// in the session's accounting when the request was taken.
#[derive(Debug)]
pub struct Applied {
    pub out: Vec<Output>,
    pub answer: DasAnswer,
    pub acct: Option<AcctChange>,
}

/// A CoA's change to a session's accounting, which the RADIUS task keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcctChange {
    pub id: SessionId,
    /// Its Idle-Timeout from now (0: none).
    pub idle_secs: Option<u32>,
    /// Its interim interval from its next interim (0: none).
    pub interim_secs: Option<u32>,
    /// The Class values its accounting carries from now.
    pub class: Option<Vec<Vec<u8>>>,
}

impl Applied {
    fn nak(out: Vec<Output>, cause: u32) -> Self {
        Self {
            out,
            answer: DasAnswer::Nak(cause),
            acct: None,
        }
    }
}

/// Carry out `req` in the engine (the engine task calls this).
pub fn apply(engine: &mut Engine, req: &DasRequest, now_ns: u64) -> Applied {
    let id = match resolve(engine, &req.selector) {
        Ok(id) => id,
        Err(cause) => return Applied::nak(vec![], cause),
    };
    let not_found = error_cause::SESSION_CONTEXT_NOT_FOUND;
    if req.kind == CoaKind::Disconnect {
        return match engine.disconnect(id, now_ns) {
            Some(out) => Applied {
                out,
                answer: DasAnswer::Ack,
                acct: None,
            },
            None => Applied::nak(vec![], not_found),
        };
    }
    if !req.changes_something() {
        return Applied::nak(vec![], error_cause::MISSING_ATTRIBUTE);
    }
    // The plan first: an unknown one NAKs the request before anything changed.
    let mut out = match &req.plan {
        Some(plan) => match engine.change_plan(id, plan, now_ns) {
            Ok(out) => out,
            Err(_) => return Applied::nak(vec![], error_cause::INVALID_ATTRIBUTE_VALUE),
        },
        None => vec![],
    };
    if req.session_timeout_secs.is_some() || req.reauthorize.is_some() {
        match engine.set_session_timeout(id, req.session_timeout_secs, req.reauthorize, now_ns) {
            Some(more) => out.extend(more),
            None => return Applied::nak(out, not_found),
        }
    }
    Applied {
        out,
        answer: DasAnswer::Ack,
        acct: (req.idle_timeout_secs.is_some()
            || req.interim_secs.is_some()
            || req.class.is_some())
        .then(|| AcctChange {
            id,
            idle_secs: req.idle_timeout_secs,
            interim_secs: req.interim_secs,
            class: req.class.clone(),
        }),
    }
}

/// Answers kept for retransmissions.
const DEDUP_SECS: u64 = 30;
const DEDUP_MAX: usize = 4096;

type DedupKey = (SocketAddr, u8, [u8; 16]);

/// Serve on `socket` until the engine goes away.
pub async fn serve(
    cfg: Arc<RadiusConfig>,
    clients: Vec<(IpAddr, Vec<u8>)>,
    socket: UdpSocket,
    events: mpsc::Sender<RadiusEvent>,
) {
    let mut buf = vec![0u8; 4096];
    let mut seen: HashMap<DedupKey, (Instant, Vec<u8>)> = HashMap::new();
    let mut tally = Tally::default();
    let mut last_warn: Option<Instant> = None;
    loop {
        if let Some(counts) = tally.due()
            && events.send(RadiusEvent::Counts(counts)).await.is_err()
        {
            return;
        }
        let (n, from) =
            match tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf)).await {
                Ok(Ok(x)) => x,
                Ok(Err(_)) | Err(_) => continue,
            };
        let packet = &buf[..n];
        let Some((_, secret)) = clients.iter().find(|(a, _)| *a == from.ip()) else {
            tally.add("DAS request from an unknown client");
            continue;
        };
        let key = match packet.get(4..20) {
            Some(a) => {
                let mut ra = [0u8; 16];
                ra.copy_from_slice(a);
                (from, packet[1], ra)
            }
            None => {
                tally.add("DAS malformed request");
                continue;
            }
        };
        if let Some((_, answer)) = seen.get(&key) {
            tally.add("DAS retransmissions answered again");
            let _ = socket.send_to(answer, from).await;
            continue;
        }
        let req = match CoaRequest::parse(packet, secret) {
            Ok(r) => r,
            Err(WireError::BadAuthenticator) => {
                tally.add("DAS bad authenticator");
                // Rate-limited: anyone can send these.
                if last_warn.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    last_warn = Some(Instant::now());
                    tracing::warn!(%from, "CoA/Disconnect with a bad authenticator discarded (wrong secret?)");
                }
                continue;
            }
            Err(_) => {
                tally.add("DAS malformed request");
                continue;
            }
        };
        let answer = match interpret(&cfg, &req) {
            Err(cause) => DasAnswer::Nak(cause),
            Ok(dreq) => {
                let (tx, rx) = oneshot::channel();
                if events
                    .send(RadiusEvent::Das {
                        req: dreq,
                        reply: tx,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                match tokio::time::timeout(Duration::from_secs(5), rx).await {
                    Ok(Ok(a)) => a,
                    _ => DasAnswer::Nak(error_cause::RESOURCES_UNAVAILABLE),
                }
            }
        };
        let (what, bytes) = match answer {
            DasAnswer::Ack => ("DAS ACK sent", req.ack(secret)),
            DasAnswer::Nak(c) => ("DAS NAK sent", req.nak(Some(c), secret)),
        };
        tally.add(what);
        let Ok(bytes) = bytes else {
            tally.add("DAS answer could not be built");
            continue;
        };
        tracing::info!(%from, kind = ?req.kind, ?answer, "dynamic authorization");
        let _ = socket.send_to(&bytes, from).await;
        if seen.len() >= DEDUP_MAX {
            seen.retain(|_, (t, _)| t.elapsed() < Duration::from_secs(DEDUP_SECS));
            if seen.len() >= DEDUP_MAX {
                seen.clear();
            }
        }
        seen.insert(key, (Instant::now(), bytes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radius::auth::tests::cfg;
    use kbng_wire::RadiusBuilder;
    use kbng_wire::radius::code;

    fn coa(build: impl Fn(&mut RadiusBuilder)) -> CoaRequest {
        let mut b = RadiusBuilder::dynamic_authorization_request(code::COA_REQUEST, 1).unwrap();
        build(&mut b);
        CoaRequest::parse(&b.finish(b"x").unwrap(), b"x").unwrap()
    }

    #[test]
    fn identification_and_plan() {
        let c = cfg();
        let r = interpret(
            &c,
            &coa(|b| {
                b.acct_session_id("000000000000002a").unwrap();
                b.user_name("02:00:00:00:01:01").unwrap();
                b.attr(attr::FILTER_ID, b"silver").unwrap();
            }),
        )
        .unwrap();
        assert_eq!(r.selector.session_id, Some(Some(42)));
        assert_eq!(r.selector.mac, Some([2, 0, 0, 0, 1, 1]));
        assert_eq!(r.plan.as_deref(), Some("silver"));
    }

    #[test]
    fn naks_name_the_problem() {
        let c = cfg();
        let no_id = coa(|b| {
            b.attr(attr::FILTER_ID, b"silver").unwrap();
        });
        assert_eq!(interpret(&c, &no_id), Err(error_cause::MISSING_ATTRIBUTE));
        let no_plan = coa(|b| {
            b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 4)).unwrap();
        });
        assert_eq!(interpret(&c, &no_plan), Err(error_cause::MISSING_ATTRIBUTE));
        let other_nas = coa(|b| {
            b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 4)).unwrap();
            b.nas_identifier("someone-else").unwrap();
            b.attr(attr::FILTER_ID, b"silver").unwrap();
        });
        assert_eq!(
            interpret(&c, &other_nas),
            Err(error_cause::NAS_IDENTIFICATION_MISMATCH)
        );
        let foreign_id = coa(|b| {
            b.acct_session_id("not-ours").unwrap();
            b.attr(attr::FILTER_ID, b"silver").unwrap();
        });
        assert_eq!(
            interpret(&c, &foreign_id).map(|r| r.selector.session_id),
            Ok(Some(None))
        );
    }

    #[test]
    fn a_session_timeout_alone_is_a_change_and_a_malformed_one_is_refused() {
        let c = cfg();
        let ip = Ipv4Addr::new(100, 64, 0, 4);
        let r = interpret(
            &c,
            &coa(|b| {
                b.framed_ip_address(ip).unwrap();
                b.attr(attr::SESSION_TIMEOUT, &3600u32.to_be_bytes())
                    .unwrap();
            }),
        )
        .unwrap();
        assert_eq!((r.plan, r.session_timeout_secs), (None, Some(3600)));
        let short = coa(|b| {
            b.framed_ip_address(ip).unwrap();
            b.attr(attr::SESSION_TIMEOUT, &[0, 1]).unwrap();
        });
        assert_eq!(
            interpret(&c, &short),
            Err(error_cause::INVALID_ATTRIBUTE_VALUE)
        );
    }

    #[test]
    fn an_interim_interval_alone_is_a_change_which_needs_accounting() {
        let mut c = cfg();
        let interim = coa(|b| {
            b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 4)).unwrap();
            b.attr(attr::ACCT_INTERIM_INTERVAL, &600u32.to_be_bytes())
                .unwrap();
        });
        assert_eq!(interpret(&c, &interim).unwrap().interim_secs, Some(600));
        c.accounting = false;
        assert_eq!(
            interpret(&c, &interim),
            Err(error_cause::UNSUPPORTED_ATTRIBUTE)
        );
    }

    #[test]
    fn a_termination_action_alone_is_a_change() {
        let c = cfg();
        let action = |v: u32| {
            coa(|b| {
                b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 4)).unwrap();
                b.attr(attr::TERMINATION_ACTION, &v.to_be_bytes()).unwrap();
            })
        };
        let r = interpret(&c, &action(1)).unwrap();
        assert_eq!((r.session_timeout_secs, r.reauthorize), (None, Some(true)));
        assert_eq!(interpret(&c, &action(0)).unwrap().reauthorize, Some(false));
    }

    #[test]
    fn apply_sets_the_termination_action_with_or_without_a_timeout() {
        let (mut e, id, ip, _) = bound_engine();
        let coa = DasRequest {
            session_timeout_secs: Some(60),
            reauthorize: Some(true),
            ..coa_to(ip)
        };
        assert_eq!(apply(&mut e, &coa, 1).answer, DasAnswer::Ack);
        let s = e.session(id).unwrap();
        assert!(s.reauthorize_at_end && s.ends_at_ns.is_some());
        // Default again, the timeout kept: the session ends at it.
        let coa = DasRequest {
            session_timeout_secs: None,
            reauthorize: Some(false),
            ..coa
        };
        assert_eq!(apply(&mut e, &coa, 2).answer, DasAnswer::Ack);
        let s = e.session(id).unwrap();
        assert!(!s.reauthorize_at_end && s.ends_at_ns.is_some());
    }

    #[test]
    fn an_idle_timeout_alone_is_a_change_which_needs_accounting() {
        let mut c = cfg();
        let ip = Ipv4Addr::new(100, 64, 0, 4);
        let idle = |v: &[u8]| {
            coa(|b| {
                b.framed_ip_address(ip).unwrap();
                b.attr(attr::IDLE_TIMEOUT, v).unwrap();
            })
        };
        let r = interpret(&c, &idle(&300u32.to_be_bytes())).unwrap();
        assert_eq!(
            (r.plan, r.session_timeout_secs, r.idle_timeout_secs),
            (None, None, Some(300))
        );
        assert_eq!(
            interpret(&c, &idle(&[1, 2, 3])),
            Err(error_cause::INVALID_ATTRIBUTE_VALUE)
        );
        c.accounting = false;
        assert_eq!(
            interpret(&c, &idle(&300u32.to_be_bytes())),
            Err(error_cause::UNSUPPORTED_ATTRIBUTE)
        );
    }

    #[test]
    fn a_class_alone_is_a_change_while_accounting_and_ignored_without() {
        let mut c = cfg();
        let classes = coa(|b| {
            b.framed_ip_address(Ipv4Addr::new(100, 64, 0, 4)).unwrap();
            b.attr(attr::CLASS, b"billing-2").unwrap();
            b.attr(attr::CLASS, &[0, 0xff]).unwrap();
        });
        let r = interpret(&c, &classes).unwrap();
        assert_eq!(r.class, Some(vec![b"billing-2".to_vec(), vec![0, 0xff]]));
        assert_eq!(r.plan, None, "the plan comes from Filter-Id here");
        c.accounting = false;
        assert_eq!(
            interpret(&c, &classes),
            Err(error_cause::MISSING_ATTRIBUTE),
            "nothing the NAS changes"
        );
    }

    #[test]
    fn apply_sets_the_timeouts_unless_the_plan_is_refused() {
        let (mut e, id, ip, _) = bound_engine();
        let coa = DasRequest {
            plan: Some("platinum".into()),
            session_timeout_secs: Some(60),
            idle_timeout_secs: Some(300),
            ..coa_to(ip)
        };
        let a = apply(&mut e, &coa, 1);
        assert_eq!(
            a.answer,
            DasAnswer::Nak(error_cause::INVALID_ATTRIBUTE_VALUE)
        );
        assert_eq!(a.acct, None, "a refused CoA changes no idleness either");
        assert_eq!(
            e.session(id).and_then(|s| s.ends_at_ns),
            None,
            "nothing changed"
        );
        let coa = DasRequest { plan: None, ..coa };
        let a = apply(&mut e, &coa, 1);
        assert_eq!(a.answer, DasAnswer::Ack);
        assert_eq!(
            a.acct,
            Some(AcctChange {
                id,
                idle_secs: Some(300),
                interim_secs: None,
                class: None
            }),
            "the session the CoA named"
        );
        assert_eq!(
            e.session(id).and_then(|s| s.ends_at_ns).map(|t| t.get()),
            Some(1 + 60 * crate::core::session::NS_PER_SEC)
        );
    }

    /// A CoA for the session at `ip` that changes nothing yet.
    fn coa_to(ip: Ipv4Addr) -> DasRequest {
        DasRequest {
            kind: CoaKind::Coa,
            selector: Selector {
                ip: Some(ip),
                ..Selector::default()
            },
            plan: None,
            session_timeout_secs: None,
            reauthorize: None,
            idle_timeout_secs: None,
            interim_secs: None,
            class: None,
        }
    }

    /// An engine with one session bound by an external Accept: (engine, id, ip, mac).
    fn bound_engine() -> (Engine, SessionId, Ipv4Addr, MacAddr) {
        use crate::core::aaa::{AddressChoice, AuthOutcome};
        use crate::core::dhcp::tests::client_frame;
        use crate::core::engine::UnknownPolicy;
        use crate::core::test_support::{authorized, cap, engine_config};
        use kbng_wire::{DhcpMessageType, DhcpOp, DhcpRepr};
        let mut cfg = engine_config(UnknownPolicy::Captive);
        cfg.external_auth = true;
        let mut e = Engine::new(cfg, cap(10), 0).unwrap();
        let mac = kbng_wire::MacAddr([2, 0, 0, 0, 1, 1]);
        let d = DhcpRepr::new(DhcpOp::BootRequest, DhcpMessageType::Discover, 1, mac);
        let out = e.handle_dhcp(0, 0, &client_frame(&d, None), 0);
        let id = authorized(&out).unwrap();
        e.auth_result(
            id,
            AuthOutcome::Accept {
                plan: None,
                session_timeout_secs: None,
                address: AddressChoice::Any,
                reauthorize: false,
            },
            0,
        );
        let ip = e.session(id).unwrap().state.ip().unwrap();
        let mut r = DhcpRepr::new(DhcpOp::BootRequest, DhcpMessageType::Request, 2, mac);
        r.requested_ip = Some(ip);
        r.server_id = Some(Ipv4Addr::new(100, 64, 0, 1));
        e.handle_dhcp(0, 0, &client_frame(&r, None), 0);
        assert_eq!(e.session(id).unwrap().state.name(), "active");
        (e, id, ip, mac.0)
    }

    #[test]
    fn every_given_identifier_must_match_the_bound_session() {
        let (e, id, ip, mac) = bound_engine();
        let sel = |session_id, ip, mac| Selector {
            session_id,
            ip,
            mac,
        };
        assert_eq!(resolve(&e, &sel(Some(Some(id)), None, None)), Ok(id));
        assert_eq!(resolve(&e, &sel(None, Some(ip), Some(mac))), Ok(id));
        assert_eq!(resolve(&e, &sel(None, None, Some(mac))), Ok(id));
        let nf = Err(error_cause::SESSION_CONTEXT_NOT_FOUND);
        assert_eq!(
            resolve(
                &e,
                &sel(Some(Some(id)), Some(Ipv4Addr::new(100, 64, 0, 99)), None)
            ),
            nf
        );
        assert_eq!(resolve(&e, &sel(Some(Some(id + 1)), None, None)), nf);
        assert_eq!(resolve(&e, &sel(Some(None), Some(ip), None)), nf);
        assert_eq!(
            resolve(&e, &sel(None, Some(ip), Some([2, 0, 0, 0, 9, 9]))),
            nf
        );
    }

    #[test]
    fn apply_changes_the_plan_then_disconnects() {
        let (mut e, _, ip, _) = bound_engine();
        let coa = DasRequest {
            plan: Some("silver".into()),
            ..coa_to(ip)
        };
        let Applied { out, answer: a, .. } = apply(&mut e, &coa, 1);
        assert_eq!(a, DasAnswer::Ack);
        assert!(!out.is_empty());
        assert_eq!(e.desired(0)[0].plan_id, 11);
        let bad = DasRequest {
            plan: Some("platinum".into()),
            ..coa.clone()
        };
        assert_eq!(
            apply(&mut e, &bad, 2).answer,
            DasAnswer::Nak(error_cause::INVALID_ATTRIBUTE_VALUE)
        );
        let bye = DasRequest {
            kind: CoaKind::Disconnect,
            plan: None,
            ..coa
        };
        assert_eq!(apply(&mut e, &bye, 3).answer, DasAnswer::Ack);
        assert!(e.desired(0).is_empty());
        // Releasing is not bound: a second request finds nothing.
        assert_eq!(
            apply(&mut e, &bye, 4).answer,
            DasAnswer::Nak(error_cause::SESSION_CONTEXT_NOT_FOUND)
        );
    }
}
