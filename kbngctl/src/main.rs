//! `kbngctl`: the operator's and the lab's command line for kbng.
//!
//! Today it issues and verifies licences; session, subscriber and plan commands talk to a
//! running control pod and arrive with it.
#![forbid(unsafe_code)]

mod licence;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kbngctl",
    version,
    about = "Command-line tool for the kbng BNG"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Issue, verify and inspect Licence grants.
    #[command(subcommand)]
    Licence(licence::LicenceCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Licence(cmd) => licence::run(cmd),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("kbngctl: {err:#}");
            ExitCode::from(2)
        }
    }
}
