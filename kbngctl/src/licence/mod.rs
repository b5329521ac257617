//! `kbngctl licence`: key generation, issuing and verification of Licence grants, and the
//! status of the cap a running control enforces.
//!
//! Issuing is for labs and tests: the vendor's signing key never leaves the vendor, and the
//! operator only ever holds the public key.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use ed25519_dalek::SigningKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kbng_crds::grant;
use kbng_crds::{Licence, LicenceSpec};

use crate::client::Output;

pub mod status;

#[derive(Debug, Subcommand)]
pub enum LicenceCommand {
    /// Generate a signing key pair; prints the public key, writes the signing seed to a file.
    Keygen {
        /// Where to write the base64 signing seed (created with mode 0600).
        #[arg(long)]
        signing_key_out: PathBuf,
    },
    /// Issue a signed Licence resource (YAML on stdout).
    Issue {
        /// File holding the base64 signing seed.
        #[arg(long)]
        signing_key: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "default")]
        namespace: String,
        #[arg(long)]
        customer: String,
        #[arg(long)]
        licence_id: String,
        #[arg(long)]
        max_sessions: u64,
        /// Start of validity (RFC 3339); now when omitted.
        #[arg(long)]
        not_before: Option<Timestamp>,
        /// Length of validity in days from not-before.
        #[arg(long, default_value_t = 365)]
        days: i64,
        #[arg(long = "feature")]
        features: Vec<String>,
    },
    /// Verify a Licence resource (YAML file) against a public key; exit 1 when not in force.
    Verify {
        /// Base64 Ed25519 public key, as configured in the operator.
        #[arg(long)]
        public_key: String,
        file: PathBuf,
        /// Evaluate at this instant (RFC 3339) instead of now.
        #[arg(long)]
        at: Option<Timestamp>,
    },
    /// The cap the running kbng-control enforces: source, validity, days left, use.
    Status {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(cmd: LicenceCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LicenceCommand::Keygen { signing_key_out } => keygen(&signing_key_out),
        LicenceCommand::Issue {
            signing_key,
            name,
            namespace,
            customer,
            licence_id,
            max_sessions,
            not_before,
            days,
            features,
        } => {
            if days <= 0 {
                bail!("--days must be positive, got {days}");
            }
            if max_sessions == 0 {
                bail!("--max-sessions must be at least 1");
            }
            let key = read_signing_key(&signing_key)?;
            let not_before = not_before.unwrap_or_else(Timestamp::now);
            let not_after = days
                .checked_mul(24)
                .and_then(SignedDuration::try_from_hours)
                .and_then(|d| not_before.checked_add(d).ok())
                .with_context(|| format!("--days {days} overflows the calendar"))?;
            let mut spec = LicenceSpec {
                customer,
                licence_id,
                max_sessions,
                not_before: Time(not_before),
                not_after: Time(not_after),
                features,
                signature: String::new(),
            };
            spec.signature = grant::sign(&spec, &key);
            let licence = Licence {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            };
            print!("{}", serde_yaml_ng::to_string(&licence)?);
            Ok(ExitCode::SUCCESS)
        }
        LicenceCommand::Verify {
            public_key,
            file,
            at,
        } => verify(&public_key, &file, at.unwrap_or_else(Timestamp::now)),
        LicenceCommand::Status { .. } => bail!("licence status needs the server (a bug)"),
    }
}

fn keygen(out: &Path) -> anyhow::Result<ExitCode> {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let (seed, public) = grant::encode_key_pair(&key);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(out)
        .with_context(|| format!("--signing-key-out {}", out.display()))?;
    writeln!(file, "{seed}")?;
    println!("{public}");
    Ok(ExitCode::SUCCESS)
}

fn read_signing_key(path: &Path) -> anyhow::Result<SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--signing-key {}", path.display()))?;
    grant::signing_key_from_base64(&text)
        .with_context(|| format!("--signing-key {}", path.display()))
}

fn verify(public_key: &str, file: &Path, now: Timestamp) -> anyhow::Result<ExitCode> {
    let key = grant::public_key_from_base64(public_key).context("--public-key")?;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let licence: Licence =
        serde_yaml_ng::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    let verdict = grant::evaluate(&licence.spec, &key, now);
    println!("valid: {}", verdict.valid);
    println!("reason: {}", verdict.reason.as_str());
    println!("message: {}", verdict.message);
    println!("maxSessions: {}", verdict.max_sessions);
    println!(
        "source: {}",
        match verdict.source {
            kbng_crds::LicenceSource::Licence => "licence",
            kbng_crds::LicenceSource::FreeBaseline => "free-baseline",
        }
    );
    println!("expiresAt: {}", verdict.expires_at);
    if let Some(days) = verdict.days_remaining {
        println!("daysRemaining: {days}");
    }
    Ok(if verdict.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
