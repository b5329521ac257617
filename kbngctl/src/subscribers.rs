//! `kbngctl subscribers`: bulk import (CSV or JSON, checked whole by the server: a file with a
//! bad row adds nothing and every bad row is named), single add, and removal by MAC.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use hyper::Method;

use crate::client::{Client, Output, ServerArgs, block_on, query_value};

#[derive(Debug, Subcommand)]
pub enum SubscribersCommand {
    /// Import a CSV (`mac,circuit_id,remote_id,plan[,ipv4,pool]`) or JSON (array of records)
    /// file.
    Import {
        file: PathBuf,
        /// csv or json; taken from the file's extension when omitted.
        #[arg(long)]
        format: Option<String>,
    },
    /// Add (or replace) one subscriber.
    Add {
        #[arg(long)]
        mac: Option<String>,
        #[arg(long)]
        circuit_id: Option<String>,
        #[arg(long)]
        remote_id: Option<String>,
        /// Plan name; the default plan when omitted.
        #[arg(long)]
        plan: Option<String>,
        /// Its fixed address (inside a pool; keep it in the pool's exclusions).
        #[arg(long, conflicts_with = "pool")]
        ipv4: Option<std::net::Ipv4Addr>,
        /// The pool, by name, its address comes from.
        #[arg(long)]
        pool: Option<String>,
    },
    /// The record of the subscriber with this MAC.
    Show {
        mac: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Remove the subscriber with this MAC.
    Remove { mac: String },
}

pub fn run(server: &ServerArgs, cmd: SubscribersCommand) -> anyhow::Result<ExitCode> {
    let c = Client::new(server)?;
    match cmd {
        SubscribersCommand::Import { file, format } => {
            let format = match format.as_deref() {
                Some(f @ ("csv" | "json")) => f.to_string(),
                Some(f) => bail!("--format {f:?}: want csv or json"),
                None => match file.extension().and_then(|e| e.to_str()) {
                    Some("json") => "json".into(),
                    Some("csv") => "csv".into(),
                    _ => bail!(
                        "{}: cannot tell CSV from JSON by the name; give --format",
                        file.display()
                    ),
                },
            };
            let body =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let ct = if format == "json" {
                "application/json"
            } else {
                "text/csv"
            };
            let v = block_on(c.call(
                Method::POST,
                &format!("/v1/subscribers?format={format}"),
                Some((ct, body)),
            ))
            .with_context(|| format!("importing {}", file.display()))?;
            println!(
                "imported {} subscriber(s) from {}",
                v["imported"],
                file.display()
            );
        }
        SubscribersCommand::Add {
            mac,
            circuit_id,
            remote_id,
            plan,
            ipv4,
            pool,
        } => {
            if mac.is_none() && circuit_id.is_none() && remote_id.is_none() {
                bail!("subscribers add: give --mac, --circuit-id or --remote-id");
            }
            let mut rec = serde_json::Map::new();
            for (k, v) in [
                ("mac", &mac),
                ("circuit_id", &circuit_id),
                ("remote_id", &remote_id),
                ("plan", &plan),
                ("ipv4", &ipv4.map(|ip| ip.to_string())),
                ("pool", &pool),
            ] {
                if let Some(v) = v {
                    rec.insert(k.into(), v.clone().into());
                }
            }
            let body = serde_json::to_vec(&rec)?;
            block_on(c.call(
                Method::POST,
                "/v1/subscribers?format=json",
                Some(("application/json", body)),
            ))?;
            let who = [mac, circuit_id, remote_id]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            let address = match (ipv4, &pool) {
                (Some(ip), _) => format!(" at {ip}"),
                (None, Some(p)) => format!(" in pool {p}"),
                (None, None) => String::new(),
            };
            println!(
                "added {who} on plan {}{address}",
                plan.as_deref().unwrap_or("(default)")
            );
        }
        SubscribersCommand::Show { mac, output } => {
            let v = block_on(c.call(
                Method::GET,
                &format!("/v1/subscribers/{}", query_value(&mac)),
                None,
            ))?;
            if output == Output::Json {
                println!("{v}");
            } else {
                let field = |k: &str| v[k].as_str().map(String::from);
                println!("subscriber {mac}");
                println!(
                    "  plan: {}",
                    field("plan").unwrap_or_else(|| "(default)".into())
                );
                let address = match (field("ipv4"), field("pool")) {
                    (Some(ip), _) => ip,
                    (None, Some(pool)) => format!("from pool {pool}"),
                    (None, None) => "from the pools".into(),
                };
                println!("  address: {address}");
            }
        }
        SubscribersCommand::Remove { mac } => {
            block_on(c.call(
                Method::DELETE,
                &format!("/v1/subscribers/{}", query_value(&mac)),
                None,
            ))?;
            println!("removed {mac}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
