//! STYLE §4.2: a steady-state burst through the whole pipeline allocates nothing.
//!
//! A counting global allocator counts allocations (and reallocations) made while the pipeline
//! runs; buffers are recycled between bursts outside the counted window, as a mempool would.

use std::alloc::System;

use kbng_dataplane::command::{Command, apply};
use kbng_dataplane::meter::{SrTcmProfile, TrTcmProfile};
use kbng_dataplane::nodes::NodeEnv;
use kbng_dataplane::nodes::walled_garden::WalledGardenRule;
use kbng_dataplane::packet::{Frame, HeapBuf, PacketBuf, Pkt, PortId, TxFrame};
use kbng_dataplane::pipeline::{Pipeline, Tables};
use kbng_dataplane::punt::{PuntRecord, PuntRing};
use kbng_dataplane::tables::{ColourAction, DirPolicy, MeterProfile, Plan, Session, SessionKey};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

// A counting allocator (stats_alloc wraps System and counts every call), so this file needs no
// `unsafe` of its own.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const HZ: u64 = 2_000_000_000;
const ACCESS_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xaa];
const UPLINK_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xbb];

fn frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    vids: &[u16],
    src: u32,
    dst: u32,
    proto: u8,
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    for v in vids {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 46];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    ip[22..24].copy_from_slice(&80u16.to_be_bytes());
    let c = kbng_wire::checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f
}

#[test]
fn steady_state_burst_allocates_nothing() {
    // The counter counts: one allocation seen.
    let probe = Region::new(GLOBAL);
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(probe.change().allocations, 1);

    let env = NodeEnv {
        access_mac: ACCESS_MAC,
        uplink_mac: UPLINK_MAC,
        ..NodeEnv::default()
    };
    let mut tables = Tables::new(1024, 4, 1);
    let tr = TrTcmProfile::new(HZ, 1_000_000, 2_000_000, 3000, 6000).expect("valid");
    let sr = SrTcmProfile::new(HZ, 1_000_000, 3000, 3000).expect("valid");
    let plan = Plan {
        up: DirPolicy {
            meter: MeterProfile::Tr(tr),
            actions: [
                ColourAction::Transmit,
                ColourAction::Remark(8),
                ColourAction::Drop,
            ],
        },
        down: DirPolicy {
            meter: MeterProfile::Sr(sr),
            actions: [
                ColourAction::Transmit,
                ColourAction::Remark(8),
                ColourAction::Drop,
            ],
        },
    };
    apply(&mut tables, &Command::SetPlan { slot: 1, plan }, 0);
    apply(&mut tables, &Command::AccessBegin, 0);
    apply(&mut tables, &Command::AccessGateway(0x6440_0001), 0);
    apply(
        &mut tables,
        &Command::AccessRule(WalledGardenRule::new(0xc000_0250, 32, 6, 443)),
        0,
    );
    apply(
        &mut tables,
        &Command::AccessCommit {
            redirect_http: true,
        },
        0,
    );
    let mut templates = Vec::new();
    for i in 0..64u32 {
        let mac = [2, 1, 0, 0, 0, i as u8];
        let vids: &[u16] = match i % 3 {
            0 => &[],
            1 => &[100],
            _ => &[100, 200],
        };
        let key = SessionKey {
            port: 0,
            outer_vid: vids.first().copied().unwrap_or(0),
            inner_vid: vids.get(1).copied().unwrap_or(0),
            mac,
        };
        let ip = 0x6440_0100 + i;
        let session = Session {
            key,
            ipv4: ip,
            plan: 1,
            captive: i % 8 == 0,
            active: true,
        };
        apply(&mut tables, &Command::UpsertSession { slot: i, session }, 0);
        templates.push((
            frame(mac, ACCESS_MAC, vids, ip, 0xc000_0250, 6),
            PortId::Access,
        ));
        templates.push((
            frame([2, 0, 0, 0, 0, 0xcc], UPLINK_MAC, &[], 0xc000_0250, ip, 6),
            PortId::Uplink,
        ));
    }
    // TTL-expired packets, both ways: icmp-error builds its message in the same buffer.
    for k in [2usize, 3] {
        let (mut f, port) = templates[k].clone();
        let l3 = kbng_wire::parse_l2(&f).expect("template").l3_offset();
        f[l3 + 8] = 1;
        f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
        let c = kbng_wire::checksum::checksum(&f[l3..l3 + 20]);
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        templates.push((f, port));
    }
    let limit = SrTcmProfile::new(HZ, 1_000, 100, 0).expect("valid");
    let mut pipe: Pipeline<HeapBuf> = Pipeline::new(env, 0, limit, 0);
    let (punt_tx, mut punt_rx) = rtrb::RingBuffer::<PuntRecord>::new(256);
    let mut punt_tx = PuntRing::new(punt_tx);
    let mut rx: Box<Frame<HeapBuf>> = Box::default();
    let mut tx_a: Box<TxFrame<HeapBuf>> = Box::default();
    let mut tx_u: Box<TxFrame<HeapBuf>> = Box::default();
    let mut pool: Vec<HeapBuf> = Vec::with_capacity(512);
    for _ in 0..512 {
        pool.push(HeapBuf::from_bytes(&[]));
    }
    let mut total_allocs = 0;
    for round in 0..200u64 {
        // Refill rx from the pool (outside the counted window, as a mempool would).
        while pool.len() < 256 {
            pool.push(HeapBuf::from_bytes(&[]));
        }
        for (t, port) in &templates {
            let mut b = pool.pop().expect("pool refilled above");
            b.reset(t);
            rx.push(Pkt::new(b, *port));
        }
        let now = round * 1_000_000;
        let region = Region::new(GLOBAL);
        pipe.process(
            &mut tables,
            now,
            &mut rx,
            &mut tx_a,
            &mut tx_u,
            &mut punt_tx,
        );
        let change = region.change();
        if round >= 10 {
            total_allocs += change.allocations + change.reallocations;
        }
        assert!(tx_u.len() + tx_a.len() > 0);
        for b in tx_a.drain(..).chain(tx_u.drain(..)) {
            assert!(!b.data().is_empty());
            pool.push(b);
        }
        while punt_rx.pop().is_ok() {}
    }
    let names = pipe.counters().snapshot();
    let get = |node: &str, c: &str| {
        names
            .iter()
            .find(|x| x.0 == node && x.1 == c)
            .map(|x| x.2)
            .unwrap_or(0)
    };
    assert!(get("ip4-rewrite", "to uplink") > 0);
    assert!(get("ip4-rewrite", "to access") > 0);
    assert!(get("walled-garden", "HTTP redirect punted") > 0);
    assert!(get("ip4-rewrite", "TTL expired") > 0);
    assert!(get("icmp-error", "time exceeded sent") > 0);
    assert_eq!(total_allocs, 0, "allocations in steady state");
}
