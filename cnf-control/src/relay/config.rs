//! The `dhcp` and `relay` sections of the control's configuration file, validated into a
//! [`RelaySettings`]. Every problem is reported with the field that has it.
//!
//! ```yaml
//! dhcp: {mode: relay}                 # server (default) | relay
//! relay:
//!   servers: ["203.0.113.2", "203.0.113.3:67"]   # failover order; port 67 if none
//!   listen: "0.0.0.0:67"              # the socket servers answer to
//!   giaddr: 100.64.0.1                # default: the first pool's gateway
//!   option82: {policy: insert, remoteId: bng-1}  # insert | replace | keep
//!   timeoutMs: 2000                   # before the next server is tried
//! ```

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use serde::Deserialize;

use crate::core::pool::PoolConfig;
use crate::core::relay::{Option82Policy, RelayConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DhcpMode {
    #[default]
    Server,
    Relay,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DhcpFile {
    #[serde(default)]
    pub mode: DhcpMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Option82PolicyFile {
    #[default]
    Insert,
    Replace,
    Keep,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Option82File {
    #[serde(default)]
    pub policy: Option82PolicyFile,
    #[serde(default)]
    pub remote_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RelayFile {
    pub servers: Vec<String>,
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default)]
    pub giaddr: Option<String>,
    #[serde(default)]
    pub option82: Option82File,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_down_secs")]
    pub server_down_secs: u64,
    #[serde(default = "default_max_hops")]
    pub max_hops: u8,
    #[serde(default = "default_discover_interval_ms")]
    pub discover_interval_ms: u64,
}

fn default_timeout_ms() -> u64 {
    2000
}
fn default_down_secs() -> u64 {
    30
}
fn default_max_hops() -> u8 {
    4
}
fn default_discover_interval_ms() -> u64 {
    500
}

/// The validated relay settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelaySettings {
    pub core: RelayConfig,
    pub listen: SocketAddr,
}

fn server_addr(s: &str) -> Option<SocketAddrV4> {
    s.parse::<SocketAddrV4>().ok().or_else(|| {
        s.parse::<Ipv4Addr>()
            .ok()
            .map(|ip| SocketAddrV4::new(ip, 67))
    })
}

/// Validate `dhcp` and `relay` together: `Some` in relay mode, `None` in server mode.
pub fn validate(
    dhcp: Option<&DhcpFile>,
    relay: Option<&RelayFile>,
    pools: &[PoolConfig],
    problems: &mut Vec<String>,
) -> Option<RelaySettings> {
    let mode = dhcp.map(|d| d.mode).unwrap_or_default();
    let r = match (mode, relay) {
        (DhcpMode::Server, None) => return None,
        (DhcpMode::Server, Some(_)) => {
            problems.push("relay: set but dhcp.mode is server (set dhcp.mode: relay)".into());
            return None;
        }
        (DhcpMode::Relay, None) => {
            problems.push("relay: dhcp.mode is relay but no relay section names servers".into());
            return None;
        }
        (DhcpMode::Relay, Some(r)) => r,
    };
    let before = problems.len();
    if r.servers.is_empty() {
        problems.push("relay.servers: at least one is needed".into());
    }
    let mut servers = Vec::new();
    for (i, s) in r.servers.iter().enumerate() {
        match server_addr(s) {
            Some(a) if a.ip().is_unspecified() || a.port() == 0 => problems.push(format!(
                "relay.servers[{i}]: {s:?} is not a usable server address"
            )),
            Some(a) if servers.contains(&a) => {
                problems.push(format!("relay.servers[{i}]: {s:?} twice"))
            }
            Some(a) => servers.push(a),
            None => problems.push(format!(
                "relay.servers[{i}]: {s:?} is neither an IPv4 address nor address:port"
            )),
        }
    }
    let listen_text = r.listen.as_deref().unwrap_or("0.0.0.0:67");
    // IPv4 only: on a dual-stack IPv6 socket the servers' answers would come from mapped
    // addresses that the relay, whose servers are IPv4, would not take for theirs.
    let listen = listen_text
        .parse::<std::net::SocketAddrV4>()
        .ok()
        .map(SocketAddr::V4)
        .or_else(|| {
            problems.push(format!(
                "relay.listen: {listen_text:?} is not IPv4 address:port"
            ));
            None
        });
    let giaddr = match &r.giaddr {
        Some(g) => g
            .parse::<Ipv4Addr>()
            .ok()
            .filter(|a| !a.is_unspecified())
            .or_else(|| {
                problems.push(format!("relay.giaddr: {g:?} is not a unicast IPv4 address"));
                None
            }),
        None => pools.first().map(|p| p.gateway).or_else(|| {
            problems.push("relay.giaddr: not set and no pool gateway to default to".into());
            None
        }),
    };
    if let Some(g) = giaddr
        && !pools.iter().any(|p| p.gateway == g)
    {
        problems.push(format!(
            "relay.giaddr: {g} is no pool's gateway (servers pick the subnet by it, and the \
             dataplanes answer ARP only for gateways)"
        ));
    }
    if r.timeout_ms == 0 {
        problems.push("relay.timeoutMs: must be non-zero".into());
    }
    if r.max_hops == 0 || r.max_hops > 16 {
        problems.push("relay.maxHops: must be 1..=16 (RFC 1542 §4.1.1)".into());
    }
    if let Some(id) = &r.option82.remote_id
        && (id.is_empty() || id.len() > 64)
    {
        problems.push("relay.option82.remoteId: must be 1..=64 bytes".into());
    }
    if problems.len() > before {
        return None;
    }
    let (listen, giaddr) = (listen?, giaddr?);
    Some(RelaySettings {
        core: RelayConfig {
            servers,
            giaddr,
            option82: match r.option82.policy {
                Option82PolicyFile::Insert => Option82Policy::Insert,
                Option82PolicyFile::Replace => Option82Policy::Replace,
                Option82PolicyFile::Keep => Option82Policy::Keep,
            },
            remote_id: r.option82.remote_id.as_ref().map(|s| s.as_bytes().to_vec()),
            timeout_ns: r.timeout_ms.saturating_mul(1_000_000),
            server_down_ns: r.server_down_secs.saturating_mul(1_000_000_000),
            max_hops: r.max_hops,
            discover_interval_ns: r.discover_interval_ms.saturating_mul(1_000_000),
        },
        listen,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pools() -> Vec<PoolConfig> {
        vec![crate::core::test_support::pool()]
    }

    fn run(dhcp: &str, relay: Option<&str>) -> Result<Option<RelaySettings>, Vec<String>> {
        let d: DhcpFile = serde_yaml_ng::from_str(dhcp).unwrap();
        let r: Option<RelayFile> = relay.map(|r| serde_yaml_ng::from_str(r).unwrap());
        let mut problems = Vec::new();
        let s = validate(Some(&d), r.as_ref(), &pools(), &mut problems);
        if problems.is_empty() {
            Ok(s)
        } else {
            Err(problems)
        }
    }

    #[test]
    fn relay_defaults_to_the_first_gateway_and_port_67() {
        let s = run(
            "{mode: relay}",
            Some("{servers: [203.0.113.2, '203.0.113.3:1067']}"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.core.giaddr, Ipv4Addr::new(100, 64, 0, 1));
        assert_eq!(
            s.core.servers,
            vec![
                "203.0.113.2:67".parse().unwrap(),
                "203.0.113.3:1067".parse().unwrap()
            ]
        );
        assert_eq!(s.listen, "0.0.0.0:67".parse().unwrap());
        assert_eq!(s.core.option82, Option82Policy::Insert);
        assert_eq!(run("{mode: server}", None).unwrap(), None);
    }

    #[test]
    fn every_problem_names_its_field() {
        let p = run(
            "{mode: relay}",
            Some(
                "{servers: [nowhere, 0.0.0.0], listen: x, giaddr: 10.0.0.1, timeoutMs: 0, \
                 maxHops: 20, option82: {remoteId: ''}}",
            ),
        )
        .unwrap_err();
        let fields = [
            "relay.servers[0]",
            "relay.servers[1]",
            "relay.listen",
            "relay.giaddr",
            "relay.timeoutMs",
            "relay.maxHops",
            "relay.option82.remoteId",
        ];
        assert_eq!(p.len(), fields.len(), "{p:#?}");
        for (p, f) in p.iter().zip(fields) {
            assert!(p.starts_with(f), "{p} should name {f}");
        }
        assert!(run("{mode: relay}", None).unwrap_err()[0].starts_with("relay:"));
        let v6 = run(
            "{mode: relay}",
            Some("{servers: [192.0.2.1], listen: '[::]:67'}"),
        );
        assert_eq!(
            v6.unwrap_err(),
            [r#"relay.listen: "[::]:67" is not IPv4 address:port"#]
        );
        assert!(
            run("{mode: server}", Some("{servers: [192.0.2.1]}")).unwrap_err()[0]
                .contains("dhcp.mode")
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = serde_yaml_ng::from_str::<RelayFile>("{servers: [], serverz: 1}").unwrap_err();
        assert!(e.to_string().contains("serverz"), "{e}");
        let e = serde_yaml_ng::from_str::<DhcpFile>("{mode: proxy}").unwrap_err();
        assert!(e.to_string().contains("proxy"), "{e}");
    }
}
