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

/// What a run of the pipeline alone (heap buffers, no EAL) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoIoRun {
    /// Packets put through the pipeline.
    pub packets: u64,
    /// Packets that came out on either tx frame.
    pub forwarded: u64,
    /// CPU time of the calling thread during the loop (schedstat), 0 if unknown.
    pub cpu_ns: u64,
    /// TSC reads of the per-node runtime accounting (one per burst plus one per node that
    /// had packets), for its overhead per packet.
    pub clock_reads: u64,
}

/// TSC cycles one `dpdk_sys::tsc()` read costs, measured over `n` back-to-back reads (the
/// price of a lap of the per-node runtime accounting).
pub fn tsc_read_cycles(n: u32) -> f64 {
    let n = n.max(1);
    let t0 = dpdk_sys::tsc();
    let mut last = t0;
    for _ in 0..n {
        last = std::hint::black_box(dpdk_sys::tsc());
    }
    last.wrapping_sub(t0) as f64 / f64::from(n)
}

/// Packets per vector in [`run_no_io`]: two ports of 32, like the DPDK worker loop.
pub const NO_IO_BURST: usize = 64;

/// Run the full pipeline alone over `sessions` sessions, on heap buffers stamped by
/// [`BenchTraffic`] (half upstream, half downstream), for at most `max_bursts` vectors and at
/// most `max_secs` seconds. Only [`process_vector`] is the pipeline; instruction counts under
/// callgrind are taken inside it (`--toggle-collect=*process_vector*`).
pub fn run_no_io(sessions: u32, max_bursts: u64, max_secs: f64) -> NoIoRun {
    use crate::meter::SrTcmProfile;
    use crate::nodes::NodeEnv;
    use crate::packet::{Frame, HeapBuf, Pkt, TxFrame};
    use crate::pipeline::Pipeline;

    let hz = 2_000_000_000;
    let env = NodeEnv::default();
    let mut tables = Tables::new(sessions as usize, 4, 1);
    populate(&mut tables, sessions, hz);
    let mut traffic = BenchTraffic::new(sessions, env.access_mac, env.uplink_mac, 1);
    let Ok(limit) = SrTcmProfile::new(hz, 1000, 64, 0) else {
        return NoIoRun::default();
    };
    let mut pipe: Pipeline<HeapBuf> = Pipeline::new(env, 0, limit, 0);
    let mut pool: Vec<HeapBuf> = (0..4 * NO_IO_BURST)
        .map(|_| HeapBuf::from_bytes(&[0; 64]))
        .collect();
    let mut rx: Box<Frame<HeapBuf>> = Box::default();
    let mut tx_a: Box<TxFrame<HeapBuf>> = Box::default();
    let mut tx_u: Box<TxFrame<HeapBuf>> = Box::default();
    let start = std::time::Instant::now();
    let cpu0 = crate::counters::thread_cpu_ns();
    let mut run = NoIoRun::default();
    let mut now = 0u64;
    let mut bursts = 0u64;
    while bursts < max_bursts && start.elapsed().as_secs_f64() < max_secs {
        for _ in 0..100 {
            for i in 0..NO_IO_BURST {
                let port = if i % 2 == 0 {
                    PortId::Access
                } else {
                    PortId::Uplink
                };
                let Some(mut b) = pool.pop() else {
                    break;
                };
                b.reset(&[0; 64]);
                traffic.stamp(&mut b, port);
                let _ = rx.try_push(Pkt::new(b, port));
            }
            now += 64 * 100;
            run.packets += rx.len() as u64;
            process_vector(&mut pipe, &mut tables, now, &mut rx, &mut tx_a, &mut tx_u);
            run.forwarded += (tx_a.len() + tx_u.len()) as u64;
            pool.extend(tx_a.drain(..));
            pool.extend(tx_u.drain(..));
            bursts += 1;
            if bursts >= max_bursts {
                break;
            }
        }
    }
    run.cpu_ns = crate::counters::thread_cpu_ns().saturating_sub(cpu0);
    let rows = pipe.counters().runtime_rows();
    run.clock_reads = bursts + rows.iter().map(|r| r.1).sum::<u64>();
    run
}

/// One vector through the pipeline; not inlined, so that callgrind can count it alone.
#[inline(never)]
pub fn process_vector(
    pipe: &mut crate::pipeline::Pipeline<crate::packet::HeapBuf>,
    tables: &mut Tables,
    now: u64,
    rx: &mut crate::packet::Frame<crate::packet::HeapBuf>,
    tx_a: &mut crate::packet::TxFrame<crate::packet::HeapBuf>,
    tx_u: &mut crate::packet::TxFrame<crate::packet::HeapBuf>,
) {
    pipe.process(tables, now, rx, tx_a, tx_u, &mut crate::punt::NullPuntSink);
}
