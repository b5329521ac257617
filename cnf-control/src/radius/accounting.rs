//! Accounting (RFC 2866, Interim-Update from RFC 2869 §2.1): Start when a session binds,
//! Interim-Update every interval (configured, or the Access-Accept's Acct-Interim-Interval),
//! Stop with its Acct-Terminate-Cause when it ends.
//!
//! Octets and packets are the dataplane's per-session counters of delivered traffic: every
//! colour's packets and bytes less those its plan's action dropped (a plan may transmit or
//! re-mark red as well as drop it). Upstream is the NAS's input, downstream its output. A Stop carries the counters read just before the
//! dataplane removed the session (`super::finals`); only when that read failed (the dataplane
//! was unreachable) does it carry the last interim's, counted as such.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_client::DataplaneClient;
use kbng_wire::radius::{attr, value};
use tonic::transport::Channel;

use super::Req;
use super::auth::{Subject, nas_attributes};
use super::config::RadiusConfig;
use crate::core::SessionId;
use crate::core::session::{EndReason, NS_PER_SEC};
use crate::dataplane::sessions_request;

/// Acct-Session-Id of session `id`: its id in hex, stable for the session's life and unique
/// per control (ids are never reused).
pub fn acct_session_id(id: SessionId) -> String {
    format!("{id:016x}")
}

pub fn parse_acct_session_id(v: &[u8]) -> Option<SessionId> {
    let s = std::str::from_utf8(v).ok()?;
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    SessionId::from_str_radix(s, 16).ok()
}

/// Acct-Terminate-Cause (RFC 2866 §5.10) for why a session ended.
pub fn terminate_cause(r: EndReason) -> u32 {
    match r {
        EndReason::Released => value::TERMINATE_USER_REQUEST,
        // The lease is the session's time limit, and it ran out without a renewal.
        EndReason::LeaseExpired | EndReason::SessionTimeout => value::TERMINATE_SESSION_TIMEOUT,
        EndReason::Declined => value::TERMINATE_USER_ERROR,
        // A Disconnect-Request (RFC 5176) or an operator's removal of this one session.
        EndReason::Disconnected => value::TERMINATE_ADMIN_RESET,
        // The dataplane would not take it: the NAS's own fault, not the subscriber's.
        EndReason::Refused => value::TERMINATE_NAS_ERROR,
        EndReason::IdleTimeout => value::TERMINATE_IDLE_TIMEOUT,
        // Another device took the subscriber's line or option 82 identity.
        EndReason::Replaced => value::TERMINATE_PORT_PREEMPTED,
        EndReason::Drained
        | EndReason::OfferTimeout
        | EndReason::AuthTimeout
        | EndReason::Rejected => value::TERMINATE_NAS_REQUEST,
    }
}

/// Delivered traffic of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub in_octets: u64,
    pub in_packets: u64,
    pub out_octets: u64,
    pub out_packets: u64,
}

impl Counts {
    fn plus(self, o: Counts) -> Counts {
        Counts {
            in_octets: self.in_octets.saturating_add(o.in_octets),
            in_packets: self.in_packets.saturating_add(o.in_packets),
            out_octets: self.out_octets.saturating_add(o.out_octets),
            out_packets: self.out_packets.saturating_add(o.out_packets),
        }
    }

    /// Some counter is below `earlier`'s: these were counted afresh since.
    fn below(&self, earlier: &Counts) -> bool {
        self.in_octets < earlier.in_octets
            || self.in_packets < earlier.in_packets
            || self.out_octets < earlier.out_octets
            || self.out_packets < earlier.out_packets
    }

    pub fn from_proto(c: &pb::SessionCounters) -> Counts {
        let dir = |d: Option<&pb::ColourCounters>| {
            d.map_or((0, 0), |d| {
                let bytes = d.green_bytes.saturating_add(d.yellow_bytes);
                let bytes = bytes.saturating_add(d.red_bytes);
                let packets = d.green_packets.saturating_add(d.yellow_packets);
                let packets = packets.saturating_add(d.red_packets);
                (
                    bytes.saturating_sub(d.dropped_bytes),
                    packets.saturating_sub(d.dropped_packets),
                )
            })
        };
        let (in_octets, in_packets) = dir(c.upstream.as_ref());
        let (out_octets, out_packets) = dir(c.downstream.as_ref());
        Counts {
            in_octets,
            in_packets,
            out_octets,
            out_packets,
        }
    }
}

/// One session's counters as a dataplane gave them, and which boot of that dataplane counted
/// them (`GetCountersResponse.boot_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub boot_id: u64,
    pub counts: Counts,
}

/// A session the accounting knows, from Start (or from the store at start-up) to Stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcctSession {
    pub subject: Subject,
    pub user_name: String,
    pub ip: Ipv4Addr,
    /// When it first bound (Unix ns): Acct-Session-Time counts from here.
    pub bound_at_ns: u64,
    /// 0 = no interim updates.
    pub interim_secs: u32,
    /// Traffic counted before the dataplane last began counting the session afresh.
    pub carried: Counts,
    /// The last reading, as the dataplane gave it.
    pub raw: Option<Reading>,
    /// The Access-Accept's Class attributes, sent back in every Accounting-Request.
    pub class: Vec<Vec<u8>>,
    /// The Access-Accept's Idle-Timeout; 0 = none.
    pub idle_secs: u32,
    /// With an Idle-Timeout: the last sighting of upstream traffic, kept so that a control
    /// restart does not start the idle count afresh.
    pub idle_seen: Option<IdleSeen>,
    /// Which of the RADIUS task's schedules hold an entry for it (not kept).
    pub queued: Queued,
}

/// Whether a session is in the RADIUS task's interim and read schedules: each holds at most
/// one entry per session, which reschedules itself, so a change of interval that starts a
/// schedule must know whether one runs already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Queued {
    pub interim: bool,
    pub read: bool,
}

/// The upstream packets (in the totals) a session had when its traffic was last seen to move,
/// and when that was (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleSeen {
    pub packets: u64,
    pub at_unix_secs: u64,
}

impl AcctSession {
    /// Takes a reading into the totals. A dataplane counts a session from zero again when it
    /// restarts (another boot id; the control reinstalls its sessions) or reinstalls it (a
    /// counter below the last reading), while RADIUS wants totals since Start: reported as
    /// read, Acct-Input-Octets would go backwards and a billing server that keeps the last
    /// interim would lose the traffic before the restart.
    pub fn read(&mut self, r: Reading) {
        if let Some(prev) = self.raw
            && (prev.boot_id != r.boot_id || r.counts.below(&prev.counts))
        {
            self.carried = self.carried.plus(prev.counts);
        }
        self.raw = Some(r);
    }

    /// The totals reported: traffic since Start, as far as it was read.
    pub fn totals(&self) -> Counts {
        self.carried
            .plus(self.raw.map_or(Counts::default(), |r| r.counts))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Start,
    Interim,
    Stop(EndReason),
}

fn push_u32(a: &mut Vec<(u8, Vec<u8>)>, kind: u8, v: u32) {
    a.push((kind, v.to_be_bytes().to_vec()));
}

/// A 64-bit counter as the 32-bit attribute and, past 2^32, its gigawords (RFC 2869 §5.1).
fn push_u64(a: &mut Vec<(u8, Vec<u8>)>, low: u8, high: u8, v: u64) {
    let wraps = u32::try_from(v >> 32).unwrap_or(u32::MAX);
    if wraps > 0 {
        push_u32(a, high, wraps);
    }
    // The low 32 bits are the encoding.
    push_u32(a, low, v as u32);
}

/// The Accounting-Request for `s` at `now_ns` (Unix).
pub fn request(cfg: &RadiusConfig, s: &AcctSession, status: Status, now_ns: u64) -> Req {
    let mut a = Vec::new();
    let st = match status {
        Status::Start => value::ACCT_START,
        Status::Interim => value::ACCT_INTERIM_UPDATE,
        Status::Stop(_) => value::ACCT_STOP,
    };
    push_u32(&mut a, attr::ACCT_STATUS_TYPE, st);
    a.push((
        attr::ACCT_SESSION_ID,
        acct_session_id(s.subject.id).into_bytes(),
    ));
    a.push((attr::USER_NAME, s.user_name.clone().into_bytes()));
    a.extend(nas_attributes(cfg, &s.subject));
    a.push((attr::FRAMED_IP_ADDRESS, s.ip.octets().to_vec()));
    a.extend(s.class.iter().map(|c| (attr::CLASS, c.clone())));
    let now_secs = now_ns / NS_PER_SEC;
    push_u32(
        &mut a,
        attr::EVENT_TIMESTAMP,
        u32::try_from(now_secs).unwrap_or(u32::MAX),
    );
    if status != Status::Start {
        let secs = now_ns.saturating_sub(s.bound_at_ns) / NS_PER_SEC;
        push_u32(
            &mut a,
            attr::ACCT_SESSION_TIME,
            u32::try_from(secs).unwrap_or(u32::MAX),
        );
        let c = s.totals();
        push_u64(
            &mut a,
            attr::ACCT_INPUT_OCTETS,
            attr::ACCT_INPUT_GIGAWORDS,
            c.in_octets,
        );
        push_u64(
            &mut a,
            attr::ACCT_OUTPUT_OCTETS,
            attr::ACCT_OUTPUT_GIGAWORDS,
            c.out_octets,
        );
        push_u32(
            &mut a,
            attr::ACCT_INPUT_PACKETS,
            u32::try_from(c.in_packets).unwrap_or(u32::MAX),
        );
        push_u32(
            &mut a,
            attr::ACCT_OUTPUT_PACKETS,
            u32::try_from(c.out_packets).unwrap_or(u32::MAX),
        );
    }
    if let Status::Stop(r) = status {
        push_u32(&mut a, attr::ACCT_TERMINATE_CAUSE, terminate_cause(r));
    }
    Req::Acct {
        session: s.subject.id,
        attrs: a,
    }
}

/// Read the counters of `ids` from the dataplane at `target`. Sessions the dataplane does not
/// hold (any more) are missing from the answer.
pub async fn fetch_counters(
    target: &crate::dataplane::Target,
    ids: &[SessionId],
) -> HashMap<SessionId, Reading> {
    match crate::dataplane::connect(target).await {
        Ok(mut c) => read_counters(&mut c, ids).await,
        Err(_) => HashMap::new(),
    }
}

/// As [`fetch_counters`], for a dataplane that is stopping, and then the last read it waits
/// for: once that is answered it stops. It comes even when there is nothing to read.
pub async fn read_before_stop(
    target: &crate::dataplane::Target,
    ids: &[SessionId],
) -> HashMap<SessionId, Reading> {
    let Ok(mut c) = crate::dataplane::connect(target).await else {
        return HashMap::new();
    };
    let out = read_counters(&mut c, ids).await;
    let _ = c.get_counters(crate::dataplane::last_read_request()).await;
    out
}

/// Read the counters of `ids` over an open connection; missing ids are left out.
pub async fn read_counters(
    c: &mut DataplaneClient<Channel>,
    ids: &[SessionId],
) -> HashMap<SessionId, Reading> {
    let mut out = HashMap::new();
    let mut take = |r: &pb::GetCountersResponse| {
        for s in &r.sessions {
            let counts = Counts::from_proto(s);
            out.insert(
                s.session_id,
                Reading {
                    boot_id: r.boot_id,
                    counts,
                },
            );
        }
    };
    for chunk in ids.chunks(1000) {
        match c.get_counters(sessions_request(chunk.to_vec())).await {
            Ok(r) => take(r.get_ref()),
            // One unknown id fails the whole request: ask one by one.
            Err(e) if e.code() == tonic::Code::NotFound => {
                for id in chunk {
                    if let Ok(r) = c.get_counters(sessions_request(vec![*id])).await {
                        take(r.get_ref());
                    }
                }
            }
            Err(_) => return out,
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::Line;
    use crate::radius::auth::tests::cfg;
    use crate::radius::client::Request;
    use kbng_wire::radius_auth::verify_accounting_style_request;

    pub(crate) fn session() -> AcctSession {
        AcctSession {
            subject: Subject {
                id: 0x2a,
                mac: [2, 0, 0, 0, 1, 1],
                circuit_id: None,
                remote_id: Some(b"cpe-7".to_vec()),
                line: Line {
                    dataplane: 0,
                    port: 0,
                    outer_vlan: 0,
                    inner_vlan: 0,
                },
            },
            user_name: "02:00:00:00:01:01".into(),
            ip: Ipv4Addr::new(100, 64, 0, 4),
            bound_at_ns: 1_000 * NS_PER_SEC,
            interim_secs: 60,
            carried: Counts::default(),
            raw: Some(Reading {
                boot_id: 1,
                counts: Counts {
                    in_octets: (3 << 32) + 10,
                    in_packets: 20,
                    out_octets: 3000,
                    out_packets: 4,
                },
            }),
            class: vec![b"billing-1".to_vec(), vec![0, 0xff]],
            idle_secs: 0,
            idle_seen: None,
            queued: Default::default(),
        }
    }

    fn counts(in_octets: u64, out_octets: u64) -> Counts {
        Counts {
            in_octets,
            in_packets: in_octets / 100,
            out_octets,
            out_packets: out_octets / 100,
        }
    }

    #[test]
    fn totals_carry_over_a_dataplane_counting_afresh() {
        // Not read yet, as after Start or a control restart.
        let mut s = AcctSession {
            raw: None,
            ..session()
        };
        let read = |s: &mut AcctSession, boot_id, i, o| {
            s.read(Reading {
                boot_id,
                counts: counts(i, o),
            });
            (s.totals().in_octets, s.totals().out_octets)
        };
        // The first reading is the total (a control restart starts from the dataplane's own
        // counters).
        assert_eq!(read(&mut s, 7, 1_000, 5_000), (1_000, 5_000));
        assert_eq!(read(&mut s, 7, 1_500, 9_000), (1_500, 9_000));
        // The dataplane restarted and the session was reinstalled: its counters begin again,
        // even past the old ones, and the totals carry what was counted before.
        assert_eq!(read(&mut s, 8, 2_000, 100), (3_500, 9_100));
        assert_eq!(read(&mut s, 8, 2_100, 200), (3_600, 9_200));
        // Same boot, counters below the last reading: reinstalled there; carried too.
        assert_eq!(read(&mut s, 8, 50, 60), (3_650, 9_260));
        // Packets alike: 15 before the restart, 21 before the reinstall, 0 since.
        assert_eq!(s.totals().in_packets, 15 + 21);
    }

    fn u32_of(p: &kbng_wire::RadiusPacket<&[u8]>, k: u8) -> Option<u32> {
        p.attr(k)
            .and_then(|v| <[u8; 4]>::try_from(v).ok())
            .map(u32::from_be_bytes)
    }

    #[test]
    fn stop_carries_time_counters_with_gigawords_and_cause() {
        let c = cfg();
        let req = request(
            &c,
            &session(),
            Status::Stop(EndReason::Disconnected),
            1_090 * NS_PER_SEC,
        );
        let bytes = req.build(3, [0; 16], b"s3cret").unwrap();
        let p = verify_accounting_style_request(&bytes, b"s3cret").unwrap();
        assert_eq!(
            p.attr(attr::ACCT_SESSION_ID),
            Some(&b"000000000000002a"[..])
        );
        assert_eq!(u32_of(&p, attr::ACCT_STATUS_TYPE), Some(2));
        assert_eq!(u32_of(&p, attr::ACCT_SESSION_TIME), Some(90));
        assert_eq!(u32_of(&p, attr::ACCT_INPUT_OCTETS), Some(10));
        assert_eq!(u32_of(&p, attr::ACCT_INPUT_GIGAWORDS), Some(3));
        assert_eq!(u32_of(&p, attr::ACCT_OUTPUT_OCTETS), Some(3000));
        assert_eq!(u32_of(&p, attr::ACCT_OUTPUT_GIGAWORDS), None);
        assert_eq!(u32_of(&p, attr::ACCT_INPUT_PACKETS), Some(20));
        assert_eq!(u32_of(&p, attr::ACCT_TERMINATE_CAUSE), Some(6));
        assert_eq!(p.attr(attr::FRAMED_IP_ADDRESS), Some(&[100, 64, 0, 4][..]));
    }

    #[test]
    fn terminate_causes_per_end() {
        let cause = |r| terminate_cause(r);
        assert_eq!(cause(EndReason::Released), 1); // User-Request
        assert_eq!(cause(EndReason::LeaseExpired), 5); // Session-Timeout
        assert_eq!(cause(EndReason::Disconnected), 6); // Admin-Reset
        assert_eq!(cause(EndReason::Drained), 10); // NAS-Request
        assert_eq!(cause(EndReason::Refused), 9); // NAS-Error
        assert_eq!(cause(EndReason::Replaced), 13); // Port-Preempted
        assert_eq!(cause(EndReason::IdleTimeout), 4); // Idle-Timeout
        assert_eq!(cause(EndReason::SessionTimeout), 5);
        assert_eq!(cause(EndReason::Declined), 17); // User-Error
    }

    #[test]
    fn every_request_sends_the_class_back_unmodified() {
        for st in [
            Status::Start,
            Status::Interim,
            Status::Stop(EndReason::Released),
        ] {
            let req = request(&cfg(), &session(), st, 1_000 * NS_PER_SEC);
            let bytes = req.build(1, [0; 16], b"s3cret").unwrap();
            let p = verify_accounting_style_request(&bytes, b"s3cret").unwrap();
            let class: Vec<Vec<u8>> = p
                .attributes()
                .map_while(Result::ok)
                .filter(|a| a.kind == attr::CLASS)
                .map(|a| a.value.to_vec())
                .collect();
            assert_eq!(class, session().class, "{st:?}");
        }
    }

    #[test]
    fn start_has_no_counters() {
        let req = request(&cfg(), &session(), Status::Start, 1_000 * NS_PER_SEC);
        let bytes = req.build(1, [0; 16], b"s3cret").unwrap();
        let p = verify_accounting_style_request(&bytes, b"s3cret").unwrap();
        assert_eq!(u32_of(&p, attr::ACCT_STATUS_TYPE), Some(1));
        assert_eq!(p.attr(attr::ACCT_INPUT_OCTETS), None);
        assert_eq!(p.attr(attr::ACCT_TERMINATE_CAUSE), None);
    }

    #[test]
    fn session_ids_round_trip() {
        for id in [0, 1, 0x2a, u64::MAX] {
            assert_eq!(
                parse_acct_session_id(acct_session_id(id).as_bytes()),
                Some(id)
            );
        }
        assert_eq!(parse_acct_session_id(b""), None);
        assert_eq!(parse_acct_session_id(b"zz"), None);
        assert_eq!(parse_acct_session_id(b"00000000000000001"), None);
    }

    #[test]
    fn delivered_traffic_is_every_colour_less_what_its_action_dropped() {
        let dir = |red_dropped: bool| pb::ColourCounters {
            green_packets: 2,
            green_bytes: 200,
            yellow_packets: 1,
            yellow_bytes: 100,
            red_packets: 5,
            red_bytes: 500,
            dropped_packets: if red_dropped { 5 } else { 0 },
            dropped_bytes: if red_dropped { 500 } else { 0 },
        };
        // Upstream: red dropped by the plan; downstream: red transmitted (or re-marked).
        let c = pb::SessionCounters {
            session_id: 1,
            upstream: Some(dir(true)),
            downstream: Some(dir(false)),
        };
        assert_eq!(
            Counts::from_proto(&c),
            Counts {
                in_octets: 300,
                in_packets: 3,
                out_octets: 800,
                out_packets: 8
            }
        );
    }
}
