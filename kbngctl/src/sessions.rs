//! `kbngctl sessions`: list (every page), show (with counters), watch (the change stream),
//! release one or a few, change one's plan, and drain (release all, then wait until the
//! control holds none).

use std::collections::HashMap;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use http_body_util::BodyExt;
use hyper::Method;
use serde_json::Value;

use crate::client::{Client, Output, ServerArgs, block_on, query_value};
use crate::listing::Listing;

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions, following every page of the API.
    List {
        /// Only sessions in this state (discovering, offered, active, captive, renewing, ...).
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        mac: Option<String>,
        #[arg(long)]
        ip: Option<String>,
        /// Only bound sessions that are (true) or are not (false) in the walled garden.
        #[arg(long)]
        captive: Option<bool>,
        /// Only bound sessions on this plan (by name; captive ones beyond the licence cap
        /// carry the plan they are promoted to).
        #[arg(long)]
        plan: Option<String>,
        /// Only sessions on access lines with this outer VLAN (0: untagged).
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..=4094))]
        outer_vlan: Option<u16>,
        /// Only sessions on access lines with this inner VLAN (0: none).
        #[arg(long, value_parser = clap::value_parser!(u16).range(0..=4094))]
        inner_vlan: Option<u16>,
        /// Sessions per API request (1..=1000).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1000))]
        page_size: u16,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// One session and its dataplane counters.
    Show {
        id: u64,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Print session changes as they happen, until Ctrl-C, --count or --timeout.
    Watch {
        /// Stop after this many changes.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Release these sessions (locally and in the dataplanes), as a subscriber's RELEASE would:
    /// the CPE's next DISCOVER starts a new one. Every id is tried; exit 1 if any failed.
    Release {
        #[arg(required = true)]
        ids: Vec<u64>,
    },
    /// Move one session to another plan; the dataplane polices it at the new rates at once.
    SetPlan { id: u64, plan: String },
    /// Release every session (locally and in the dataplanes) and wait until none remain.
    Drain {
        /// Give up waiting after this many seconds (exit 1, naming how many remain).
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
}

pub fn run(server: &ServerArgs, cmd: SessionsCommand) -> anyhow::Result<ExitCode> {
    let c = Client::new(server)?;
    block_on(async move {
        match cmd {
            SessionsCommand::List {
                state,
                mac,
                ip,
                captive,
                plan,
                outer_vlan,
                inner_vlan,
                page_size,
                output,
            } => {
                let mut filter = String::new();
                for (k, v) in [
                    ("state", state),
                    ("mac", mac),
                    ("ip", ip),
                    ("captive", captive.map(|b| b.to_string())),
                    ("plan", plan),
                    ("outerVlan", outer_vlan.map(|v| v.to_string())),
                    ("innerVlan", inner_vlan.map(|v| v.to_string())),
                ] {
                    if let Some(v) = v {
                        filter.push_str(&format!("&{k}={}", query_value(&v)));
                    }
                }
                list(&c, &filter, page_size, output).await
            }
            SessionsCommand::Show { id, output } => show(&c, id, output).await,
            SessionsCommand::Watch {
                count,
                timeout,
                output,
            } => watch(&c, count, timeout.map(Duration::from_secs), output).await,
            SessionsCommand::Release { ids } => release(&c, &ids).await,
            SessionsCommand::SetPlan { id, plan } => set_plan(&c, id, &plan).await,
            SessionsCommand::Drain { timeout } => drain(&c, Duration::from_secs(timeout)).await,
        }
    })
}

/// Plan names by id, for the tables.
pub async fn plan_names(c: &Client) -> anyhow::Result<HashMap<u64, String>> {
    let v = c.get("/v1/plans").await?;
    Ok(v["plans"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p["id"].as_u64()?, p["name"].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default())
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn vlans(v: &Value) -> String {
    match (v["outerVlan"].as_u64(), v["innerVlan"].as_u64()) {
        (Some(0) | None, _) => "-".into(),
        (Some(o), Some(0) | None) => o.to_string(),
        (Some(o), Some(i)) => format!("{o}.{i}"),
    }
}

fn plan_of(v: &Value, names: &HashMap<u64, String>) -> String {
    if v["captive"].as_bool() == Some(true) {
        return "(captive)".into();
    }
    v["planId"].as_u64().map_or("-".into(), |id| {
        names.get(&id).cloned().unwrap_or(id.to_string())
    })
}

const HEADER: &str =
    "ID        STATE          MAC                IP               VLAN       PLAN        LEASE";

fn row(v: &Value, names: &HashMap<u64, String>) -> String {
    format!(
        "{:<9} {:<14} {:<18} {:<16} {:<10} {:<11} {}",
        s(&v["id"]),
        s(&v["state"]),
        s(&v["mac"]),
        s(&v["ip"]),
        vlans(v),
        plan_of(v, names),
        v["leaseSecs"]
            .as_u64()
            .map_or("-".into(), |l| format!("{l}s")),
    )
}

async fn list(c: &Client, filter: &str, page: u16, output: Output) -> anyhow::Result<ExitCode> {
    let names = if output == Output::Table {
        plan_names(c).await?
    } else {
        HashMap::new()
    };
    let mut listing = Listing::start(output, HEADER)?;
    let mut after = 0u64;
    loop {
        let v = c
            .get(&format!("/v1/sessions?after={after}&limit={page}{filter}"))
            .await?;
        let sessions = v["sessions"]
            .as_array()
            .context("GET /v1/sessions: no \"sessions\" array")?;
        for sess in sessions {
            listing.item(sess, |s| row(s, &names))?;
        }
        after = v["nextAfter"].as_u64().unwrap_or(0);
        if after == 0 {
            break;
        }
    }
    listing.finish("session")?;
    Ok(ExitCode::SUCCESS)
}

async fn show(c: &Client, id: u64, output: Output) -> anyhow::Result<ExitCode> {
    let v = c.get(&format!("/v1/sessions/{id}")).await?;
    // Counters need the dataplane; a session is still worth showing without them.
    let counters = c.get(&format!("/v1/sessions/{id}/counters")).await;
    if output == Output::Json {
        let counters = counters.unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "session": v, "counters": counters })
            )?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let names = plan_names(c).await?;
    println!("session {id}");
    for (k, label) in [
        ("state", "state"),
        ("mac", "mac"),
        ("ip", "ip"),
        ("circuitId", "circuit-id"),
        ("remoteId", "remote-id"),
        ("dataplane", "dataplane"),
        ("port", "access port"),
    ] {
        println!("  {label:<12} {}", s(&v[k]));
    }
    println!("  {:<12} {}", "vlan", vlans(&v));
    println!("  {:<12} {}", "plan", plan_of(&v, &names));
    println!("  {:<12} {}", "lease", s(&v["leaseSecs"]));
    println!("  {:<12} {}", "created", time(&v["createdNs"]));
    println!("  {:<12} {}", "bound at", time(&v["boundAtNs"]));
    println!("  {:<12} {}", "renewed at", time(&v["renewedAtNs"]));
    if !v["endsAtNs"].is_null() {
        let then = if v["reauthorizeAtEnd"] == true {
            " (authorized again then)"
        } else {
            ""
        };
        println!("  {:<12} {}{then}", "ends at", time(&v["endsAtNs"]));
    }
    match counters {
        Ok(cn) => {
            println!(
                "  counted from {} (dataplane boot {})",
                time(&cn["countedSinceNs"]),
                s(&cn["dataplaneBootId"])
            );
            println!("  counters     packets/bytes (green, yellow, red), dropped");
            for dir in ["upstream", "downstream"] {
                let d = &cn[dir];
                println!(
                    "    {dir:<10} {}/{} {}/{} {}/{} {}",
                    s(&d["greenPackets"]),
                    s(&d["greenBytes"]),
                    s(&d["yellowPackets"]),
                    s(&d["yellowBytes"]),
                    s(&d["redPackets"]),
                    s(&d["redBytes"]),
                    s(&d["droppedPackets"]),
                );
            }
        }
        Err(e) => println!("  counters     unavailable: {e:#}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Unix nanoseconds as RFC 3339.
fn time(v: &Value) -> String {
    v.as_u64()
        .and_then(|ns| k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(ns)).ok())
        .map_or("-".into(), |t| t.to_string())
}

async fn watch(
    c: &Client,
    count: Option<u64>,
    timeout: Option<Duration>,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let mut body = c.stream("/v1/watch").await?;
    // A timeout past what the clock can hold is no timeout (the stream ends on Ctrl-C).
    let deadline = timeout.and_then(|t| tokio::time::Instant::now().checked_add(t));
    let mut seen = 0u64;
    let mut buf = Vec::new();
    let mut out = std::io::stdout();
    if count == Some(0) {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        let next = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d, body.frame()).await.ok(),
                None => Some(body.frame().await),
            }
        };
        let frame = tokio::select! {
            f = next => f,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(frame) = frame else {
            return Ok(ExitCode::SUCCESS); // timeout or Ctrl-C: a normal end
        };
        let Some(frame) = frame else {
            bail!("GET {}: the server ended the stream", c.url("/v1/watch"));
        };
        let frame = frame.with_context(|| format!("GET {}", c.url("/v1/watch")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line).trim().to_string();
            if line.is_empty() {
                continue;
            }
            match output {
                Output::Json => writeln!(out, "{line}")?,
                Output::Table => {
                    let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                    if v.get("lagged").is_some() {
                        writeln!(out, "(missed changes: {})", s(&v["lagged"]))?;
                    } else {
                        writeln!(
                            out,
                            "{}  session {:<9} {}",
                            time(&v["atNs"]),
                            s(&v["id"]),
                            s(&v["state"])
                        )?;
                    }
                }
            }
            out.flush()?;
            seen += 1;
            if count.is_some_and(|c| seen >= c) {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

async fn release(c: &Client, ids: &[u64]) -> anyhow::Result<ExitCode> {
    let mut failed = 0usize;
    for id in ids {
        match c
            .call(Method::DELETE, &format!("/v1/sessions/{id}"), None)
            .await
        {
            Ok(_) => println!("released session {id}"),
            Err(e) => {
                eprintln!("kbngctl: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        eprintln!("kbngctl: {failed} of {} session(s) not released", ids.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

async fn set_plan(c: &Client, id: u64, plan: &str) -> anyhow::Result<ExitCode> {
    let body = serde_json::to_vec(&serde_json::json!({ "plan": plan }))?;
    c.call(
        Method::PUT,
        &format!("/v1/sessions/{id}/plan"),
        Some(("application/json", body)),
    )
    .await?;
    println!("session {id}: plan {plan}");
    Ok(ExitCode::SUCCESS)
}

async fn total(c: &Client) -> anyhow::Result<u64> {
    let v = c.get("/v1/status").await?;
    v["sessions"]["total"]
        .as_u64()
        .context("GET /v1/status: no sessions.total")
}

async fn drain(c: &Client, timeout: Duration) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let r = c.call(Method::POST, "/v1/sessions/drain", None).await?;
    let before = r["before"].as_u64().unwrap_or(0);
    println!("draining {before} session(s)");
    let mut poll = 0u64;
    loop {
        poll += 1;
        let left = total(c).await?;
        if left == 0 {
            println!(
                "drained: 0 sessions remain ({before} released in {:.1} s)",
                t0.elapsed().as_secs_f64()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if t0.elapsed() >= timeout {
            eprintln!(
                "kbngctl: {left} session(s) still remain after {} s (see `kbngctl sessions list`)",
                timeout.as_secs()
            );
            return Ok(ExitCode::FAILURE);
        }
        // Sessions that arrived after the drain began are released too (every 2 s: a drain
        // walks every session, so not at every poll).
        if poll.is_multiple_of(10) {
            c.call(Method::POST, "/v1/sessions/drain", None).await?;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
