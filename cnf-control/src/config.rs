//! The control's configuration file (YAML or JSON), validated once into domain types. Unknown
//! fields are refused, and every error found is reported, not only the first.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use kbng_crds::bng::PoolSpec;
use kbng_crds::plan::DirectionPolicy;
use kbng_crds::policy::MIN_RATE_BPS;
use serde::Deserialize;

use crate::core::engine::{EngineConfig, UnknownPolicy};
use crate::core::licence::{Cap, CapSource};
use crate::core::pacing::PacingConfig;
use crate::core::pool::PoolConfig;
use crate::licence_file::{GrantConfig, KeySource};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("{path}: {} problem(s):\n  {}", .problems.len(), .problems.join("\n  "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// A plan as the file says it: a policy per direction in the SubscriberPlan's own shape, and
/// `rateBps` as shorthand for single-rate srTCM in any direction not given.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanFile {
    pub name: String,
    /// Dataplane plan id, non-zero.
    pub id: u32,
    #[serde(default)]
    pub rate_bps: Option<u64>,
    #[serde(default)]
    pub upstream: Option<DirectionPolicy>,
    #[serde(default)]
    pub downstream: Option<DirectionPolicy>,
}

/// A checked plan: what the dataplanes are programmed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    pub id: u32,
    pub upstream: DirectionPolicy,
    pub downstream: DirectionPolicy,
}

impl PlanFile {
    fn check(self, i: usize, problems: &mut Vec<String>) -> Option<Plan> {
        let before = problems.len();
        if self.id == 0 {
            problems.push(format!("plans[{i}].id: must be non-zero"));
        }
        let mut direction = |which: &str, given: Option<DirectionPolicy>| {
            let policy = given.or(self.rate_bps.map(DirectionPolicy::single_rate));
            match policy {
                Some(p) => {
                    problems.extend(p.problems(&format!("plans[{i}].{which}")));
                    Some(p)
                }
                None => {
                    problems.push(format!("plans[{i}]: neither {which} nor rateBps is given"));
                    None
                }
            }
        };
        let upstream = direction("upstream", self.upstream);
        let downstream = direction("downstream", self.downstream);
        if self.rate_bps.is_some_and(|r| r < MIN_RATE_BPS) {
            problems.push(format!("plans[{i}].rateBps: at least {MIN_RATE_BPS}"));
        }
        match (upstream, downstream) {
            (Some(upstream), Some(downstream)) if problems.len() == before => Some(Plan {
                name: self.name,
                id: self.id,
                upstream,
                downstream,
            }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GardenRuleFile {
    pub prefix: String,
    #[serde(default)]
    pub protocol: u8,
    #[serde(default)]
    pub port: u16,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalledGardenFile {
    pub portal_url: String,
    #[serde(default)]
    pub allowed: Vec<GardenRuleFile>,
}

/// Where the session cap comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LicenceFile {
    /// A file holding the evaluated cap as a decimal number (re-read when it changes).
    #[serde(default)]
    pub cap_file: Option<PathBuf>,
    /// A signed Licence grant (YAML, as `kbngctl licence issue` writes it), verified here.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The base64 Ed25519 public key the grant must verify against.
    #[serde(default)]
    pub public_key: Option<String>,
    /// A file holding that key.
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
}

impl LicenceFile {
    fn grant(&self, problems: &mut Vec<String>) -> Option<GrantConfig> {
        if self.cap_file.is_some() && self.file.is_some() {
            problems.push("licence: capFile and file exclude each other".into());
        }
        let key = match (&self.public_key, &self.public_key_file) {
            (Some(k), None) => Some(KeySource::Inline(k.clone())),
            (None, Some(p)) => Some(KeySource::File(p.clone())),
            (Some(_), Some(_)) => {
                problems.push("licence: publicKey and publicKeyFile exclude each other".into());
                return None;
            }
            (None, None) => None,
        };
        match (&self.file, key) {
            (Some(file), Some(key)) => Some(GrantConfig {
                file: file.clone(),
                key,
            }),
            (Some(_), None) => {
                problems.push("licence.file: needs publicKey or publicKeyFile".into());
                None
            }
            (None, Some(_)) => {
                problems.push("licence.publicKey(File): needs licence.file".into());
                None
            }
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PacingFile {
    pub rate_per_sec: u64,
    pub burst: u64,
    pub queue: usize,
    /// Longest a DISCOVER waits in the pacing queue before it is dropped as stale
    /// (default 4,000: a client's first retransmission, RFC 2131 §4.1).
    #[serde(default = "default_max_wait_ms")]
    pub max_wait_ms: u64,
}

fn default_max_wait_ms() -> u64 {
    4000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    /// `unix:/path` or `http://host:port`; `https://host:port` with `dataplaneTls`.
    pub dataplanes: Vec<String>,
    /// Mutual TLS to the dataplanes.
    #[serde(default)]
    pub dataplane_tls: Option<crate::dataplane_tls::DataplaneTlsFile>,
    pub pools: Vec<PoolSpec>,
    pub plans: Vec<PlanFile>,
    pub default_plan: String,
    #[serde(default = "default_unknown")]
    pub unknown_subscribers: UnknownPolicy,
    #[serde(default)]
    pub option82_identity: bool,
    /// The access line is the identity of a subscriber whose option 82 is not (records keyed
    /// by the circuit-id `dataplane/port/outer-vlan/inner-vlan`).
    #[serde(default)]
    pub line_identity: bool,
    /// CSV (`mac,circuit_id,remote_id,plan[,ipv4,pool]`) or JSON (by extension).
    #[serde(default)]
    pub subscribers_file: Option<PathBuf>,
    /// Seconds between reads of `subscribersFile`: a changed file replaces the records without
    /// a restart (a ConfigMap the kubelet updates).
    #[serde(default = "default_subscribers_recheck_secs")]
    pub subscribers_recheck_secs: u32,
    /// A reread `subscribersFile` that would remove more than this percentage of the records
    /// in force is held, not applied, until an operator accepts it (100: never held).
    #[serde(default = "default_subscribers_max_removal_percent")]
    pub subscribers_max_removal_percent: u8,
    #[serde(default)]
    pub licence: Option<LicenceFile>,
    pub store: PathBuf,
    /// Milliseconds between forced syncs of the store to the disk; 0 (the default) syncs at
    /// every commit. See `crate::store::sync` for what a machine crash can lose otherwise.
    #[serde(default)]
    pub store_sync_interval_ms: u64,
    pub api_listen: String,
    /// A file holding the bearer token every admin API request must carry (all but
    /// `/v1/ready`); without it the API asks for none.
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    pub walled_garden: WalledGardenFile,
    #[serde(default)]
    pub pacing: Option<PacingFile>,
    #[serde(default = "default_per_line")]
    pub max_sessions_per_line: u32,
    /// External AAA: `radius` (RFC 2865/2866/5176); the local subscribers when absent.
    #[serde(default)]
    pub aaa: Option<crate::radius::config::AaaFile>,
    /// `mode: server` (default) or `relay` (then `relay` names the servers).
    #[serde(default)]
    pub dhcp: Option<crate::relay::config::DhcpFile>,
    #[serde(default)]
    pub relay: Option<crate::relay::config::RelayFile>,
}

fn default_subscribers_recheck_secs() -> u32 {
    10
}

fn default_subscribers_max_removal_percent() -> u8 {
    10
}

/// The longest `subscribersRecheckSecs`: an hour, so an edit never waits longer than that.
const MAX_SUBSCRIBERS_RECHECK_SECS: u32 = 3600;

fn default_unknown() -> UnknownPolicy {
    UnknownPolicy::Captive
}

fn default_per_line() -> u32 {
    64
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub dataplanes: Vec<String>,
    /// Mutual TLS to the dataplanes, when configured (checked: the files loaded at start).
    pub dataplane_tls: Option<crate::dataplane_tls::DataplaneTlsFile>,
    pub engine: EngineConfig,
    pub plans: Vec<Plan>,
    pub subscribers_file: Option<PathBuf>,
    /// How often `subscribers_file` is read for changes.
    pub subscribers_recheck: std::time::Duration,
    /// Above this share of the records in force removed, a reread file is held.
    pub subscribers_max_removal_percent: u8,
    pub cap_file: Option<PathBuf>,
    pub licence_grant: Option<GrantConfig>,
    pub store: PathBuf,
    pub store_sync: crate::store::sync::SyncPolicy,
    pub api_listen: SocketAddr,
    /// The admin API's bearer token, when one is configured.
    pub api_token: Option<std::sync::Arc<crate::api::auth::ApiToken>>,
    pub portal_url: String,
    /// (prefix, len, protocol, port)
    pub garden: Vec<(Ipv4Addr, u8, u8, u16)>,
    /// RADIUS, when configured: the engine asks it instead of the local subscribers.
    pub radius: Option<crate::radius::config::RadiusConfig>,
    /// Relay mode: DHCP goes to these servers; `None` = the control serves DHCP itself.
    pub relay: Option<crate::relay::config::RelaySettings>,
}

fn cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, l) = s.split_once('/').unwrap_or((s, "32"));
    let ip: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("{s:?} is not an IPv4 prefix"))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("{s:?} has a bad prefix length"))?;
    Ok((ip, len))
}

/// A network prefix: [`cidr`] with no host bits set (`100.64.0.1/24` is refused, naming the
/// network meant), as the dataplanes and pools take it.
fn network(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (ip, len) = cidr(s)?;
    let net = kbng_wire::Ipv4Cidr::new(ip, len)
        .map_err(|e| format!("{s:?}: {e}"))?
        .network();
    if net != ip {
        return Err(format!(
            "{s:?} has host bits set (the network is {net}/{len})"
        ));
    }
    Ok((ip, len))
}

/// A pool's lease time: the BNG resource's schema asks 60 s at least, but a control
/// configured by hand may lease for seconds (the lease-expiry tests do); never for none.
const LEASE_SECS: std::ops::RangeInclusive<u32> = 1..=31_536_000;

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        let file: ConfigFile =
            serde_yaml_ng::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.into(),
                source,
            })?;
        file.validate().map_err(|problems| ConfigError::Invalid {
            path: path.into(),
            problems,
        })
    }

    /// Whether the licence source configured can be read (for `--check-config`: a start
    /// falls back on the free baseline, but a check must not call that valid).
    pub fn licence_readable(&self) -> Result<(), String> {
        if let Some(g) = &self.licence_grant {
            g.readable()?;
        }
        if let Some(p) = &self.cap_file {
            read_cap(p)?;
        }
        Ok(())
    }

    /// The cap at start: from the signed grant or the cap file, else the free baseline.
    pub fn initial_cap(&self) -> Cap {
        if let Some(g) = &self.licence_grant {
            return g.cap(crate::service::now_ns());
        }
        match &self.cap_file {
            Some(p) => read_cap(p).unwrap_or_else(|why| Cap {
                max_sessions: kbng_crds::grant::FREE_BASELINE_SESSIONS,
                source: CapSource::FreeBaseline { reason: why },
            }),
            None => Cap {
                max_sessions: kbng_crds::grant::FREE_BASELINE_SESSIONS,
                source: CapSource::FreeBaseline {
                    reason: "no licence configured".into(),
                },
            },
        }
    }
}

impl Config {
    /// The cap now, when a licence source is configured; `None` keeps the cap in force (no
    /// source, or a cap file that cannot be read right now).
    pub fn current_cap(&self, now_ns: u64) -> Option<Cap> {
        match (&self.licence_grant, &self.cap_file) {
            (Some(g), _) => Some(g.cap(now_ns)),
            (None, Some(p)) => read_cap(p).ok(),
            (None, None) => None,
        }
    }
}

/// Read a cap file: one decimal number.
pub fn read_cap(p: &Path) -> Result<Cap, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{}: {:?} is not a number", p.display(), text.trim()))?;
    Ok(Cap {
        max_sessions: n,
        source: CapSource::File {
            path: p.display().to_string(),
        },
    })
}

impl ConfigFile {
    pub fn validate(self) -> Result<Config, Vec<String>> {
        let mut problems = Vec::new();
        if self.dataplanes.is_empty() {
            problems.push("dataplanes: at least one is needed".into());
        }
        if let Some(t) = &self.dataplane_tls {
            t.validate(&mut problems);
        }
        crate::dataplane_tls::check_addresses(
            &self.dataplanes,
            self.dataplane_tls.is_some(),
            &mut problems,
        );
        let mut pools = Vec::new();
        for (i, p) in self.pools.iter().enumerate() {
            let at = format!("pools[{i}]");
            let net = network(&p.cidr).map_err(|e| format!("{at}.cidr: {e}"));
            if !LEASE_SECS.contains(&p.lease_secs) {
                problems.push(format!(
                    "{at}.leaseSecs: {} not in {}..={}",
                    p.lease_secs,
                    LEASE_SECS.start(),
                    LEASE_SECS.end()
                ));
            }
            let gw = p
                .gateway
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("{at}.gateway: {:?} is not an IPv4 address", p.gateway));
            let mut exclusions = Vec::new();
            for (j, e) in p.exclusions.iter().enumerate() {
                match cidr(e) {
                    Ok(x) => exclusions.push(x),
                    Err(e) => problems.push(format!("{at}.exclusions[{j}]: {e}")),
                }
            }
            let mut dns = Vec::new();
            for (j, d) in p.dns.iter().enumerate() {
                match d.parse::<Ipv4Addr>() {
                    Ok(x) => dns.push(x),
                    Err(_) => problems.push(format!("{at}.dns[{j}]: {d:?} is not an address")),
                }
            }
            match (net, gw) {
                (Ok((network, prefix_len)), Ok(gateway)) => pools.push(PoolConfig {
                    name: p.name.clone(),
                    network,
                    prefix_len,
                    gateway,
                    lease_secs: p.lease_secs,
                    dns,
                    exclusions,
                }),
                (a, b) => {
                    problems.extend(a.err());
                    problems.extend(b.err());
                }
            }
        }
        if self.pools.is_empty() {
            problems.push("pools: at least one is needed".into());
        }
        if let Err(errs) = crate::core::pool::Pools::new(pools.clone()) {
            problems.extend(errs.into_iter().map(|e| e.to_string()));
        }
        let mut plans = HashMap::new();
        let mut ids = std::collections::HashSet::new();
        let mut checked_plans = Vec::new();
        for (i, p) in self.plans.into_iter().enumerate() {
            if plans.insert(p.name.clone(), p.id).is_some() {
                problems.push(format!("plans[{i}].name: {:?} twice", p.name));
            }
            // The dataplanes key policers by id: a second plan with it would replace the
            // first's rates for every session on either.
            if !ids.insert(p.id) {
                problems.push(format!("plans[{i}].id: {} twice", p.id));
            }
            checked_plans.extend(p.check(i, &mut problems));
        }
        let default_plan = plans.get(&self.default_plan).copied().unwrap_or_else(|| {
            problems.push(format!(
                "defaultPlan: {:?} is not among plans",
                self.default_plan
            ));
            0
        });
        let api_token = self.api_token_file.as_ref().and_then(|p| {
            crate::api::auth::ApiToken::load(p)
                .map(std::sync::Arc::new)
                .map_err(|e| problems.push(e))
                .ok()
        });
        let api_listen = self.api_listen.parse().unwrap_or_else(|_| {
            problems.push(format!("apiListen: {:?} is not host:port", self.api_listen));
            SocketAddr::from(([127, 0, 0, 1], 0))
        });
        if !(self.walled_garden.portal_url.starts_with("http://")
            || self.walled_garden.portal_url.starts_with("https://"))
        {
            problems.push("walledGarden.portalUrl: must be an http(s) URL".into());
        }
        let mut garden = Vec::new();
        // The dataplanes refuse an access configuration with more (all of it, not the rest).
        if self.walled_garden.allowed.len() > kbng_api::fields::MAX_GARDEN_RULES {
            problems.push(format!(
                "walledGarden.allowed: {} rules, at most {}",
                self.walled_garden.allowed.len(),
                kbng_api::fields::MAX_GARDEN_RULES
            ));
        }
        for (i, r) in self.walled_garden.allowed.iter().enumerate() {
            match network(&r.prefix) {
                Ok((a, l)) => garden.push((a, l, r.protocol, r.port)),
                Err(e) => problems.push(format!("walledGarden.allowed[{i}].prefix: {e}")),
            }
        }
        let licence_grant = self.licence.as_ref().and_then(|l| l.grant(&mut problems));
        let pacing = self.pacing.map_or(
            PacingConfig {
                rate_per_sec: 2000,
                burst: 200,
                queue: 20_000,
                max_wait_ns: default_max_wait_ms() * 1_000_000,
            },
            |p| PacingConfig {
                rate_per_sec: p.rate_per_sec,
                burst: p.burst,
                queue: p.queue,
                max_wait_ns: p.max_wait_ms.saturating_mul(1_000_000),
            },
        );
        if pacing.rate_per_sec == 0 || pacing.burst == 0 {
            problems.push("pacing: ratePerSec and burst must be non-zero".into());
        }
        if pacing.max_wait_ns == 0 {
            problems.push("pacing: maxWaitMs must be non-zero".into());
        }
        if self.store_sync_interval_ms > 60_000 {
            problems.push(format!(
                "storeSyncIntervalMs: {} is more than 60,000 (a minute of leases a machine crash \
                 could lose)",
                self.store_sync_interval_ms
            ));
        }
        if !(1..=MAX_SUBSCRIBERS_RECHECK_SECS).contains(&self.subscribers_recheck_secs) {
            problems.push(format!(
                "subscribersRecheckSecs: {} not in 1..={MAX_SUBSCRIBERS_RECHECK_SECS}",
                self.subscribers_recheck_secs
            ));
        }
        if !(1..=100).contains(&self.subscribers_max_removal_percent) {
            problems.push(format!(
                "subscribersMaxRemovalPercent: {} not in 1..=100 (100 never holds an edit)",
                self.subscribers_max_removal_percent
            ));
        }
        if self.max_sessions_per_line == 0 {
            problems
                .push("maxSessionsPerLine: must be at least 1 (0 refuses every subscriber)".into());
        }
        let relay = crate::relay::config::validate(
            self.dhcp.as_ref(),
            self.relay.as_ref(),
            &pools,
            &mut problems,
        );
        let radius = self.aaa.as_ref().and_then(|a| a.validate(&mut problems));
        let external_auth = radius.is_some();
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Config {
            radius,
            relay,
            dataplanes: self.dataplanes,
            dataplane_tls: self.dataplane_tls,
            engine: EngineConfig {
                pools,
                plans,
                default_plan,
                captive_plan: 0,
                unknown: self.unknown_subscribers,
                option82_identity: self.option82_identity,
                line_identity: self.line_identity,
                external_auth,
                pacing,
                max_sessions_per_line: self.max_sessions_per_line,
                quarantine_secs: 600,
                reoffer_interval_ns: 500_000_000,
            },
            plans: checked_plans,
            subscribers_file: self.subscribers_file,
            subscribers_recheck: std::time::Duration::from_secs(u64::from(
                self.subscribers_recheck_secs,
            )),
            subscribers_max_removal_percent: self.subscribers_max_removal_percent,
            cap_file: self.licence.and_then(|l| l.cap_file),
            licence_grant,
            store: self.store,
            store_sync: match self.store_sync_interval_ms {
                0 => crate::store::sync::SyncPolicy::EveryCommit,
                ms => {
                    crate::store::sync::SyncPolicy::Interval(std::time::Duration::from_millis(ms))
                }
            },
            api_listen,
            api_token,
            portal_url: self.walled_garden.portal_url,
            garden,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
dataplanes: ["unix:/tmp/dp.sock"]
pools:
  - {name: p, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}
plans: [{name: gold, id: 10, rateBps: 100000000}]
defaultPlan: gold
store: /tmp/x.redb
apiListen: 127.0.0.1:9090
walledGarden: {portalUrl: "http://192.0.2.80/", allowed: [{prefix: 192.0.2.80/32}]}
"#;

    #[test]
    fn good_config() {
        let f: ConfigFile = serde_yaml_ng::from_str(GOOD).unwrap();
        let c = f.validate().unwrap();
        assert_eq!(c.engine.default_plan, 10);
        assert_eq!(c.engine.pools[0].prefix_len, 24);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let bad = format!("{GOOD}\nsurprise: 1\n");
        let e = serde_yaml_ng::from_str::<ConfigFile>(&bad).unwrap_err();
        assert!(e.to_string().contains("surprise"), "{e}");
    }

    #[test]
    fn what_the_dataplanes_and_pools_would_refuse_or_misread_is_refused_here() {
        let garden: String = (0..257)
            .map(|i| format!("{{prefix: 10.0.{}.{}/32}}", i / 256, i % 256))
            .collect::<Vec<_>>()
            .join(", ");
        let cases = [
            (
                GOOD.replace("cidr: 100.64.0.0/24", "cidr: 100.64.0.1/24"),
                r#"pools[0].cidr: "100.64.0.1/24" has host bits set (the network is 100.64.0.0/24)"#,
            ),
            (
                GOOD.replace("leaseSecs: 600", "leaseSecs: 0"),
                "pools[0].leaseSecs: 0 not in 1..=31536000",
            ),
            (
                GOOD.replace(
                    "plans: [{name: gold, id: 10, rateBps: 100000000}]",
                    "plans: [{name: gold, id: 10, rateBps: 100000000}, {name: silver, id: 10, rateBps: 50000000}]",
                ),
                "plans[1].id: 10 twice",
            ),
            (
                GOOD.replace("prefix: 192.0.2.80/32", "prefix: 192.0.2.80/24"),
                r#"walledGarden.allowed[0].prefix: "192.0.2.80/24" has host bits set (the network is 192.0.2.0/24)"#,
            ),
            (
                GOOD.replace("allowed: [{prefix: 192.0.2.80/32}]", &format!("allowed: [{garden}]")),
                "walledGarden.allowed: 257 rules, at most 256",
            ),
        ];
        for (text, said) in cases {
            let f: ConfigFile = serde_yaml_ng::from_str(&text).unwrap();
            let problems = f.validate().unwrap_err();
            assert_eq!(problems, [said]);
        }
    }

    #[test]
    fn every_problem_is_reported() {
        let bad = GOOD
            .replace("unix:/tmp/dp.sock", "tcp://x")
            .replace("gateway: 100.64.0.1", "gateway: 10.0.0.1")
            .replace("defaultPlan: gold", "defaultPlan: platinum")
            .replace("127.0.0.1:9090", "nowhere");
        let f: ConfigFile = serde_yaml_ng::from_str(&bad).unwrap();
        let problems = f.validate().unwrap_err();
        for said in [
            r#"dataplanes[0]: "tcp://x""#,
            "gateway 10.0.0.1 is not inside",
            r#"defaultPlan: "platinum""#,
            r#"apiListen: "nowhere""#,
        ] {
            let n = problems.iter().filter(|p| p.contains(said)).count();
            assert_eq!(n, 1, "{said}: {problems:#?}");
        }
        assert_eq!(problems.len(), 4, "{problems:#?}");
    }

    #[test]
    fn pacing_max_wait_defaults_to_a_retransmission_and_refuses_zero() {
        let with = |p: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&format!("{GOOD}\npacing: {p}\n")).unwrap();
            f.validate()
        };
        let c = with("{ratePerSec: 100, burst: 10, queue: 50}").unwrap();
        assert_eq!(c.engine.pacing.max_wait_ns, 4_000_000_000);
        let c = with("{ratePerSec: 100, burst: 10, queue: 50, maxWaitMs: 250}").unwrap();
        assert_eq!(c.engine.pacing.max_wait_ns, 250_000_000);
        let p = with("{ratePerSec: 100, burst: 10, queue: 50, maxWaitMs: 0}").unwrap_err();
        assert!(p.iter().any(|e| e.contains("maxWaitMs")), "{p:?}");
    }

    #[test]
    fn max_sessions_per_line_defaults_to_64_and_refuses_zero() {
        let with = |extra: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&format!("{GOOD}\n{extra}\n")).unwrap();
            f.validate()
        };
        assert_eq!(with("").unwrap().engine.max_sessions_per_line, 64);
        let c = with("maxSessionsPerLine: 4000").unwrap();
        assert_eq!(c.engine.max_sessions_per_line, 4000);
        let p = with("maxSessionsPerLine: 0").unwrap_err();
        assert!(p.iter().any(|e| e.contains("maxSessionsPerLine")), "{p:?}");
    }

    #[test]
    fn store_sync_defaults_to_every_commit_and_refuses_over_a_minute() {
        use crate::store::sync::SyncPolicy;
        let with = |extra: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&format!("{GOOD}\n{extra}\n")).unwrap();
            f.validate()
        };
        assert_eq!(with("").unwrap().store_sync, SyncPolicy::EveryCommit);
        assert_eq!(
            with("storeSyncIntervalMs: 0").unwrap().store_sync,
            SyncPolicy::EveryCommit
        );
        assert_eq!(
            with("storeSyncIntervalMs: 200").unwrap().store_sync,
            SyncPolicy::Interval(std::time::Duration::from_millis(200))
        );
        let p = with("storeSyncIntervalMs: 60001").unwrap_err();
        assert!(p.iter().any(|e| e.contains("storeSyncIntervalMs")), "{p:?}");
    }

    #[test]
    fn subscribers_recheck_defaults_to_ten_seconds_and_refuses_zero_and_over_an_hour() {
        let with = |extra: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&format!("{GOOD}\n{extra}\n")).unwrap();
            f.validate()
        };
        let secs = |c: Config| c.subscribers_recheck.as_secs();
        assert_eq!(secs(with("").unwrap()), 10);
        assert_eq!(secs(with("subscribersRecheckSecs: 2").unwrap()), 2);
        for bad in ["0", "3601"] {
            let p = with(&format!("subscribersRecheckSecs: {bad}")).unwrap_err();
            assert!(
                p.iter().any(|e| e.starts_with("subscribersRecheckSecs")),
                "{p:?}"
            );
        }
    }

    #[test]
    fn subscribers_max_removal_defaults_to_ten_percent_and_takes_one_to_a_hundred() {
        let with = |extra: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&format!("{GOOD}\n{extra}\n")).unwrap();
            f.validate()
        };
        let pct = |c: Config| c.subscribers_max_removal_percent;
        assert_eq!(pct(with("").unwrap()), 10);
        assert_eq!(pct(with("subscribersMaxRemovalPercent: 100").unwrap()), 100);
        let p = with("subscribersMaxRemovalPercent: 0").unwrap_err();
        assert!(
            p.iter()
                .any(|e| e.starts_with("subscribersMaxRemovalPercent: 0")),
            "{p:?}"
        );
        let p = with("subscribersMaxRemovalPercent: 101").unwrap_err();
        assert!(p.iter().any(|e| e.contains("not in 1..=100")), "{p:?}");
    }

    #[test]
    fn licence_grant_needs_one_key_and_no_cap_file() {
        let with = |l: &str| {
            let f: ConfigFile =
                serde_yaml_ng::from_str(&format!("{GOOD}\nlicence: {l}\n")).unwrap();
            f.validate()
        };
        let c = with("{file: /l.yaml, publicKeyFile: /k}").unwrap();
        assert_eq!(
            c.licence_grant.map(|g| g.key),
            Some(KeySource::File("/k".into()))
        );
        assert!(c.cap_file.is_none());
        let p = with("{file: /l.yaml}").unwrap_err();
        assert!(p[0].contains("needs publicKey"), "{p:?}");
        let p = with("{file: /l.yaml, publicKey: x, publicKeyFile: /k, capFile: /c}").unwrap_err();
        assert_eq!(p.len(), 2, "{p:?}");
    }

    #[test]
    fn plans_take_a_policy_per_direction_or_the_single_rate_shorthand() {
        let plans = r#"plans:
  - {name: gold, id: 10, rateBps: 100000000}
  - name: duo
    id: 11
    rateBps: 20000000
    upstream: {mode: trTCM, cirBps: 5000000, pirBps: 10000000, cbsBytes: 62500, pbsBytes: 125000}"#;
        let f: ConfigFile = serde_yaml_ng::from_str(
            &GOOD.replace("plans: [{name: gold, id: 10, rateBps: 100000000}]", plans),
        )
        .unwrap();
        let c = f.validate().unwrap();
        assert_eq!(
            c.plans[0].upstream,
            DirectionPolicy::single_rate(100_000_000)
        );
        assert_eq!(
            c.plans[0].downstream,
            DirectionPolicy::single_rate(100_000_000)
        );
        assert_eq!(c.plans[1].upstream.pir_bps, Some(10_000_000));
        assert_eq!(
            c.plans[1].downstream,
            DirectionPolicy::single_rate(20_000_000)
        );
    }

    #[test]
    fn a_bad_plan_names_its_field() {
        let with = |plan: &str| {
            let f: ConfigFile = serde_yaml_ng::from_str(&GOOD.replace(
                "plans: [{name: gold, id: 10, rateBps: 100000000}]",
                &format!("plans: [{plan}]"),
            ))
            .unwrap();
            f.validate().unwrap_err()
        };
        let p = with("{name: gold, id: 10}");
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("neither upstream nor rateBps"), "{p:?}");
        let p = with("{name: gold, id: 10, rateBps: 1000}");
        assert!(p.iter().any(|e| e.starts_with("plans[0].rateBps")), "{p:?}");
        let p = with(
            "{name: gold, id: 10, rateBps: 9000000, downstream: {mode: trTCM, cirBps: 9000000, pirBps: 8000000, cbsBytes: 9000, pbsBytes: 9000}}",
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("plans[0].downstream.pirBps 8000000 is below"),
            "{p:?}"
        );
    }
}
