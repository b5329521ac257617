//! Synthetic subscriber traffic for benchmarks: `N` QinQ sessions with derived keys and
//! addresses, and a stamper that writes a 64-byte upstream (access) or downstream (uplink)
//! frame of a pseudo-random session into a received buffer. With `net_null` ports the stamper
//! stands in for a traffic generator; its cost is measured on its own (empty pipeline with
//! stamping) and reported next to the pipeline figures.

use crate::command::{Command, apply};
use crate::meter::{SrTcmProfile, TrTcmProfile};
use crate::packet::{PacketBuf, PortId};
use crate::pipeline::Tables;
use crate::tables::{ColourAction, DirPolicy, MeterProfile, Plan, Session, SessionKey};

/// The core-side address of benchmark traffic.
pub const BENCH_CORE_IP: u32 = 0xc000_0201;

/// Session `i` of the benchmark population.
pub fn bench_session(i: u32, plan: u16) -> Session {
    Session {
        key: SessionKey {
            port: 0,
            outer_vid: 1 + (i % 4000) as u16,
            inner_vid: 1 + ((i / 4000) % 4000) as u16,
            mac: [
                0x02,
                0x42,
                (i >> 24) as u8,
                (i >> 16) as u8,
                (i >> 8) as u8,
                i as u8,
            ],
        },
        ipv4: 0x6440_0000 + i,
        plan,
        captive: false,
        active: true,
    }
}

/// The benchmark plan: trTCM upstream, srTCM downstream, rates high enough that steady
/// traffic is mostly green, every colour action exercised in principle.
pub fn bench_plan(hz: u64) -> Plan {
    let actions = [
        ColourAction::Transmit,
        ColourAction::Remark(10),
        ColourAction::Drop,
    ];
    let up = TrTcmProfile::new(hz, 125_000_000, 250_000_000, 1 << 20, 1 << 21);
    let down = SrTcmProfile::new(hz, 125_000_000, 1 << 20, 1 << 20);
    Plan {
        up: DirPolicy {
            meter: up.map(MeterProfile::Tr).unwrap_or_default(),
            actions,
        },
        down: DirPolicy {
            meter: down.map(MeterProfile::Sr).unwrap_or_default(),
            actions,
        },
    }
}

/// Install the plan (slot 1) and `n` sessions directly into `tables` (no control thread).
pub fn populate(tables: &mut Tables, n: u32, hz: u64) {
    apply(
        tables,
        &Command::SetPlan {
            slot: 1,
            plan: bench_plan(hz),
        },
        0,
    );
    for i in 0..n {
        apply(
            tables,
            &Command::UpsertSession {
                slot: i,
                session: bench_session(i, 1),
            },
            0,
        );
    }
}

/// Writes benchmark frames into received buffers.
#[derive(Debug, Clone)]
pub struct BenchTraffic {
    sessions: u32,
    state: u64,
    up: [u8; 64],
    down: [u8; 64],
}

fn ipv4_header(b: &mut [u8], src: u32, dst: u32) {
    b[0] = 0x45;
    b[2..4].copy_from_slice(&(64u16 - 14 - 8).to_be_bytes());
    b[8] = 64;
    b[9] = 17;
    b[12..16].copy_from_slice(&src.to_be_bytes());
    b[16..20].copy_from_slice(&dst.to_be_bytes());
}

impl BenchTraffic {
    /// Traffic over `sessions` sessions to a BNG with these MACs.
    pub fn new(sessions: u32, access_mac: [u8; 6], uplink_mac: [u8; 6], seed: u64) -> Self {
        let mut up = [0u8; 64];
        up[0..6].copy_from_slice(&access_mac);
        up[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        up[16..18].copy_from_slice(&0x8100u16.to_be_bytes());
        up[20..22].copy_from_slice(&0x0800u16.to_be_bytes());
        ipv4_header(&mut up[22..], 0, BENCH_CORE_IP);
        let mut down = [0u8; 64];
        down[0..6].copy_from_slice(&uplink_mac);
        down[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xcc]);
        down[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        // Downstream IPv4 total length: 50 bytes in a 64-byte frame.
        ipv4_header(&mut down[14..], BENCH_CORE_IP, 0);
        down[16..18].copy_from_slice(&50u16.to_be_bytes());
        Self {
            sessions: sessions.max(1),
            state: seed | 1,
            up,
            down,
        }
    }

    #[inline(always)]
    fn next_index(&mut self) -> u32 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (((self.state >> 32) * u64::from(self.sessions)) >> 32) as u32
    }

    /// Overwrite `buf` with a frame of a random session, upstream if it came from the access
    /// port and downstream otherwise. Buffers shorter than 64 bytes are left alone.
    #[inline(always)]
    pub fn stamp<P: PacketBuf>(&mut self, buf: &mut P, port: PortId) {
        let i = self.next_index();
        let s = bench_session(i, 1);
        let Some(d) = buf.data_mut().get_mut(..64) else {
            return;
        };
        match port {
            PortId::Access => {
                d.copy_from_slice(&self.up);
                d[6..12].copy_from_slice(&s.key.mac);
                d[14..16].copy_from_slice(&s.key.outer_vid.to_be_bytes());
                d[18..20].copy_from_slice(&s.key.inner_vid.to_be_bytes());
                d[34..38].copy_from_slice(&s.ipv4.to_be_bytes());
            }
            PortId::Uplink => {
                d.copy_from_slice(&self.down);
                d[30..34].copy_from_slice(&s.ipv4.to_be_bytes());
            }
        }
    }
}
