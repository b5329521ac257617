//! `kbngctl`: the operator's and the lab's command line for kbng.
//!
//! Licences are issued and verified offline; everything else talks to a running kbng-control's
//! operator API (`cnf-control/API.md`) at `--server` (or `KBNG_SERVER`).
#![forbid(unsafe_code)]

mod client;
mod licence;
mod listing;
mod plans;
mod sessions;
mod status;
mod subscribers;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kbngctl",
    version,
    about = "Command-line tool for the kbng BNG"
)]
struct Cli {
    #[command(flatten)]
    server: client::ServerArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Issue, verify and inspect Licence grants; the running control's licence status.
    #[command(subcommand)]
    Licence(licence::LicenceCommand),
    /// List, show, watch and drain subscriber sessions.
    #[command(subcommand)]
    Sessions(sessions::SessionsCommand),
    /// Import, add and remove subscribers of the local AAA store.
    #[command(subcommand)]
    Subscribers(subscribers::SubscribersCommand),
    /// Plans with their rates and sessions.
    Plans(plans::PlansArgs),
    /// Sessions, licence, dataplanes (NUMA, cores, ports) and drops by reason at a glance.
    Status(status::StatusArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Licence(licence::LicenceCommand::Status { output }) => {
            licence::status::run(&cli.server, output)
        }
        Command::Licence(cmd) => licence::run(cmd),
        Command::Sessions(cmd) => sessions::run(&cli.server, cmd),
        Command::Subscribers(cmd) => subscribers::run(&cli.server, cmd),
        Command::Plans(args) => plans::run(&cli.server, args),
        Command::Status(args) => status::run(&cli.server, args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("kbngctl: {err:#}");
            ExitCode::from(2)
        }
    }
}
