//! Benchmark (not a timed test): the control engine's own cost per DORA, in instructions.
//!
//! The DHCP bench measures the whole punt path, where the engine is one part among the gRPC
//! streams, the store's commits and the dataplane, and its figures move with the machine's
//! load. This one feeds `Engine::handle_dhcp` the frames perfdhcp sends in that bench (a relay
//! at 100.64.0.2, one access line, every MAC a known subscriber): a DISCOVER, then a REQUEST
//! for the offered address, per client, and checks that every client got its OFFER and its
//! ACK. Under callgrind (`--toggle-collect` on `run_doras`) the instruction count per DORA
//! repeats exactly for the same build, so two builds of the engine compare without noise.
//!
//! The same wave, once bound, also measures the walk that puts a changed subscriber store in
//! force for admitted sessions (`engine_reauth`): every record's plan changed, the engine
//! ticked until the walk is done, every session checked on the new plan; per session walked,
//! natively and in instructions (`run_walk`).
//!
//! `cargo bench -p kbng-control --bench engine_dora`: prints one JSON object (native ns per
//! DORA, and instructions per DORA when valgrind is installed). `KBNG_ENGINE_DORAS` (default
//! 20,000 native, a fifth of that under callgrind); `KBNG_BENCH_CALLGRIND=0` skips callgrind.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use kbng_control::core::aaa::{SubscriberRecord, SubscriberStore};
use kbng_control::core::engine::{Engine, EngineConfig, Output, UnknownPolicy};
use kbng_control::core::licence::{Cap, CapSource};
use kbng_control::core::pacing::PacingConfig;
use kbng_control::core::pool::PoolConfig;
use kbng_control::core::session::State;
use kbng_wire::{
    DhcpMessageType, DhcpOp, DhcpRepr, Ipv4Packet, L2, MacAddr, UdpFrame, UdpPacket,
    emit_dhcp_frame, parse_l2,
};
use serde_json::json;

const RELAY: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
const GATEWAY: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
const RELAY_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
const START_NS: u64 = 1_780_000_000_000_000_000;
/// The plan every record names after the change the walk applies.
const WALK_PLAN: u32 = 3;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn client_mac(i: u32) -> MacAddr {
    let b = i.to_be_bytes();
    MacAddr([0x02, 0x10, b[0], b[1], b[2], b[3]])
}

/// An engine configured as the DHCP bench runs kbng-control: a /10 pool, local AAA, pacing
/// and the per-line limit out of the way (perfdhcp's clients all sit behind one relay).
fn engine(clients: u32) -> anyhow::Result<Engine> {
    let cfg = EngineConfig {
        pools: vec![PoolConfig {
            name: "bench".into(),
            network: Ipv4Addr::new(100, 64, 0, 0),
            prefix_len: 10,
            gateway: GATEWAY,
            lease_secs: 3600,
            dns: vec![Ipv4Addr::new(192, 0, 2, 53)],
            exclusions: vec![],
        }],
        plans: HashMap::from([("default".into(), 1), ("other".into(), WALK_PLAN)]),
        default_plan: 1,
        captive_plan: 2,
        unknown: UnknownPolicy::Captive,
        option82_identity: false,
        line_identity: false,
        external_auth: false,
        pacing: PacingConfig {
            rate_per_sec: 1_000_000_000,
            burst: 1_000_000_000,
            queue: 1,
            max_wait_ns: 4_000_000_000,
        },
        max_sessions_per_line: u32::MAX,
        quarantine_secs: 60,
        reoffer_interval_ns: 500_000_000,
    };
    let cap = Cap {
        max_sessions: 100_000_000,
        source: CapSource::FreeBaseline {
            reason: "bench".into(),
        },
    };
    let mut e = Engine::new(cfg, cap, START_NS).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    // What the DHCP bench's dataplane (`--sessions 1048576`) reports when it connects.
    e.set_dataplane_capacity(0, 1_048_576);
    e.subscribers = records(clients, None)?;
    Ok(e)
}

/// A record for each of `clients` MACs, on `plan` (the default plan when `None`).
fn records(clients: u32, plan: Option<&str>) -> anyhow::Result<SubscriberStore> {
    let mut s = SubscriberStore::default();
    for i in 0..clients {
        let mac = client_mac(i).0;
        let mac = mac.map(|b| format!("{b:02x}")).join(":");
        s.add(SubscriberRecord {
            mac: Some(mac),
            circuit_id: None,
            remote_id: None,
            plan: plan.map(str::to_string),
            ipv4: None,
            pool: None,
        })
        .map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(s)
}

/// The frame a relay sends to the server for `msg`.
fn relayed(msg: &DhcpRepr) -> anyhow::Result<Vec<u8>> {
    let f = UdpFrame {
        l2: L2 {
            dst: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            src: RELAY_MAC,
            outer: None,
            inner: None,
            ethertype: 0,
        },
        src_ip: RELAY,
        dst_ip: GATEWAY,
        src_port: 67,
        dst_port: 67,
        ttl: 64,
        dscp: 0,
    };
    let mut buf = vec![0u8; 1500];
    let n = emit_dhcp_frame(&mut buf, &f, msg)?;
    buf.truncate(n);
    Ok(buf)
}

/// Client `i`'s message of type `t`, as perfdhcp's relay forwards it.
fn client_msg(t: DhcpMessageType, i: u32) -> DhcpRepr {
    let mut m = DhcpRepr::new(DhcpOp::BootRequest, t, i, client_mac(i));
    m.giaddr = RELAY;
    m.hops = 1;
    m.parameter_request_list = vec![1, 3, 6, 15, 51, 54];
    m
}

fn discover(i: u32) -> anyhow::Result<Vec<u8>> {
    relayed(&client_msg(DhcpMessageType::Discover, i))
}

/// Client `i`'s REQUEST for what `offer` offered.
fn request(i: u32, offer: &DhcpRepr) -> anyhow::Result<Vec<u8>> {
    let mut m = client_msg(DhcpMessageType::Request, i);
    m.requested_ip = Some(offer.yiaddr);
    m.server_id = offer.server_id;
    relayed(&m)
}

/// The DHCP replies among `out`.
fn replies(out: &[Output]) -> Vec<DhcpRepr> {
    out.iter()
        .filter_map(|o| match o {
            Output::Inject { frame, .. } => {
                let l2 = parse_l2(frame).ok()?;
                let ip = Ipv4Packet::new_checked(frame.get(l2.l3_offset()..)?).ok()?;
                let udp = UdpPacket::new_checked(ip.payload()).ok()?;
                DhcpRepr::parse(udp.payload()).ok()
            }
            _ => None,
        })
        .collect()
}

/// Every client's DISCOVER, then every client's REQUEST, as a relay forwards a wave of
/// clients; returns the outputs of each phase. Not inlined, so callgrind can count it alone.
#[inline(never)]
fn run_doras(e: &mut Engine, frames: &[Vec<u8>], now: u64) -> Vec<Vec<Output>> {
    frames.iter().map(|f| e.handle_dhcp(0, 0, f, now)).collect()
}

/// The engine ticked until its walk is done: the sessions it put on [`WALK_PLAN`] and the
/// ticks taken. Not inlined, so callgrind can count it alone.
#[inline(never)]
fn run_walk(e: &mut Engine, now: u64) -> (usize, usize) {
    let (mut moved, mut ticks) = (0, 0);
    while e.reauthorizing() {
        ticks += 1;
        moved += e
            .tick(now)
            .iter()
            .filter(|o| {
                matches!(o, Output::Persist(s)
                    if matches!(s.state, State::Active { plan_id: WALK_PLAN, .. }))
            })
            .count();
    }
    (moved, ticks)
}

/// A bound wave's subscriber store replaced by one naming another plan for every record,
/// then walked: (ns per session walked, ticks). Fails unless every session moved.
fn measure_walk(e: &mut Engine, clients: u32) -> anyhow::Result<(f64, usize)> {
    e.replace_subscribers(records(clients, Some("other"))?);
    let t = Instant::now();
    let (moved, ticks) = run_walk(e, START_NS + 3_000_000);
    let elapsed = t.elapsed();
    if moved != clients as usize {
        bail!("the walk moved {moved} of {clients} sessions to the new plan");
    }
    Ok((elapsed.as_nanos() as f64 / f64::from(clients), ticks))
}

/// (ns per DORA, DORAs, the bound engine) for `clients` clients, every OFFER and ACK
/// checked.
fn measure(clients: u32) -> anyhow::Result<(f64, u32, Engine)> {
    let mut e = engine(clients)?;
    let discovers = (0..clients)
        .map(discover)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let t = Instant::now();
    let offers = run_doras(&mut e, &discovers, START_NS + 1_000_000);
    let t_offer = t.elapsed();
    let mut requests = Vec::with_capacity(offers.len());
    for (i, out) in offers.iter().enumerate() {
        let r = replies(out);
        let Some(o) = r.iter().find(|r| r.message_type == DhcpMessageType::Offer) else {
            bail!("client {i} got no OFFER: {out:?}");
        };
        requests.push(request(i as u32, o)?);
    }
    let t = Instant::now();
    let acks = run_doras(&mut e, &requests, START_NS + 2_000_000);
    let elapsed = t_offer + t.elapsed();
    for (i, out) in acks.iter().enumerate() {
        if !replies(out)
            .iter()
            .any(|r| r.message_type == DhcpMessageType::Ack)
        {
            bail!("client {i} got no ACK: {out:?}");
        }
    }
    Ok((elapsed.as_nanos() as f64 / f64::from(clients), clients, e))
}

/// A DISCOVER wave for `clients` clients, each call timed: the engine after it, and the
/// `keep` longest calls as (µs, sessions before the call), longest first. A call that stalls
/// for milliseconds holds the engine's thread while punted frames queue behind it, so this,
/// not the mean, decides where the punt queue overflows first.
fn longest_calls(clients: u32, keep: usize) -> anyhow::Result<(Engine, Vec<(f64, u32)>)> {
    let mut e = engine(clients)?;
    let discovers = (0..clients)
        .map(discover)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut worst: Vec<(f64, u32)> = Vec::with_capacity(keep + 1);
    for (i, f) in discovers.iter().enumerate() {
        let t = Instant::now();
        let _out = e.handle_dhcp(0, 0, f, START_NS + 1_000_000);
        let us = t.elapsed().as_secs_f64() * 1e6;
        if worst.len() < keep || worst.last().is_some_and(|w| us > w.0) {
            worst.push((us, i as u32));
            worst.sort_by(|a, b| b.0.total_cmp(&a.0));
            worst.truncate(keep);
        }
    }
    Ok((e, worst))
}

/// Mean µs of 1,000 `Engine::find` calls with the selectors `select(i)` gives for client
/// indexes spread over the `clients` of a wave; `what` names them if none was found.
fn find_us(
    e: &Engine,
    clients: u32,
    what: &str,
    select: impl Fn(u32) -> (Option<Ipv4Addr>, Option<[u8; 6]>),
) -> f64 {
    let step = (clients / 1000).max(1);
    let t = Instant::now();
    let mut found = 0u32;
    for k in 0..1000u32 {
        let (ip, mac) = select((k * step) % clients.max(1));
        found += u32::from(e.find(ip, mac).is_some());
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / 1000.0;
    assert!(found > 0, "no {what} found: the wave has none of them");
    us
}

/// By address (an RFC 5176 request's Framed-IP-Address), over the pool's first `clients`
/// hosts.
fn find_by_address_us(e: &Engine, clients: u32) -> f64 {
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 2));
    find_us(e, clients, "address", |i| {
        (Some(Ipv4Addr::from(base + i)), None)
    })
}

/// By MAC alone (an RFC 5176 request naming it by Calling-Station-Id), over the wave's MACs.
fn find_by_mac_us(e: &Engine, clients: u32) -> f64 {
    find_us(e, clients, "MAC", |i| (None, Some(client_mac(i).0)))
}

/// Callgrind's instruction count inside `function` for a `--child` run of `clients`.
fn callgrind_ir(function: &str, clients: u32) -> Result<f64, serde_json::Value> {
    let Ok(exe) = std::env::current_exe() else {
        return Err(json!({"error": "no current exe"}));
    };
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(format!("--toggle-collect=*{function}*"))
        .arg(exe)
        .args(["--child", &clients.to_string()])
        .stdin(Stdio::null())
        .output();
    let Ok(out) = out else {
        return Err(json!({"error": "valgrind did not start"}));
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let ir: Option<f64> = err
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok());
    match ir {
        Some(ir) if out.status.success() => Ok(ir),
        _ => Err(json!({"error": "no callgrind count", "stderr_tail":
            err.lines().rev().take(5).collect::<Vec<_>>()})),
    }
}

/// Instructions per `per` (a DORA, a session) under callgrind, counting only `function`;
/// `counted` says what that covers.
fn callgrind(function: &str, per: &str, clients: u32, counted: &str) -> serde_json::Value {
    match callgrind_ir(function, clients) {
        Ok(ir) => {
            let mut v = serde_json::Map::new();
            v.insert(
                format!("instructions_per_{per}"),
                json!(ir / f64::from(clients)),
            );
            v.insert("instructions".into(), json!(ir));
            v.insert(format!("{per}s"), json!(clients));
            v.insert("counted".into(), json!(counted));
            v.into()
        }
        Err(e) => e,
    }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    if let Some(a) = args.next()
        && a == "--child"
    {
        let n: u32 = args.next().context("--child needs a count")?.parse()?;
        let (_, _, mut e) = measure(n)?;
        measure_walk(&mut e, n)?;
        return Ok(());
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("engine benchmark: run with `cargo bench -p kbng-control --bench engine_dora`");
        return Ok(());
    }
    let n: u32 = env_or("KBNG_ENGINE_DORAS", 20_000);
    let (ns, doras, mut bound) = measure(n)?;
    let (walk_ns, walk_ticks) = measure_walk(&mut bound, n)?;
    drop(bound);
    let (wave, longest) = longest_calls(n, 5)?;
    let find_us = find_by_address_us(&wave, n);
    let find_mac_us = find_by_mac_us(&wave, n);
    drop(wave);
    let use_callgrind = env_or("KBNG_BENCH_CALLGRIND", 1) != 0
        && Command::new("valgrind")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let skipped = json!({"skipped": "valgrind not installed or KBNG_BENCH_CALLGRIND=0"});
    let (cg, cg_walk) = if use_callgrind {
        let k = (n / 5).max(1);
        (
            callgrind(
                "run_doras",
                "dora",
                k,
                "callgrind Ir inside run_doras: Engine::handle_dhcp for every DISCOVER and \
                 every REQUEST (parse, admission, pool, session state machine, reply frames), \
                 no I/O, no store",
            ),
            callgrind(
                "run_walk",
                "session",
                k,
                "callgrind Ir inside run_walk: Engine::tick until the walk is done, each \
                 session's subscriber looked up, its new grant stepped and its Modify and \
                 Persist made; no I/O, no store",
            ),
        )
    } else {
        (skipped.clone(), skipped)
    };
    let report = json!({
        "schema": "kbng-engine-dora/1",
        "native": {
            "ns_per_dora": ns,
            "doras": doras,
            "limited_by": {"class": "none", "detail": "the engine's own CPU: one thread, no I/O"},
            "note": "wall time on a shared machine: compare builds by the callgrind count",
        },
        "callgrind": cg,
        "walk": {
            "ns_per_session": walk_ns,
            "sessions": n,
            "ticks": walk_ticks,
            "callgrind": cg_walk,
            "limited_by": {"class": "none", "detail": "the engine's own CPU: one thread, no I/O"},
            "note": "every bound session moved to a new plan by a replaced subscriber store, \
                     in ticks of at most 1,024 sessions (one tick every 20 ms in the service); \
                     wall time on a shared machine",
        },
        "find_by_address": {
            "us_per_lookup": find_us,
            "sessions": n,
            "note": "Engine::find by address after the DISCOVER wave, mean of 1,000 lookups",
        },
        "find_by_mac": {
            "us_per_lookup": find_mac_us,
            "sessions": n,
            "note": "Engine::find by MAC alone after the DISCOVER wave, mean of 1,000 lookups",
        },
        "longest_discover_calls": {
            "calls": longest.iter().map(|(us, at)| json!({"us": us, "sessions_before": at}))
                .collect::<Vec<_>>(),
            "note": "the five longest Engine::handle_dhcp calls of one DISCOVER wave, wall \
                     time: a stall here is time the punt queue fills",
        },
    });
    println!("{report}");
    Ok(())
}
