//! `kbngctl status`: one screen of the running BNG: sessions (active, captive, by plan), the
//! licence, the local subscriber records, each pool's use, each dataplane (NUMA node, cores,
//! ports) and its drops by reason.

use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use crate::client::{Client, Output, ServerArgs, block_on};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The local subscriber store in one line: its records, where they come from, and whether
/// the file's latest content was refused or held, or a change is still being applied to sessions.
fn subscribers_line(s: &Value) -> String {
    let mut line = format!("subscribers: {} records", text(&s["records"]));
    match s["file"].as_object() {
        Some(f) => {
            line.push_str(&format!(", file {}", text(&f["path"])));
            if let Some(why) = f.get("rejected").and_then(Value::as_str) {
                let (what, why) = if f.contains_key("held") {
                    ("HELD", why.strip_prefix("held: ").unwrap_or(why))
                } else {
                    ("REJECTED", why)
                };
                line.push_str(&format!(
                    " (its latest content {what}, the records before it in force: {why})"
                ));
            }
        }
        None => line.push_str(", no file"),
    }
    if s["applying"].as_bool() == Some(true) {
        line.push_str("; applying a change to the sessions");
    }
    line
}

pub fn run(server: &ServerArgs, args: StatusArgs) -> anyhow::Result<ExitCode> {
    let c = Client::new(server)?;
    block_on(async move {
        let mut v = c.get("/v1/status").await?;
        let n = v["dataplanes"].as_array().map_or(0, Vec::len);
        let mut drops = Vec::new();
        for i in 0..n {
            // Node counters need the dataplane; the rest of the status stands without them.
            let d = c
                .get(&format!("/v1/dataplanes/{i}/counters"))
                .await
                .unwrap_or_else(|e| serde_json::json!({ "error": format!("{e:#}") }));
            drops.push(d);
        }
        if args.output == Output::Json {
            v["nodeCounters"] = drops.into();
            println!("{}", serde_json::to_string_pretty(&v)?);
            return Ok(ExitCode::SUCCESS);
        }
        let s = &v["sessions"];
        println!(
            "sessions: {} active, {} captive, {} in all",
            text(&s["active"]),
            text(&s["captive"]),
            text(&s["total"])
        );
        if let Some(by) = v["sessionsByPlan"].as_object() {
            let plans: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
            println!("  by plan: {}", plans.join(", "));
        }
        let l = &v["licence"];
        println!(
            "licence: cap {} from {} ({}{})",
            text(&l["cap"]),
            text(&l["source"]),
            text(&l["reason"]),
            l["daysRemaining"]
                .as_i64()
                .map_or(String::new(), |d| format!(", {d} days left"))
        );
        println!("{}", subscribers_line(&v["subscribers"]));
        for p in v["pools"].as_array().into_iter().flatten() {
            let (used, of) = (p["inUse"].as_u64(), p["leasable"].as_u64());
            let share = match (used, of) {
                (Some(u), Some(o)) if o > 0 => format!(" ({:.0}%)", 100.0 * u as f64 / o as f64),
                _ => String::new(),
            };
            let fixed = match p["fixed"].as_u64() {
                Some(f) if f > 0 => format!(", {f} fixed in its exclusions"),
                _ => String::new(),
            };
            println!(
                "pool {}: {} of {} addresses in use{share}{fixed}",
                text(&p["name"]),
                text(&p["inUse"]),
                text(&p["leasable"])
            );
        }
        for (i, d) in v["dataplanes"].as_array().into_iter().flatten().enumerate() {
            let id = &d["identity"];
            println!(
                "dataplane {i}: {} {}",
                text(&d["address"]),
                if d["connected"].as_bool() == Some(true) {
                    "connected"
                } else {
                    "NOT connected"
                }
            );
            if id.is_null() {
                println!("  identity unavailable: {}", text(&d["error"]));
            } else {
                println!(
                    "  numa node {}, main core {}, worker cores {}",
                    text(&id["numaNode"]),
                    text(&id["mainCore"]),
                    text(&id["workerCores"])
                );
                for p in id["ports"].as_array().into_iter().flatten() {
                    println!(
                        "  port {} {:<17} {} (bus {}, numa {}, link {})",
                        text(&p["index"]),
                        text(&p["role"])
                            .trim_start_matches("PORT_ROLE_")
                            .to_lowercase(),
                        text(&p["deviceName"]),
                        text(&p["busAddress"]),
                        text(&p["numaNode"]),
                        if p["linkUp"].as_bool() == Some(true) {
                            "up"
                        } else {
                            "down"
                        }
                    );
                }
            }
            let nodes = drops.get(i).map_or(&Value::Null, |d| &d["nodes"]);
            let counted: Vec<&Value> = nodes
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["value"].as_u64().unwrap_or(0) > 0)
                .collect();
            if counted.is_empty() {
                println!("  node counters: none non-zero");
            } else {
                println!("  node and port counters (non-zero, by reason):");
                for r in counted {
                    println!(
                        "    {:<20} {:<30} {}",
                        text(&r["node"]),
                        text(&r["reason"]),
                        text(&r["value"])
                    );
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::subscribers_line;
    use serde_json::json;

    #[test]
    fn the_subscribers_line_says_where_records_come_from_and_what_is_wrong() {
        assert_eq!(
            subscribers_line(&json!({"records": 3, "applying": false})),
            "subscribers: 3 records, no file"
        );
        assert_eq!(
            subscribers_line(&json!({"records": 47, "applying": true,
                "file": {"path": "/etc/kbng/s.csv", "rejected": "row 49: bad MAC"}})),
            "subscribers: 47 records, file /etc/kbng/s.csv (its latest content REJECTED, the \
             records before it in force: row 49: bad MAC); applying a change to the sessions"
        );
        assert_eq!(
            subscribers_line(&json!({"records": 50, "applying": false,
                "file": {"path": "s.csv", "rejected": "held: removes 40", "held":
                    {"records": 10, "removes": 40}}})),
            "subscribers: 50 records, file s.csv (its latest content HELD, the records before it \
             in force: removes 40)"
        );
    }
}
