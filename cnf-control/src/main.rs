//! `kbng-control`: loads the configuration, restores sessions from the store, connects to every
//! dataplane and serves DHCP, the portal redirect and the operator API until SIGTERM/SIGINT.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use kbng_control::api::{ApiState, router};
use kbng_control::config::Config;
use kbng_control::core::engine::Engine;
use kbng_control::dataplane::{self, DpStatus, Target};
use kbng_control::service::{EngineTask, now_ns};
use kbng_control::store::Store;
use kbng_control::store::subscribers;
use tokio::sync::{broadcast, mpsc};

#[derive(Debug, Parser)]
#[command(name = "kbng-control", version, about = "The kbng control plane")]
struct Args {
    /// Configuration file (YAML or JSON).
    #[arg(long, env = "KBNG_CONTROL_CONFIG")]
    config: PathBuf,
    /// Override the config's store path.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Override the config's API listen address.
    #[arg(long)]
    api_listen: Option<String>,
    /// Override the config's dataplanes (repeatable).
    #[arg(long = "dataplane")]
    dataplanes: Vec<String>,
    /// Log filter (RUST_LOG syntax; RUST_LOG itself, when set, wins).
    #[arg(long, default_value = "info")]
    log: String,
    /// Serve Prometheus metrics on GET /metrics at this address (host:port); none if unset.
    /// OTLP export is configured by the OTEL_* environment variables.
    #[arg(long, env = "KBNG_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Validate the configuration (file, overrides, pools, subscribers file, cap file), print
    /// a summary and exit 0, without opening the store or any socket.
    #[arg(long)]
    check_config: bool,
}

// One worker: the hot path is a chain of tasks (punt reader, engine, dataplane task, its HTTP/2
// connection) that wake one another per batch. On one worker a wake is a queue push; on two,
// most wakes also unparked the other worker (a futex each way), 10-17% of the control's CPU per
// DORA (`tests/bench/results/2026-12-01-dhcp-control-profile.md`), for no parallelism worth it:
// the engine task is one task anyway. Store commits run on a thread of their own
// (`kbng_control::commit`). Multi-thread flavour still, so blocking sections may
// `block_in_place` (the telemetry's final flush does).
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let telemetry = kbng_telemetry::init(
        "kbng-control",
        &kbng_telemetry::TelemetryConfig {
            default_filter: args.log.clone(),
            ..Default::default()
        },
    )?;
    let mut cfg = Config::load(&args.config)?;
    if let Some(s) = args.store {
        cfg.store = s;
    }
    if let Some(a) = args.api_listen {
        cfg.api_listen = a
            .parse()
            .with_context(|| format!("--api-listen: {a:?} is not host:port"))?;
    }
    if !args.dataplanes.is_empty() {
        let mut problems = Vec::new();
        kbng_control::dataplane_tls::check_addresses(
            &args.dataplanes,
            cfg.dataplane_tls.is_some(),
            &mut problems,
        );
        if !problems.is_empty() {
            anyhow::bail!("--dataplane: {}", problems.join("; "));
        }
        cfg.dataplanes = args.dataplanes;
    }
    let cfg = Arc::new(cfg);
    let metrics = kbng_telemetry::metrics::ControlMetrics::new(&telemetry.meter());
    kbng_control::observe::install(
        kbng_control::observe::Observer::new(metrics, &cfg).with_spans(telemetry.exports().traces),
    );

    // Before anything reads the time: a restart goes on with the time it had.
    let anchor = kbng_control::clock::anchor_path(&cfg.store);
    log_resumed(kbng_control::clock::resume(&anchor));

    let cap = cfg.initial_cap();
    tracing::info!(cap = cap.max_sessions, source = ?cap.source, "licence cap");
    let mut engine = Engine::new(cfg.engine.clone(), cap, now_ns())
        .map_err(|errs| anyhow::anyhow!("pools: {errs:?}"))?;
    let records = cfg
        .subscribers_file
        .as_ref()
        .map(|p| (p, import_subscribers(p, &cfg, &mut engine)));

    if args.check_config {
        // A file the control cannot use fails the check, whatever a start could fall back on.
        if let Some((_, (_, Err(problem)))) = &records {
            anyhow::bail!("{problem}");
        }
        cfg.licence_readable()
            .map_err(|e| anyhow::anyhow!("licence: {e}"))?;
        println!(
            "kbng-control: configuration valid: {} dataplane(s) {:?}, {} plan(s), cap {} ({:?}), \
             store {}, API {}{}{}",
            cfg.dataplanes.len(),
            cfg.dataplanes,
            cfg.plans.len(),
            engine.cap().max_sessions,
            engine.cap().source,
            cfg.store.display(),
            cfg.api_listen,
            cfg.radius.as_ref().map_or(String::new(), radius_summary),
            records.map_or(String::new(), |(p, (_, r))| format!(
                ", {} subscriber record(s) from {}",
                r.map_or(0, |(n, _)| n),
                p.display()
            ))
        );
        return Ok(());
    }

    tokio::spawn(kbng_control::clock::keep_anchor(anchor));
    let t = Instant::now();
    let store = Store::open_with(&cfg.store, cfg.store_sync)
        .with_context(|| format!("{}", cfg.store.display()))?;
    let (changes, mut bad) = store.subscriber_changes()?;
    let mut file_state = kbng_control::subscribers_guard::FileState::default();
    match &records {
        Some((p, (_, Ok((_, text))))) => {
            let start = kbng_control::subscribers_guard::at_start(
                &mut engine.subscribers,
                Arc::clone(text),
                store.subscribers_file()?,
                p,
                &cfg.engine,
                &changes,
                cfg.subscribers_max_removal_percent,
            );
            if let Some(text) = start.keep {
                store.keep_subscribers_file(&text)?;
            }
            if let Some(h) = &start.held {
                tracing::error!("subscribers file: {}", h.why);
                engine.subscribers_file_held();
            }
            file_state.held = start.held;
        }
        Some((p, (_, Err(problem)))) => {
            // A restart must not turn a rejected edit into a control that cannot start: the
            // content last in force is taken, and the file's shown as rejected.
            let kept = kbng_control::subscribers_guard::kept_in_force(
                store.subscribers_file()?,
                p,
                &cfg.engine,
            )
            .with_context(|| format!("{problem} (and no content in force kept to start on)"))?;
            tracing::error!(
                records = kept.records,
                "subscribers file cannot be used; starting on the content last in force: \
                 {problem}"
            );
            engine.subscribers = kept.store;
            engine.subscribers_file_rejected();
            file_state.rejected = Some(problem.clone());
        }
        None => {}
    }
    let kept = changes.len();
    // Kept beside the store too when there is a file: a changed file is laid under them again.
    let subscriber_overlay = records
        .is_some()
        .then(|| subscribers::Overlay::new(changes.iter().cloned()));
    bad.extend(subscribers::apply(changes, &mut engine.subscribers));
    for problem in &bad {
        tracing::warn!("subscribers: {problem}");
    }
    if kept > 0 {
        tracing::info!(
            changes = kept,
            "subscriber changes made through the API applied over the file"
        );
    }
    let restored = store.restore_into(&mut engine)?;
    for problem in &restored.problems {
        tracing::warn!("restore: {problem}");
    }
    // The records may have changed while the control was down (an edited file, a store
    // written by another version): the restored sessions follow them from the first ticks.
    engine.subscribers_changed();
    tracing::info!(
        sessions = restored.loaded,
        ms = t.elapsed().as_millis() as u64,
        "restored"
    );

    let (ev_tx, ev_rx) = mpsc::channel(8192);
    let (api_tx, api_rx) = mpsc::channel(1024);
    let (watch_tx, _) = broadcast::channel(65_536);
    let mut dps = Vec::new();
    let mut statuses = Vec::new();
    let targets = Target::all(&cfg.dataplanes, cfg.dataplane_tls.as_ref());
    let renewed = cfg.dataplane_tls.as_ref().map(|files| {
        let (tx, rx) = tokio::sync::watch::channel(kbng_control::dataplane_tls::fingerprint(files));
        tokio::spawn(kbng_control::dataplane_tls::watch_files(files.clone(), tx));
        rx
    });
    for (i, target) in targets.iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        let status = Arc::new(Mutex::new(DpStatus {
            address: target.addr.clone(),
            ..DpStatus::default()
        }));
        tokio::spawn(dataplane::run(
            i as u32,
            target.clone(),
            Arc::clone(&cfg),
            rx,
            ev_tx.clone(),
            Arc::clone(&status),
            renewed.clone(),
        ));
        dps.push(tx);
        statuses.push(status);
    }
    drop(ev_tx);
    // Relay mode: DHCP goes to the configured servers through this socket.
    let relay = match &cfg.relay {
        Some(r) => {
            engine.enable_relay(r.core.clone(), now_ns());
            let link = kbng_control::relay::start(r.listen).await?;
            tracing::info!(listen = %link.local, servers = ?r.core.servers, giaddr = %r.core.giaddr, "DHCP relay mode");
            Some(link)
        }
        None => None,
    };
    // RADIUS: sessions restored above had their Start sent before; accounting carries on.
    let radius = match &cfg.radius {
        Some(r) => {
            let restored = kbng_control::radius::restored(r, engine.list(0, usize::MAX, |_| true));
            let kept_at = kbng_control::radius::acct_store::path_beside(&cfg.store);
            let link =
                kbng_control::radius::start(r.clone(), targets.clone(), restored, Some(&kept_at))
                    .await
                    .context("RADIUS")?;
            tracing::info!(
                servers = r.servers.len(),
                "RADIUS authorization and accounting"
            );
            Some(link)
        }
        None => None,
    };
    let radius_tx = radius.as_ref().map(|l| l.tx.clone());
    let task = EngineTask {
        radius,
        engine,
        store,
        dps: dps.clone(),
        dp_events: ev_rx,
        api: api_rx,
        watch: watch_tx.clone(),
        cfg: Arc::clone(&cfg),
        relay,
        subscriber_overlay,
        subscribers_file: file_state,
    };
    if let Some((path, (digest, loaded))) = records {
        // Started on the kept content: no content of the file is in force, and the watch
        // tells of the next one it can use, whatever it is.
        let (seen, rejected) = match loaded {
            Ok(_) => (digest, None),
            Err(problem) => (None, Some(problem)),
        };
        tokio::spawn(kbng_control::subscribers_file::watch(
            path.clone(),
            Arc::clone(&cfg),
            seen,
            rejected,
            api_tx.clone(),
        ));
    }
    let engine_task = tokio::spawn(task.run());

    let state = ApiState {
        engine: api_tx,
        dps,
        dp_status: statuses,
        dp_addrs: targets.clone(),
        watch: watch_tx,
        cfg: Arc::clone(&cfg),
    };
    let _metrics = match args.metrics_listen {
        Some(addr) => Some(
            telemetry
                .serve_metrics(addr)
                .await
                .with_context(|| format!("--metrics-listen {addr}"))?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(cfg.api_listen)
        .await
        .with_context(|| format!("API listen {}", cfg.api_listen))?;
    tracing::info!(addr = %cfg.api_listen, "operator API");
    let api = tokio::spawn(async move { axum::serve(listener, router(state)).await });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        r = engine_task => anyhow::bail!("engine task ended: {r:?}"),
        r = api => anyhow::bail!("API ended: {r:?}"),
    }
    tracing::info!("stopping");
    if let Some(tx) = radius_tx {
        kbng_control::radius::nas::shutdown(&tx).await;
    }
    Ok(())
}

/// Says how the control's time began: a resume from the anchor is worth a warning, since
/// the host's clock moved under the control.
fn log_resumed(r: kbng_control::clock::Resumed) {
    use kbng_control::clock::{Resumed, WhyWall};
    match r {
        Resumed::FromAnchor { offset_ns } => tracing::warn!(
            offset_s = offset_ns as f64 / 1e9,
            "the host's wall clock is away from the time the control had before its restart \
             (a step not yet slewed, or one made while the control was down); the control goes \
             on from its own time and slews toward the host's"
        ),
        Resumed::OnWall(WhyWall::TooFar { offset_ns }) => tracing::warn!(
            offset_s = offset_ns as f64 / 1e9,
            "the host's wall clock moved more than a day while the control was down; taken at once"
        ),
        Resumed::OnWall(why) => tracing::info!(?why, "the control's time starts on the wall clock"),
    }
}

/// What `--check-config` says of the RADIUS section: the servers, and where CoA and
/// Disconnect requests are taken from whom.
fn radius_summary(r: &kbng_control::radius::config::RadiusConfig) -> String {
    let das = r.das.as_ref().map_or(", no CoA/Disconnect".into(), |d| {
        let clients: Vec<String> = d.clients.iter().map(|(a, _)| a.to_string()).collect();
        format!(
            ", CoA/Disconnect on {} from [{}]",
            d.listen,
            clients.join(", ")
        )
    });
    format!(", RADIUS {} server(s){das}", r.servers.len())
}

/// The digest of what the subscribers file `p` held (the watch for changes starts from it),
/// and the records imported into the engine's store and the content, or why the file cannot
/// be used (naming its rows).
type FileAtStart = (Option<u64>, Result<(usize, Arc<str>), String>);

fn import_subscribers(p: &std::path::Path, cfg: &Config, engine: &mut Engine) -> FileAtStart {
    let reading = kbng_control::subscribers_file::read(p, &cfg.engine);
    let loaded = match reading.loaded {
        Ok(l) => l,
        Err(problem) => return (reading.digest, Err(problem)),
    };
    for row in &loaded.unresolved {
        tracing::warn!(file = %p.display(), "subscribers: {row}");
    }
    engine.subscribers = loaded.store;
    tracing::info!(subscribers = loaded.records, "subscribers imported");
    (reading.digest, Ok((loaded.records, loaded.text)))
}
