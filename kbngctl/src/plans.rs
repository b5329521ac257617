//! `kbngctl plans`: the plans the control serves, their rates and how many active sessions are
//! on each; with `--measure`, the traffic each plan carries now, from the per-session counters.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::Value;

use crate::client::{Client, Output, ServerArgs, block_on, rate};

/// Most sessions sampled by `--measure` (each costs one counters request).
const MEASURE_MAX_SESSIONS: usize = 1000;

#[derive(Debug, Args)]
pub struct PlansArgs {
    /// Also measure each plan's current traffic over this many seconds (sums the active
    /// sessions' counters; at most 1000 sessions are sampled).
    #[arg(long)]
    measure: Option<u64>,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

pub fn run(server: &ServerArgs, args: PlansArgs) -> anyhow::Result<ExitCode> {
    let c = Client::new(server)?;
    block_on(async move {
        let mut v = c.get("/v1/plans").await?;
        let measured = match args.measure {
            Some(secs) => Some(measure(&c, Duration::from_secs(secs.max(1))).await?),
            None => None,
        };
        if let (Some(m), Some(plans)) = (&measured, v["plans"].as_array_mut()) {
            for p in plans {
                let id = p["id"].as_u64().unwrap_or(0);
                let (up, down) = m.rates.get(&id).copied().unwrap_or((0.0, 0.0));
                p["measuredUpBps"] = up.round().into();
                p["measuredDownBps"] = down.round().into();
            }
            v["measuredSessions"] = m.sampled.into();
            v["measuredSeconds"] = m.secs.into();
        }
        if args.output == Output::Json {
            println!("{}", serde_json::to_string_pretty(&v)?);
            return Ok(ExitCode::SUCCESS);
        }
        print!(
            "{:<12} {:>10} {:>26} {:>26} {:>9}",
            "PLAN", "ID", "UP (CIR/PIR)", "DOWN (CIR/PIR)", "SESSIONS"
        );
        if measured.is_some() {
            print!(" {:>13} {:>13}", "UP NOW", "DOWN NOW");
        }
        println!();
        for p in v["plans"].as_array().into_iter().flatten() {
            let default = if p["default"].as_bool() == Some(true) {
                " (default)"
            } else {
                ""
            };
            print!(
                "{:<12} {:>10} {:>26} {:>26} {:>9}",
                p["name"].as_str().unwrap_or("?"),
                p["id"].as_u64().unwrap_or(0),
                policy(&p["upstream"]),
                policy(&p["downstream"]),
                p["sessions"].as_u64().unwrap_or(0),
            );
            if measured.is_some() {
                print!(
                    " {:>13} {:>13}",
                    rate(p["measuredUpBps"].as_f64().unwrap_or(0.0)),
                    rate(p["measuredDownBps"].as_f64().unwrap_or(0.0))
                );
            }
            println!("{default}");
        }
        println!("captive (walled garden): {}", v["captive"]);
        if let Some(m) = &measured {
            println!(
                "measured over {:.1} s from {} session(s)' counters (bytes delivered: all colours less those dropped)",
                m.secs, m.sampled
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `srTCM 20 Mbit/s` or `trTCM 200 Mbit/s/400 Mbit/s`.
fn policy(d: &serde_json::Value) -> String {
    let mode = d["mode"].as_str().unwrap_or("?");
    let cir = rate(d["cirBps"].as_f64().unwrap_or(0.0));
    match d["pirBps"].as_f64() {
        Some(pir) => format!("{mode} {cir}/{}", rate(pir)),
        None => format!("{mode} {cir}"),
    }
}

struct Measured {
    /// Plan id -> (upstream, downstream) bits per second.
    rates: HashMap<u64, (f64, f64)>,
    sampled: usize,
    secs: f64,
}

/// Delivered bytes of one direction's counters: every colour less what its plan's action
/// dropped (a plan may transmit or re-mark red as well as drop it).
fn delivered_bytes(d: &Value) -> u64 {
    let b = |k: &str| d[k].as_u64().unwrap_or(0);
    b("greenBytes")
        .saturating_add(b("yellowBytes"))
        .saturating_add(b("redBytes"))
        .saturating_sub(b("droppedBytes"))
}

/// Delivered bytes of one session: (up, down).
async fn forwarded(c: &Client, id: u64) -> Option<(u64, u64)> {
    let v = c.get(&format!("/v1/sessions/{id}/counters")).await.ok()?;
    Some((
        delivered_bytes(&v["upstream"]),
        delivered_bytes(&v["downstream"]),
    ))
}

async fn measure(c: &Client, over: Duration) -> anyhow::Result<Measured> {
    let page = c
        .get(&format!(
            "/v1/sessions?state=active&limit={MEASURE_MAX_SESSIONS}"
        ))
        .await?;
    let sessions: Vec<(u64, u64)> = page["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["id"].as_u64()?, s["planId"].as_u64()?)))
        .collect();
    let mut first = HashMap::new();
    for (id, _) in &sessions {
        if let Some(b) = forwarded(c, *id).await {
            first.insert(*id, b);
        }
    }
    let t0 = Instant::now();
    tokio::time::sleep(over).await;
    let mut rates: HashMap<u64, (f64, f64)> = HashMap::new();
    let mut sampled = 0;
    let mut bytes: Vec<(u64, u64, u64)> = Vec::new();
    for (id, plan) in &sessions {
        if let (Some(a), Some(b)) = (first.get(id), forwarded(c, *id).await) {
            bytes.push((*plan, b.0.saturating_sub(a.0), b.1.saturating_sub(a.1)));
            sampled += 1;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    for (plan, up, down) in bytes {
        let e = rates.entry(plan).or_default();
        e.0 += up as f64 * 8.0 / secs;
        e.1 += down as f64 * 8.0 / secs;
    }
    Ok(Measured {
        rates,
        sampled,
        secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivered_bytes_are_every_colour_less_the_dropped() {
        let red_dropped = serde_json::json!({"greenBytes": 200, "yellowBytes": 100,
            "redBytes": 500, "droppedBytes": 500});
        assert_eq!(delivered_bytes(&red_dropped), 300);
        let red_sent = serde_json::json!({"greenBytes": 200, "yellowBytes": 100,
            "redBytes": 500, "droppedBytes": 0});
        assert_eq!(delivered_bytes(&red_sent), 800);
        assert_eq!(delivered_bytes(&serde_json::Value::Null), 0);
    }
}
