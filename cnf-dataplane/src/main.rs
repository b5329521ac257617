//! `kbng-dataplane`: start-up, the control thread (gRPC on tokio) and the workers.
//!
//! Threads: the control thread is pinned to the first core of `--cores` and runs the tokio
//! runtime (gRPC server, punt pump, signals). Worker 0 runs on the main thread, which is EAL's
//! main lcore (first worker core), so its mempool operations use the per-lcore cache; other
//! workers are threads pinned to their cores (see the report on `dpdk-sys` for launching them
//! on EAL lcores).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use dpdk_sys::{Eal, Mempool, MempoolConfig, Port, PortConfig, RssHash, RssOutcome};
use kbng_api::v1 as pb;
use kbng_dataplane::bench::{BenchTraffic, populate};
use kbng_dataplane::command::{self, Command};
use kbng_dataplane::config::{Args, Config};
use kbng_dataplane::control::shadow::Shadow;
use kbng_dataplane::control::{Control, MAX_BATCH, WorkerView};
use kbng_dataplane::counters::WorkerStats;
use kbng_dataplane::doorbell::Doorbell;
use kbng_dataplane::grpc::DataplaneService;
use kbng_dataplane::grpc_tls::TlsCounters;
use kbng_dataplane::io::{InjectRecord, Worker, WorkerQueues};
use kbng_dataplane::meter::SrTcmProfile;
use kbng_dataplane::neighbour::{NextHopCell, Resolver};
use kbng_dataplane::nodes::NodeEnv;
use kbng_dataplane::numa;
use kbng_dataplane::pipeline::{Pipeline, Tables};
use kbng_dataplane::port_counters::PortCounters;
use kbng_dataplane::punt::{PuntRecord, PuntRing};
use kbng_dataplane::task_bell::TaskWait;
use tokio::sync::Mutex;

fn main() -> ExitCode {
    let args = Args::parse();
    // Telemetry starts once the control core is known; until then, plain logs to stderr.
    let console = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .finish();
    let cfg = match tracing::subscriber::with_default(console, || Config::from_args(args)) {
        Ok(c) => c,
        Err(errors) => {
            for e in errors {
                eprintln!("kbng-dataplane: {e}");
            }
            return ExitCode::from(2);
        }
    };
    if cfg.args.check_config {
        // What the operator's pods and SREs check: the flags as resolved, no EAL, no server.
        let placed = numa::sysfs_placement(&cfg, std::path::Path::new("/sys"));
        if let Err(errors) = numa::check(cfg.numa_node, &placed) {
            for e in errors {
                eprintln!("kbng-dataplane: {e}");
            }
            return ExitCode::from(2);
        }
        println!(
            "kbng-dataplane: NUMA: {}",
            match cfg.numa_node {
                Some(n) => format!(
                    "node {n} required; {} (sysfs; a node unknown, as for vdevs, matches)",
                    placed
                        .iter()
                        .map(|(what, node)| match node {
                            Some(m) => format!("{what} on node {m}"),
                            None => format!("{what} on an unknown node"),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "not checked (--numa-node -1)".to_owned(),
            }
        );
        println!(
            "kbng-dataplane: configuration valid: control core {}, worker cores {:?}, \
             access {}, uplink {}, gRPC {}{}; EAL {}",
            cfg.control_core,
            cfg.worker_cores,
            cfg.args.access,
            cfg.args.uplink,
            cfg.args.grpc_listen,
            if cfg.grpc_tls.is_some() {
                " (mutual TLS)"
            } else {
                ""
            },
            cfg.eal_args().join(" ")
        );
        return ExitCode::SUCCESS;
    }
    let _telemetry = match kbng_dataplane::observe::init(cfg.control_core, cfg.args.metrics_listen)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kbng-dataplane: {:#}", anyhow::Error::from(e));
            return ExitCode::FAILURE;
        }
    };
    match run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kbng-dataplane: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct PortInfo {
    port: Port,
    proto: pb::Port,
    mac: [u8; 6],
}

struct PortSpec<'a> {
    dev: &'a str,
    index: u32,
    role: pb::PortRole,
    rss: RssHash,
}

fn open_port(
    eal: &Eal,
    spec: PortSpec<'_>,
    cfg: &Config,
    pool: &Arc<Mempool>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<PortInfo> {
    let PortSpec {
        dev,
        index,
        role,
        rss,
    } = spec;
    let name = Config::port_name(dev);
    let mut port = Port::open(eal, name).with_context(|| format!("opening port {name}"))?;
    let info = port.device_info().context("device info")?;
    let n = cfg.worker_cores.len() as u16;
    let setup = port
        .configure(
            &PortConfig {
                rx_queues: n,
                tx_queues: n,
                rx_desc: cfg.args.rx_desc,
                tx_desc: cfg.args.tx_desc,
                rss,
                promiscuous: true,
            },
            pool,
        )
        .with_context(|| format!("configuring port {name}"))?;
    match setup.rss {
        RssOutcome::SingleQueue | RssOutcome::Applied => {}
        other => warnings.push(format!(
            "port {name}: RSS {other:?}: a subscriber's two directions may be policed on \
             different workers"
        )),
    }
    port.start()
        .with_context(|| format!("starting port {name}"))?;
    let mac = port.mac().context("port MAC")?;
    let link = port.link().ok();
    let socket = port.socket_id();
    Ok(PortInfo {
        proto: pb::Port {
            index,
            role: role as i32,
            device_name: info.port_name.clone(),
            bus_address: if info.bus == "pci" {
                info.device_name.clone()
            } else {
                info.bus.clone()
            },
            mac: mac.to_vec(),
            link_up: link.is_some_and(|l| l.up),
            speed_mbps: link.map_or(0, |l| l.speed_mbps),
            numa_node: socket.map_or(-1, |s| s as i32),
            rx_queues: u32::from(n),
            tx_queues: u32::from(n),
        },
        port,
        mac,
    })
}

fn run(cfg: Config) -> anyhow::Result<()> {
    let eal = Eal::init(&cfg.eal_args()).context("EAL init")?;
    let hz = eal.tsc_hz();
    let n_workers = cfg.worker_cores.len();
    let mut warnings = Vec::new();

    // NUMA: workers and ports should share a node.
    let worker_sockets: Vec<Option<u32>> = cfg
        .worker_cores
        .iter()
        .map(|c| eal.lcore_socket(*c))
        .collect();
    let numa = worker_sockets.first().copied().flatten();
    let mbufs = if cfg.args.mbufs > 0 {
        cfg.args.mbufs
    } else {
        let per_queue = u32::from(cfg.args.rx_desc) + u32::from(cfg.args.tx_desc) + 512;
        (2 * n_workers as u32 * per_queue + 4096).next_power_of_two() - 1
    };
    let pool = Arc::new(
        Mempool::new(
            &eal,
            &MempoolConfig {
                socket: numa,
                ..MempoolConfig::new("kbng_pool", mbufs)
            },
        )
        .context("mempool")?,
    );
    let mut access = open_port(
        &eal,
        PortSpec {
            dev: &cfg.args.access,
            index: 0,
            role: pb::PortRole::Access,
            rss: RssHash::IpSourceOnly,
        },
        &cfg,
        &pool,
        &mut warnings,
    )?;
    let mut uplink = open_port(
        &eal,
        PortSpec {
            dev: &cfg.args.uplink,
            index: 1,
            role: pb::PortRole::Uplink,
            rss: RssHash::IpDestinationOnly,
        },
        &cfg,
        &pool,
        &mut warnings,
    )?;
    // `--numa-node`: EAL's view of the cores and ports decides (vdevs report SOCKET_ID_ANY,
    // which matches any node).
    let placed: Vec<numa::Placed> = cfg
        .worker_cores
        .iter()
        .zip(&worker_sockets)
        .map(|(c, s)| (format!("worker core {c}"), numa::dpdk_node(*s)))
        .chain([&access, &uplink].into_iter().map(|p| {
            (
                format!("port {}", p.proto.device_name),
                numa::dpdk_node(p.port.socket_id()),
            )
        }))
        .collect();
    if let Err(errors) = numa::check(cfg.numa_node, &placed) {
        anyhow::bail!("{}", errors.join("\n"));
    }
    for p in [&access, &uplink] {
        for (core, s) in cfg.worker_cores.iter().zip(&worker_sockets) {
            let ps = p.port.socket_id();
            if let (Some(ps), Some(ws)) = (ps, *s)
                && ps != ws
            {
                warnings.push(format!(
                    "NUMA MISMATCH: port {} is on node {ps} but worker core {core} is on \
                     node {ws}: every packet crosses the interconnect",
                    p.proto.device_name
                ));
            }
        }
    }
    warnings.extend(cfg.warnings());
    for w in &warnings {
        tracing::warn!("{w}");
        eprintln!("kbng-dataplane: WARNING: {w}");
    }

    let next_hop = Arc::new(
        cfg.next_hop_mac
            .map_or_else(NextHopCell::default, NextHopCell::fixed),
    );
    let env = NodeEnv {
        access_mac: cfg.access_mac.unwrap_or(access.mac),
        uplink_mac: cfg.uplink_mac.unwrap_or(uplink.mac),
        next_hop_mac: cfg.next_hop_mac.unwrap_or_default(),
        next_hop_resolved: cfg.next_hop_mac.is_some(),
        outer_tpid: cfg.outer_tpid,
        uplink_ip: cfg.uplink.map_or(0, |u| u.address),
        // A fixed MAC is never relearned.
        next_hop_ip: match cfg.next_hop_mac {
            Some(_) => 0,
            None => cfg.uplink.map_or(0, |u| u.next_hop),
        },
        next_hop: Arc::clone(&next_hop),
    };
    let resolver = match (cfg.next_hop_mac, cfg.uplink) {
        (None, Some(u)) => Some(Resolver::new(
            Arc::clone(&next_hop),
            env.uplink_mac,
            u,
            hz,
            u64::from(cfg.args.next_hop_reachable_secs),
        )),
        _ => None,
    };
    let seed = {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x6b62_6e67u64)
    };
    let punt_burst = u64::from(cfg.args.punt_pps).max(64);
    let punt_limit =
        SrTcmProfile::new(hz, u64::from(cfg.args.punt_pps), punt_burst, 0).context("punt rate")?;
    let icmp_pps = u64::from(cfg.args.icmp_error_pps);
    let icmp_limit =
        SrTcmProfile::new(hz, icmp_pps, (icmp_pps / 10).max(10), 0).context("ICMP error rate")?;
    let now = dpdk_sys::tsc();

    // Per-worker state, rings, views.
    let mut workers = Vec::new();
    let mut views = Vec::new();
    let mut punt_rings = Vec::new();
    let (punt_wait, punt_bells) =
        kbng_dataplane::task_bell::pair().context("punt wake-up socket")?;
    let (inject_tx, inject_rx) = rtrb::RingBuffer::<InjectRecord>::new(1024);
    let mut inject_rx = Some(inject_rx);
    let initial: Vec<Command> = std::iter::once(Command::AccessBegin)
        .chain(
            cfg.args
                .gateways
                .iter()
                .map(|g| Command::AccessGateway(u32::from(*g))),
        )
        .chain(std::iter::once(Command::AccessCommit {
            redirect_http: true,
        }))
        .collect();
    let (applied_wait, applied_bells) =
        kbng_dataplane::task_bell::pair().context("worker acknowledgement socket")?;
    for (i, core) in cfg.worker_cores.iter().enumerate() {
        let mut tables = Tables::new(
            cfg.args.sessions as usize,
            usize::from(cfg.args.plans),
            seed,
        );
        for c in &initial {
            command::apply(&mut tables, c, now);
        }
        if let Some(n) = cfg.args.bench_sessions {
            populate(&mut tables, n, hz);
        }
        let pipeline = Pipeline::new(env.clone(), i as u16, punt_limit, now)
            .with_icmp_error_limit(icmp_limit, now);
        let (cmd_tx, cmd_rx) = command::channel(2 * MAX_BATCH);
        let cmd_rx = cmd_rx.with_bell(
            applied_bells
                .bell()
                .context("worker acknowledgement socket")?,
        );
        let (punt_tx, punt_rx) = rtrb::RingBuffer::<PuntRecord>::new(1024);
        punt_rings.push(punt_rx);
        let stats = Arc::new(WorkerStats::default());
        let wake = Doorbell::default();
        views.push(WorkerView {
            core: *core,
            commands: cmd_tx,
            sessions: tables.sessions.counters(),
            nodes: pipeline.counters(),
            stats: Arc::clone(&stats),
            wake: wake.clone(),
        });
        let bench = cfg
            .args
            .bench_sessions
            .map(|n| BenchTraffic::new(n, env.access_mac, env.uplink_mac, 0x9e37_79b9 + i as u64));
        workers.push(Worker {
            index: i as u16,
            tables,
            pipeline,
            commands: cmd_rx,
            punt: PuntRing::new(punt_tx),
            punt_bell: punt_bells.bell().context("punt wake-up socket")?,
            wake,
            inject: if i == 0 {
                inject_rx.take().map(|r| (r, Arc::clone(&pool)))
            } else {
                None
            },
            stats,
            mode: cfg.args.mode,
            bench,
            idle_sleep: (cfg.args.idle_sleep_us > 0)
                .then(|| std::time::Duration::from_micros(u64::from(cfg.args.idle_sleep_us))),
        });
    }
    if let Some(w) = workers.first() {
        let h = &w.tables.huge;
        tracing::info!(
            table_mib = h.bytes >> 20,
            huge_page_mib = h.collapsed >> 20,
            advised_only_mib = h.advised_only >> 20,
            "session tables per worker (transparent huge pages where the kernel grants them)"
        );
    }
    let bytes_per_session = workers.first().map_or(0, |w| {
        w.tables.sessions.bytes() / w.tables.sessions.capacity()
    });
    let mut queues = Vec::new();
    for q in 0..n_workers as u16 {
        queues.push(WorkerQueues {
            rx: [access.port.rx_queue(q)?, uplink.port.rx_queue(q)?],
            tx: [access.port.tx_queue(q)?, uplink.port.tx_queue(q)?],
        });
    }

    let identity = pb::Identity {
        dataplane_id: cfg.args.dataplane_id.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "kbng-dataplane".into())
        }),
        version: env!("CARGO_PKG_VERSION").into(),
        boot_id: seed,
        started_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64),
        main_core: cfg.control_core,
        worker_cores: cfg.worker_cores.clone(),
        numa_node: numa.map_or(-1, |s| s as i32),
        ports: vec![access.proto.clone(), uplink.proto.clone()],
        session_capacity: u64::from(cfg.args.sessions),
        sessions: 0,
        plans: 0,
        warnings: warnings.clone(),
    };
    let control = Arc::new(Mutex::new(Control {
        shadow: Shadow::new(cfg.args.sessions, cfg.args.plans),
        workers: views,
        tsc_hz: hz,
        resolver: resolver.as_ref().map(|r| r.counters.clone()),
        applied: applied_wait,
        ports: vec![
            PortCounters::new("port-access", access.port.stats_reader()),
            PortCounters::new("port-uplink", uplink.port.stats_reader()),
        ],
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let inject_bell = workers.first().map(|w| w.wake.clone()).unwrap_or_default();

    // Control thread.
    let control_thread = {
        let stop = Arc::clone(&stop);
        let control = Arc::clone(&control);
        let listen = (cfg.args.grpc_listen.clone(), cfg.grpc_tls.clone());
        let core = cfg.control_core;
        let run_seconds = cfg.args.run_seconds;
        let stop_grace = Duration::from_millis(cfg.args.stop_grace_ms);
        std::thread::Builder::new()
            .name("kbng-control".into())
            .spawn(move || {
                if !core_affinity::set_for_current(core_affinity::CoreId { id: core as usize }) {
                    tracing::warn!("could not pin the control thread to core {core}");
                }
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .context("tokio runtime")?;
                let r = rt.block_on(control_main(
                    control,
                    identity,
                    (inject_tx, inject_bell),
                    (punt_rings, punt_wait),
                    resolver,
                    listen,
                    Arc::clone(&stop),
                    (run_seconds, stop_grace),
                ));
                stop.store(true, Ordering::Relaxed);
                r
            })
            .context("spawning the control thread")?
    };

    // Workers 1.. on their own pinned threads; worker 0 here, on EAL's main lcore.
    let mut handles = Vec::new();
    let mut workers = workers.into_iter();
    let mut queues = queues.into_iter();
    let (Some(mut w0), Some(mut q0)) = (workers.next(), queues.next()) else {
        bail!("no worker");
    };
    for ((mut w, mut q), core) in workers.zip(queues).zip(cfg.worker_cores.iter().skip(1)) {
        let stop = Arc::clone(&stop);
        let core = *core as usize;
        handles.push(
            std::thread::Builder::new()
                .name(format!("kbng-worker{}", w.index))
                .spawn(move || {
                    core_affinity::set_for_current(core_affinity::CoreId { id: core });
                    // An lcore id gives this thread the per-lcore mempool cache; without
                    // one every mbuf alloc and free goes to the shared ring.
                    let _lcore = dpdk_sys::register_thread()
                        .inspect_err(|e| tracing::warn!("worker on core {core}: {e}"));
                    w.run(&mut q, &stop);
                    (w, q)
                })
                .context("spawning a worker")?,
        );
    }
    tracing::info!(
        workers = n_workers,
        access = %access.proto.device_name,
        uplink = %uplink.proto.device_name,
        bytes_per_session,
        "kbng-dataplane running"
    );
    let started = Instant::now();
    w0.run(&mut q0, &stop);
    let elapsed = started.elapsed();
    let mut done = vec![(w0, q0)];
    for h in handles {
        if let Ok(x) = h.join() {
            done.push(x);
        }
    }
    let control_result = control_thread
        .join()
        .map_err(|_| anyhow::anyhow!("control thread panicked"))?;
    if cfg.args.run_seconds.is_some() {
        print_stats(&done, hz, elapsed, bytes_per_session, &cfg);
    }
    // Queues and the control's counter readers first, then ports (stop and close), then the
    // pool and EAL.
    drop(done);
    drop(control);
    let _ = access.port.stop();
    let _ = uplink.port.stop();
    if let Some(path) = cfg.args.grpc_listen.strip_prefix("unix:") {
        let _ = std::fs::remove_file(path);
    }
    control_result
}

fn print_stats(
    done: &[(Worker, WorkerQueues)],
    hz: u64,
    elapsed: Duration,
    bytes_per_session: usize,
    cfg: &Config,
) {
    let workers: Vec<serde_json::Value> = done
        .iter()
        .map(|(w, _)| {
            let s = &w.stats;
            let nodes: Vec<serde_json::Value> = w
                .pipeline
                .counters()
                .snapshot()
                .into_iter()
                .filter(|x| x.2 > 0)
                .map(|(n, c, v)| serde_json::json!({"node": n, "counter": c, "value": v}))
                .collect();
            let runtime: Vec<serde_json::Value> = w
                .pipeline
                .counters()
                .runtime_rows()
                .into_iter()
                .filter(|r| r.1 > 0)
                .map(|(n, calls, vectors, cycles)| {
                    serde_json::json!({"node": n, "calls": calls, "vectors": vectors,
                        "cycles": cycles})
                })
                .collect();
            serde_json::json!({
                "worker": w.index,
                "rx_packets": s.rx_packets.get(),
                "tx_packets": s.tx_packets.get(),
                "tx_dropped": s.tx_dropped.get(),
                "rx_bursts": s.rx_bursts.get(),
                "busy_cycles": s.busy_cycles.get(),
                "cpu_ns": s.cpu_ns.get(),
                "tables_huge_pages": huge_json(&w.tables.huge),
                "nodes": nodes,
                "runtime": runtime,
            })
        })
        .collect();
    let out = serde_json::json!({
        "tsc_hz": hz,
        "elapsed_secs": elapsed.as_secs_f64(),
        "mode": format!("{:?}", cfg.args.mode).to_lowercase(),
        "bench_sessions": cfg.args.bench_sessions,
        "session_capacity": cfg.args.sessions,
        "bytes_per_session_per_worker": bytes_per_session,
        "workers": workers,
    });
    println!("{out}");
}

/// How much of a worker's session table the kernel put on transparent huge pages.
fn huge_json(h: &kbng_dataplane::tables::HugeTableBacking) -> serde_json::Value {
    serde_json::json!({"table_bytes": h.bytes, "eligible_bytes": h.eligible,
        "collapsed_bytes": h.collapsed, "advised_only_bytes": h.advised_only})
}

/// Step the next-hop resolver ten times a second on the control thread; its ARP requests
/// leave through the inject path (worker 0 transmits them).
async fn resolve_next_hop(mut r: Resolver, svc: DataplaneService) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        if let Some(frame) = r.poll(dpdk_sys::tsc())
            && !svc.inject(kbng_dataplane::packet::PortId::Uplink, &frame)
        {
            r.not_sent();
        }
    }
}

// Everything the control thread owns, handed over once at start-up.
#[allow(clippy::too_many_arguments)]
async fn control_main(
    control: Arc<Mutex<Control>>,
    identity: pb::Identity,
    inject: (rtrb::Producer<InjectRecord>, Doorbell),
    punt: (Vec<rtrb::Consumer<PuntRecord>>, TaskWait),
    resolver: Option<Resolver>,
    (listen, tls): (
        String,
        Option<(
            kbng_dataplane::grpc_tls::TlsFiles,
            kbng_dataplane::grpc_tls::Loaded,
        )>,
    ),
    stop: Arc<AtomicBool>,
    (run_seconds, stop_grace): (Option<u64>, Duration),
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let svc = DataplaneService::new(Arc::clone(&control), identity, Some(inject));
    let tls_counters = tls.as_ref().map(|_| Arc::new(TlsCounters::default()));
    kbng_dataplane::observe::start(control, svc.control_paths(), tls_counters.clone()).await?;
    tokio::spawn(svc.clone().punt_pump(punt.0, punt.1));
    if let Some(r) = resolver {
        tokio::spawn(resolve_next_hop(r, svc.clone()));
    }
    let stopper = {
        let stop = Arc::clone(&stop);
        let svc = svc.clone();
        async move {
            let mut term = match signal(SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("SIGTERM handler: {e}");
                    return;
                }
            };
            let deadline = async {
                match run_seconds {
                    Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                    None => std::future::pending().await,
                }
            };
            let signalled = tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); true }
                _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT: shutting down"); true }
                _ = deadline => false,
            };
            if signalled && !stop_grace.is_zero() && svc.announce_stopping() {
                use kbng_dataplane::stopping::{Ended, wait_for_last_read};
                tracing::info!(
                    grace_ms = stop_grace.as_millis() as u64,
                    "told the control; serving its last counter reads"
                );
                match wait_for_last_read(svc.last_read_served(), stop_grace).await {
                    Ended::Read => tracing::info!("the control read the counters; stopping"),
                    Ended::Grace => {
                        tracing::warn!("no last counter read within the grace; stopping")
                    }
                }
            }
            stop.store(true, Ordering::Relaxed);
        }
    };
    let shutdown = {
        let stop = Arc::clone(&stop);
        async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    tokio::spawn(stopper);
    let server = tonic::transport::Server::builder()
        .trace_fn(kbng_telemetry::grpc::server_span)
        .add_service(pb::dataplane_server::DataplaneServer::new(svc));
    let serve = async {
        if let Some(path) = listen.strip_prefix("unix:") {
            let _ = std::fs::remove_file(path);
            let l =
                tokio::net::UnixListener::bind(path).with_context(|| format!("binding {path}"))?;
            tracing::info!("gRPC on unix:{path}");
            server
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::UnixListenerStream::new(l),
                    shutdown,
                )
                .await
                .context("gRPC server")
        } else if let Some((files, loaded)) = tls {
            let addr: std::net::SocketAddr = listen.parse().context("--grpc-listen")?;
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding {addr}"))?;
            tracing::info!("gRPC on {addr}, mutual TLS");
            let counters = tls_counters.unwrap_or_default();
            let incoming = kbng_dataplane::grpc_tls::incoming(l, files, loaded, counters);
            server
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::ReceiverStream::new(incoming),
                    shutdown,
                )
                .await
                .context("gRPC server")
        } else {
            let addr: std::net::SocketAddr = listen.parse().context("--grpc-listen")?;
            tracing::info!("gRPC on {addr}");
            server
                .serve_with_shutdown(addr, shutdown)
                .await
                .context("gRPC server")
        }
    };
    // Graceful shutdown waits for open streams (a control plane's Punt stream never ends by
    // itself); give them two seconds after the stop, then close them.
    let grace = async {
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    tokio::select! {
        r = serve => r?,
        () = grace => tracing::info!("closing open gRPC streams"),
    }
    Ok(())
}
