//! How a session is written into a store row: one version byte, then a protobuf message.
//!
//! The first format was the session's serde JSON (about 570 bytes a row, and half of a
//! restart's restore went to parsing it). Protobuf keeps what JSON gave (fields can be added
//! later without breaking old rows: unknown tags are skipped, missing ones take defaults) at a
//! fifth of the size, and prost is already in the build for the gRPC API. The stored types use
//! internally tagged serde enums, which no compact serde format can decode, hence these row
//! types of their own.
//!
//! Rows written before this format start with `{` (JSON) and are still read; a row is
//! rewritten in the new format the next time its session changes.

use std::net::Ipv4Addr;
use std::num::NonZeroU64;

use prost::Message;

use crate::core::Line;
use crate::core::engine::{Opt82Key, Session, SubscriberKey};
use crate::core::session::{EndReason, Grant, Lease, RenewPhase, State};

/// The first byte of a protobuf row (a JSON row's first byte is `{`).
const PROTOBUF_V1: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("JSON row: {0}")]
    Json(#[from] serde_json::Error),
    #[error("protobuf row: {0}")]
    Protobuf(#[from] prost::DecodeError),
    #[error("row field {0} is missing or out of range")]
    Field(&'static str),
    #[error("empty row")]
    Empty,
    #[error("unknown row format (first byte {0:#04x})")]
    Format(u8),
}

/// Appends the row of `s` to `out`.
pub fn encode(s: &Session, out: &mut Vec<u8>) {
    out.push(PROTOBUF_V1);
    let row = SessionRow::from(s);
    out.reserve(row.encoded_len());
    row.encode(out).expect("a Vec grows as needed");
}

/// The session a row holds, in either format.
pub fn decode(bytes: &[u8]) -> Result<Session, RowError> {
    match bytes.first() {
        None => Err(RowError::Empty),
        Some(b'{') => Ok(serde_json::from_slice(bytes)?),
        Some(&PROTOBUF_V1) => SessionRow::decode(&bytes[1..])?.try_into(),
        Some(&other) => Err(RowError::Format(other)),
    }
}

#[derive(Clone, PartialEq, Message)]
struct SessionRow {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, optional, tag = "2")]
    key: Option<KeyRow>,
    #[prost(message, optional, tag = "3")]
    line: Option<LineRow>,
    #[prost(bytes = "vec", tag = "4")]
    mac: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "5")]
    circuit_id: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "6")]
    remote_id: Option<Vec<u8>>,
    #[prost(uint64, tag = "7")]
    created_ns: u64,
    #[prost(uint64, optional, tag = "8")]
    ends_at_ns: Option<u64>,
    #[prost(bool, tag = "9")]
    reauthorize_at_end: bool,
    #[prost(oneof = "StateRow", tags = "10, 11, 12, 13, 14, 15, 16, 17")]
    state: Option<StateRow>,
}

/// The subscriber key: by line and MAC, or by option 82 on a dataplane.
#[derive(Clone, PartialEq, Message)]
struct KeyRow {
    #[prost(message, optional, tag = "1")]
    line: Option<LineRow>,
    #[prost(bytes = "vec", optional, tag = "2")]
    mac: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "3")]
    opt82_dataplane: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "4")]
    circuit_id: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    remote_id: Option<Vec<u8>>,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct LineRow {
    #[prost(uint32, tag = "1")]
    dataplane: u32,
    #[prost(uint32, tag = "2")]
    port: u32,
    #[prost(uint32, tag = "3")]
    outer_vlan: u32,
    #[prost(uint32, tag = "4")]
    inner_vlan: u32,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum StateRow {
    #[prost(message, tag = "10")]
    Discovering(PendingRow),
    #[prost(message, tag = "11")]
    Offered(OfferedRow),
    #[prost(message, tag = "12")]
    Authenticating(PendingRow),
    #[prost(message, tag = "13")]
    Active(BoundRow),
    #[prost(message, tag = "14")]
    Captive(BoundRow),
    #[prost(message, tag = "15")]
    Renewing(BoundRow),
    #[prost(message, tag = "16")]
    Releasing(ReleasingRow),
    #[prost(message, tag = "17")]
    Expired(ReleasingRow),
}

#[derive(Clone, Copy, PartialEq, Message)]
struct PendingRow {
    #[prost(uint32, tag = "1")]
    xid: u32,
    #[prost(fixed32, tag = "2")]
    ip: u32,
    #[prost(uint64, tag = "3")]
    since_ns: u64,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct OfferedRow {
    #[prost(uint32, tag = "1")]
    xid: u32,
    #[prost(fixed32, tag = "2")]
    ip: u32,
    #[prost(message, optional, tag = "3")]
    grant: Option<GrantRow>,
    #[prost(uint64, tag = "4")]
    until_ns: u64,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct GrantRow {
    #[prost(uint32, tag = "1")]
    plan_id: u32,
    #[prost(bool, tag = "2")]
    captive: bool,
    #[prost(bool, tag = "3")]
    over_cap: bool,
}

/// Active (plan), Captive (plan, over cap) and Renewing (grant, phase) all hold a lease.
#[derive(Clone, Copy, PartialEq, Message)]
struct BoundRow {
    #[prost(message, optional, tag = "1")]
    lease: Option<LeaseRow>,
    #[prost(message, optional, tag = "2")]
    grant: Option<GrantRow>,
    /// Renewing only: 0 renewing, 1 rebinding.
    #[prost(uint32, tag = "3")]
    phase: u32,
}

#[derive(Clone, Copy, PartialEq, Message)]
struct LeaseRow {
    #[prost(fixed32, tag = "1")]
    ip: u32,
    #[prost(uint32, tag = "2")]
    lease_secs: u32,
    #[prost(uint64, tag = "3")]
    bound_at_ns: u64,
    #[prost(uint64, tag = "4")]
    renewed_at_ns: u64,
}

/// Releasing (address, since, reason) and Expired (reason).
#[derive(Clone, Copy, PartialEq, Message)]
struct ReleasingRow {
    #[prost(fixed32, tag = "1")]
    ip: u32,
    #[prost(uint64, tag = "2")]
    since_ns: u64,
    #[prost(uint32, tag = "3")]
    reason: u32,
}

// ---------------------------------------------------------------- session -> row

impl From<&Session> for SessionRow {
    fn from(s: &Session) -> Self {
        SessionRow {
            id: s.id,
            key: Some(match &s.key {
                SubscriberKey::Mac { line, mac } => KeyRow {
                    line: Some(line.into()),
                    mac: Some(mac.to_vec()),
                    ..KeyRow::default()
                },
                SubscriberKey::Opt82(k) => KeyRow {
                    opt82_dataplane: Some(k.dataplane),
                    circuit_id: k.circuit_id.clone(),
                    remote_id: k.remote_id.clone(),
                    ..KeyRow::default()
                },
            }),
            line: Some((&s.line).into()),
            mac: s.mac.to_vec(),
            circuit_id: s.circuit_id.clone(),
            remote_id: s.remote_id.clone(),
            created_ns: s.created_ns,
            ends_at_ns: s.ends_at_ns.map(NonZeroU64::get),
            reauthorize_at_end: s.reauthorize_at_end,
            state: Some(state_row(&s.state)),
        }
    }
}

impl From<&Line> for LineRow {
    fn from(l: &Line) -> Self {
        LineRow {
            dataplane: l.dataplane,
            port: l.port,
            outer_vlan: u32::from(l.outer_vlan),
            inner_vlan: u32::from(l.inner_vlan),
        }
    }
}

fn grant_row(g: &Grant) -> GrantRow {
    match *g {
        Grant::Active { plan_id } => GrantRow {
            plan_id,
            captive: false,
            over_cap: false,
        },
        Grant::Captive { plan_id, over_cap } => GrantRow {
            plan_id,
            captive: true,
            over_cap,
        },
    }
}

fn lease_row(l: &Lease) -> Option<LeaseRow> {
    Some(LeaseRow {
        ip: u32::from(l.ip),
        lease_secs: l.lease_secs,
        bound_at_ns: l.bound_at_ns,
        renewed_at_ns: l.renewed_at_ns,
    })
}

fn state_row(s: &State) -> StateRow {
    let pending = |xid, ip: &Ipv4Addr, since_ns| PendingRow {
        xid,
        ip: u32::from(*ip),
        since_ns,
    };
    match s {
        State::Discovering { xid, ip, since_ns } => {
            StateRow::Discovering(pending(*xid, ip, *since_ns))
        }
        State::Authenticating { xid, ip, since_ns } => {
            StateRow::Authenticating(pending(*xid, ip, *since_ns))
        }
        State::Offered {
            xid,
            ip,
            grant,
            until_ns,
        } => StateRow::Offered(OfferedRow {
            xid: *xid,
            ip: u32::from(*ip),
            grant: Some(grant_row(grant)),
            until_ns: *until_ns,
        }),
        State::Active { lease, plan_id } => StateRow::Active(BoundRow {
            lease: lease_row(lease),
            grant: Some(grant_row(&Grant::Active { plan_id: *plan_id })),
            phase: 0,
        }),
        State::Captive {
            lease,
            plan_id,
            over_cap,
        } => StateRow::Captive(BoundRow {
            lease: lease_row(lease),
            grant: Some(grant_row(&Grant::Captive {
                plan_id: *plan_id,
                over_cap: *over_cap,
            })),
            phase: 0,
        }),
        State::Renewing {
            lease,
            grant,
            phase,
        } => StateRow::Renewing(BoundRow {
            lease: lease_row(lease),
            grant: Some(grant_row(grant)),
            phase: match phase {
                RenewPhase::Renewing => 0,
                RenewPhase::Rebinding => 1,
            },
        }),
        State::Releasing {
            ip,
            since_ns,
            reason,
        } => StateRow::Releasing(ReleasingRow {
            ip: u32::from(*ip),
            since_ns: *since_ns,
            reason: reason_code(*reason),
        }),
        State::Expired { reason } => StateRow::Expired(ReleasingRow {
            reason: reason_code(*reason),
            ..ReleasingRow::default()
        }),
    }
}

/// Stable codes: a stored row outlives any reordering of the enum.
const REASONS: [(EndReason, u32); 12] = [
    (EndReason::Released, 1),
    (EndReason::LeaseExpired, 2),
    (EndReason::Declined, 3),
    (EndReason::OfferTimeout, 4),
    (EndReason::Rejected, 5),
    (EndReason::AuthTimeout, 6),
    (EndReason::Disconnected, 7),
    (EndReason::Drained, 8),
    (EndReason::Refused, 9),
    (EndReason::IdleTimeout, 10),
    (EndReason::SessionTimeout, 11),
    (EndReason::Replaced, 12),
];

fn reason_code(r: EndReason) -> u32 {
    REASONS.iter().find(|(x, _)| *x == r).map_or(0, |(_, c)| *c)
}

// ---------------------------------------------------------------- row -> session

fn reason(code: u32) -> Result<EndReason, RowError> {
    REASONS
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(r, _)| *r)
        .ok_or(RowError::Field("reason"))
}

fn line(l: Option<LineRow>, field: &'static str) -> Result<Line, RowError> {
    let l = l.ok_or(RowError::Field(field))?;
    let vlan = |v: u32| u16::try_from(v).map_err(|_| RowError::Field(field));
    Ok(Line {
        dataplane: l.dataplane,
        port: l.port,
        outer_vlan: vlan(l.outer_vlan)?,
        inner_vlan: vlan(l.inner_vlan)?,
    })
}

fn mac(m: &[u8], field: &'static str) -> Result<[u8; 6], RowError> {
    m.try_into().map_err(|_| RowError::Field(field))
}

fn grant(g: Option<GrantRow>) -> Result<Grant, RowError> {
    let g = g.ok_or(RowError::Field("grant"))?;
    Ok(if g.captive {
        Grant::Captive {
            plan_id: g.plan_id,
            over_cap: g.over_cap,
        }
    } else {
        Grant::Active { plan_id: g.plan_id }
    })
}

fn lease(b: &BoundRow) -> Result<Lease, RowError> {
    let l = b.lease.ok_or(RowError::Field("lease"))?;
    Ok(Lease {
        ip: Ipv4Addr::from(l.ip),
        lease_secs: l.lease_secs,
        bound_at_ns: l.bound_at_ns,
        renewed_at_ns: l.renewed_at_ns,
    })
}

fn state(s: StateRow) -> Result<State, RowError> {
    Ok(match s {
        StateRow::Discovering(p) => State::Discovering {
            xid: p.xid,
            ip: Ipv4Addr::from(p.ip),
            since_ns: p.since_ns,
        },
        StateRow::Authenticating(p) => State::Authenticating {
            xid: p.xid,
            ip: Ipv4Addr::from(p.ip),
            since_ns: p.since_ns,
        },
        StateRow::Offered(o) => State::Offered {
            xid: o.xid,
            ip: Ipv4Addr::from(o.ip),
            grant: grant(o.grant)?,
            until_ns: o.until_ns,
        },
        StateRow::Active(b) => State::Active {
            lease: lease(&b)?,
            plan_id: grant(b.grant)?.plan_id(),
        },
        StateRow::Captive(b) => match grant(b.grant)? {
            Grant::Captive { plan_id, over_cap } => State::Captive {
                lease: lease(&b)?,
                plan_id,
                over_cap,
            },
            Grant::Active { .. } => return Err(RowError::Field("grant")),
        },
        StateRow::Renewing(b) => State::Renewing {
            lease: lease(&b)?,
            grant: grant(b.grant)?,
            phase: match b.phase {
                0 => RenewPhase::Renewing,
                1 => RenewPhase::Rebinding,
                _ => return Err(RowError::Field("phase")),
            },
        },
        StateRow::Releasing(r) => State::Releasing {
            ip: Ipv4Addr::from(r.ip),
            since_ns: r.since_ns,
            reason: reason(r.reason)?,
        },
        StateRow::Expired(r) => State::Expired {
            reason: reason(r.reason)?,
        },
    })
}

impl TryFrom<SessionRow> for Session {
    type Error = RowError;

    fn try_from(r: SessionRow) -> Result<Session, RowError> {
        let k = r.key.ok_or(RowError::Field("key"))?;
        let key = match k.opt82_dataplane {
            Some(dataplane) => SubscriberKey::Opt82(Box::new(Opt82Key {
                dataplane,
                circuit_id: k.circuit_id,
                remote_id: k.remote_id,
            })),
            None => SubscriberKey::Mac {
                line: line(k.line, "key.line")?,
                mac: mac(k.mac.as_deref().unwrap_or_default(), "key.mac")?,
            },
        };
        Ok(Session {
            id: r.id,
            key,
            line: line(r.line, "line")?,
            mac: mac(&r.mac, "mac")?,
            circuit_id: r.circuit_id,
            remote_id: r.remote_id,
            created_ns: r.created_ns,
            state: state(r.state.ok_or(RowError::Field("state"))?)?,
            ends_at_ns: r.ends_at_ns.and_then(NonZeroU64::new),
            reauthorize_at_end: r.reauthorize_at_end,
            pending: None,
            last_offer_ns: 0,
        })
    }
}

#[cfg(test)]
#[path = "row_tests.rs"]
mod tests;
