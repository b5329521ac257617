//! Fixtures shared by the engine's script tests (`engine_tests`, `engine_aaa_tests`,
//! `relay_tests`) and the adapters' tests that need an engine or a pool (RADIUS DAS, relay
//! configuration): one engine configuration that each script adjusts, client messages by MAC
//! number, and the engine's outputs picked apart.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::Ipv4Addr;

use kbng_wire::{DhcpMessageType, DhcpOp, DhcpRepr, Ipv4Packet, MacAddr, UdpPacket, parse_l2};

use crate::core::SessionId;
use crate::core::engine::{Engine, EngineConfig, Output, ProgramOp, UnknownPolicy};
use crate::core::licence::{Cap, CapSource};
use crate::core::pacing::PacingConfig;
use crate::core::pool::PoolConfig;
use crate::core::session::NS_PER_SEC;

/// One second in the engine's nanoseconds.
pub(crate) const S: u64 = NS_PER_SEC;

/// The gateway of the test pool, 100.64.0.0/24.
pub(crate) const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);

/// A cap of `n` sessions that needs no licence.
pub(crate) fn cap(n: u64) -> Cap {
    Cap {
        max_sessions: n,
        source: CapSource::FreeBaseline {
            reason: "test".into(),
        },
    }
}

/// Pool `p`: 100.64.0.0/24, gateway .1, 600 s leases, no DNS and no exclusions.
pub(crate) fn pool() -> PoolConfig {
    PoolConfig {
        name: "p".into(),
        network: Ipv4Addr::new(100, 64, 0, 0),
        prefix_len: 24,
        gateway: GW,
        lease_secs: 600,
        dns: vec![],
        exclusions: vec![],
    }
}

/// Local AAA with plans gold (10, the default) and silver (11), captive plan 1, pacing loose
/// enough that scripts are never paced unless they mean to be, 8 sessions per line.
pub(crate) fn engine_config(unknown: UnknownPolicy) -> EngineConfig {
    EngineConfig {
        pools: vec![pool()],
        plans: HashMap::from([("gold".into(), 10), ("silver".into(), 11)]),
        default_plan: 10,
        captive_plan: 1,
        unknown,
        option82_identity: false,
        line_identity: false,
        external_auth: false,
        pacing: PacingConfig {
            rate_per_sec: 1000,
            burst: 100,
            queue: 1000,
            max_wait_ns: 4 * S,
        },
        max_sessions_per_line: 8,
        quarantine_secs: 60,
        reoffer_interval_ns: S / 2,
    }
}

/// Client MAC number `n`: 02:00:00:00:00:nn.
pub(crate) fn mac(n: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, n])
}

/// A client's message of type `t` from MAC number `m`.
pub(crate) fn msg(t: DhcpMessageType, m: u8, xid: u32) -> DhcpRepr {
    DhcpRepr::new(DhcpOp::BootRequest, t, xid, mac(m))
}

/// The DHCP messages the engine injects towards clients, parsed; their UDP checksums verified.
pub(crate) fn replies(out: &[Output]) -> Vec<DhcpRepr> {
    out.iter()
        .filter_map(|o| match o {
            Output::Inject { frame, .. } => {
                let l2 = parse_l2(frame).unwrap();
                let ip = Ipv4Packet::new_checked(&frame[l2.l3_offset()..]).unwrap();
                let udp = UdpPacket::new_checked(ip.payload()).unwrap();
                assert!(udp.verify_checksum(ip.src(), ip.dst()), "UDP checksum");
                Some(DhcpRepr::parse(udp.payload()).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// The dataplane programming among outputs.
/// The session an engine asks the AAA (RADIUS) to authorize among `out`, if any.
pub(crate) fn authorized(out: &[Output]) -> Option<SessionId> {
    out.iter().find_map(|o| match o {
        Output::Authorize { id, .. } => Some(*id),
        _ => None,
    })
}

pub(crate) fn programs(out: &[Output]) -> Vec<ProgramOp> {
    out.iter()
        .filter_map(|o| match o {
            Output::Program { op, .. } => Some(op.clone()),
            _ => None,
        })
        .collect()
}

/// The engine's counter `name` (0 when it has not counted yet).
pub(crate) fn counter(e: &Engine, name: &str) -> u64 {
    e.counters()
        .iter()
        .find(|(k, _)| *k == name)
        .map_or(0, |(_, v)| *v)
}
