//! `kbngctl subscribers`: bulk import (CSV or JSON, checked whole by the server: a file with a
//! bad row adds nothing and every bad row is named), single add, show and removal by MAC or by
//! option 82 identity, a listing of the whole store page by page (as JSON, a file that
//! `import` takes back), and a subscribers file held for what it removes: its removals
//! listed, its acceptance.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use hyper::Method;
use serde_json::Value;

use crate::client::{Client, Output, ServerArgs, block_on, query_value};
use crate::listing::Listing;

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
    /// The record of the subscriber with this MAC, or with this option 82 identity.
    Show {
        #[command(flatten)]
        who: Who,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Remove the subscriber with this MAC, or with this option 82 identity.
    Remove {
        #[command(flatten)]
        who: Who,
    },
    /// Every record, MAC-keyed first, fetched a page at a time; `-o json` prints a JSON array
    /// that `import` takes back.
    List {
        /// Records per request (at most 1000).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1000))]
        page_size: u16,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The records in force that the subscribers file's held content would remove (see
    /// `kbngctl status`), fetched a page at a time.
    Held {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Put in force the subscribers file's content that the control holds back because it
    /// removes more of the records in force than `subscribersMaxRemovalPercent` (see
    /// `kbngctl status` and `kbngctl subscribers held`).
    AcceptFile,
}

/// A record's key: a MAC, or the exact (circuit-id, remote-id) of a record keyed by option 82.
#[derive(Debug, clap::Args)]
pub struct Who {
    #[arg(conflicts_with_all = ["circuit_id", "remote_id"], required_unless_present_any = ["circuit_id", "remote_id"])]
    mac: Option<String>,
    #[arg(long)]
    circuit_id: Option<String>,
    #[arg(long)]
    remote_id: Option<String>,
}

impl Who {
    fn path(&self) -> String {
        match &self.mac {
            Some(mac) => format!("/v1/subscribers/{}", query_value(mac)),
            None => {
                let q: Vec<String> = [
                    ("circuitId", &self.circuit_id),
                    ("remoteId", &self.remote_id),
                ]
                .into_iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", query_value(v))))
                .collect();
                format!("/v1/subscribers/option82?{}", q.join("&"))
            }
        }
    }

    fn describe(&self) -> String {
        match &self.mac {
            Some(mac) => mac.clone(),
            None => [
                ("circuit-id", &self.circuit_id),
                ("remote-id", &self.remote_id),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
            .collect::<Vec<_>>()
            .join(" "),
        }
    }
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
        SubscribersCommand::Show { who, output } => {
            let v = block_on(c.call(Method::GET, &who.path(), None))?;
            if output == Output::Json {
                println!("{v}");
            } else {
                let field = |k: &str| v[k].as_str().map(String::from);
                println!("subscriber {}", who.describe());
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
        SubscribersCommand::Remove { who } => {
            block_on(c.call(Method::DELETE, &who.path(), None))?;
            println!("removed {}", who.describe());
        }
        SubscribersCommand::List { page_size, output } => {
            block_on(list(&c, "/v1/subscribers", page_size, output))?;
        }
        SubscribersCommand::Held { output } => {
            block_on(list(&c, "/v1/subscribers/file/held", 1000, output))
                .context("the records the held subscribers file would remove")?;
        }
        SubscribersCommand::AcceptFile => {
            let v = block_on(c.call(Method::POST, "/v1/subscribers/file/accept", None))
                .context("accepting the held subscribers file")?;
            println!(
                "subscribers file in force: {} records, {} removed",
                v["records"], v["removed"]
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

const HEADER: &str = "MAC                CIRCUIT-ID       REMOTE-ID        PLAN         ADDRESS";

fn row(v: &Value) -> String {
    let f = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    let address = match (v["ipv4"].as_str(), v["pool"].as_str()) {
        (Some(ip), _) => ip.to_string(),
        (None, Some(pool)) => format!("pool {pool}"),
        (None, None) => "-".into(),
    };
    let plan = v["plan"].as_str().unwrap_or("(default)");
    format!(
        "{:<18} {:<16} {:<16} {:<12} {address}",
        f("mac"),
        f("circuit_id"),
        f("remote_id"),
        plan
    )
}

/// Every record of the listing at `path` (the store, or the held file's removals), a page
/// of `page` at a time.
async fn list(c: &Client, path: &str, page: u16, output: Output) -> anyhow::Result<()> {
    // Started on the first answer, so that a refusal prints no header (nor half a JSON array).
    let mut listing = None;
    let mut after = String::new();
    loop {
        let v = c
            .get(&format!(
                "{path}?limit={page}&after={}",
                query_value(&after)
            ))
            .await?;
        let records = v["subscribers"]
            .as_array()
            .with_context(|| format!("GET {path}: no \"subscribers\" array"))?;
        let listing = match &mut listing {
            Some(l) => l,
            None => listing.insert(Listing::start(output, HEADER)?),
        };
        for r in records {
            listing.item(r, row)?;
        }
        match v["next"].as_str() {
            Some(next) => after = next.to_string(),
            None => break,
        }
    }
    if let Some(l) = listing {
        l.finish("subscriber")?;
    }
    Ok(())
}
