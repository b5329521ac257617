//! The `aaa.radius` section of the control's configuration, validated once into
//! [`RadiusConfig`]. Every problem is reported with the field it concerns
//! (`aaa.radius.servers[1].secretFile: ...`), and secrets are read here, from a file or an
//! environment variable, never from the configuration itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::core::session::AUTH_TIMEOUT_NS;

/// `aaa:` in the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AaaFile {
    #[serde(default)]
    pub radius: Option<RadiusFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerFile {
    /// Authentication `host:port` (usually port 1812).
    pub address: String,
    /// Accounting `host:port`; defaults to the authentication port + 1.
    #[serde(default)]
    pub accounting_address: Option<String>,
    /// The shared secret: a file holding it (one trailing newline is ignored), or an
    /// environment variable; exactly one of the two. (Not a flattened struct: serde cannot
    /// refuse unknown fields through `flatten`.)
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    #[serde(default)]
    pub secret_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountingFile {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Interim-Update interval; 0 = none unless the Access-Accept sets Acct-Interim-Interval.
    #[serde(default)]
    pub interim_secs: u32,
    /// How often a session's counters are read and kept between its interims (only for
    /// sessions whose interim interval is longer, or that have none): a dataplane lost
    /// without warning loses at most this much of their counted traffic. 0 = at interims only.
    #[serde(default = "default_counters_read_secs")]
    pub counters_read_secs: u32,
}

fn default_counters_read_secs() -> u32 {
    30
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DasClientFile {
    /// The source address CoA/Disconnect requests come from.
    pub address: String,
    /// The shared secret: a file holding it (one trailing newline is ignored), or an
    /// environment variable; exactly one of the two. (Not a flattened struct: serde cannot
    /// refuse unknown fields through `flatten`.)
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    #[serde(default)]
    pub secret_env: Option<String>,
}

/// The Dynamic Authorization Server (RFC 5176).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DasFile {
    /// UDP `host:port` to listen on (usually port 3799).
    pub listen: String,
    pub clients: Vec<DasClientFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VendorAttrFile {
    pub vendor_id: u32,
    pub vendor_type: u8,
}

/// `aaa.radius`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RadiusFile {
    /// Tried in order; the next one takes over when one stops answering.
    pub servers: Vec<ServerFile>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Retransmissions to one server before failing over to the next.
    #[serde(default = "default_retries")]
    pub retries: u32,
    pub nas_identifier: String,
    #[serde(default)]
    pub nas_ip_address: Option<Ipv4Addr>,
    #[serde(default)]
    pub user_name: UserNameSource,
    #[serde(default)]
    pub mac_format: MacFormat,
    /// The password for MAC authentication; the User-Name itself when unset.
    #[serde(default)]
    pub password: Option<String>,
    /// How the password is sent: `pap` (User-Password) or `chap` (CHAP-Password).
    #[serde(default)]
    pub auth_method: AuthMethod,
    /// The reply attribute naming the `SubscriberPlan`.
    #[serde(default)]
    pub plan_attribute: PlanAttributeKind,
    /// With `planAttribute: vendor`: which vendor sub-attribute.
    #[serde(default)]
    pub plan_vendor: Option<VendorAttrFile>,
    #[serde(default)]
    pub accounting: Option<AccountingFile>,
    #[serde(default)]
    pub das: Option<DasFile>,
}

fn yes() -> bool {
    true
}
fn default_timeout_ms() -> u64 {
    1000
}
fn default_retries() -> u32 {
    2
}

/// What the User-Name of an Access-Request holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UserNameSource {
    /// The client's MAC.
    #[default]
    Mac,
    /// Option 82 circuit-id, else the MAC.
    CircuitId,
    /// Option 82 remote-id, else the MAC.
    RemoteId,
}

/// How an Access-Request proves the password.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AuthMethod {
    /// User-Password, hidden with the shared secret (RFC 2865 §5.2): every server checks it,
    /// whatever form it stores the password in.
    #[default]
    Pap,
    /// CHAP-Password over a challenge of the NAS's own (RFC 2865 §5.3): the password never
    /// travels, but the server must hold it in clear text to check the response.
    Chap,
}

/// How MACs are written in User-Name and Calling-Station-Id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MacFormat {
    /// `02:00:00:00:01:01`
    #[default]
    Colon,
    /// `02-00-00-00-01-01` (RFC 3580 §3.21 style, in lower case)
    Hyphen,
    /// `020000000101`
    Bare,
}

impl MacFormat {
    pub fn format(self, mac: &[u8; 6]) -> String {
        let sep = match self {
            MacFormat::Colon => ":",
            MacFormat::Hyphen => "-",
            MacFormat::Bare => "",
        };
        mac.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(sep)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PlanAttributeKind {
    /// Filter-Id (11), the attribute most RADIUS servers are set up to return.
    #[default]
    FilterId,
    /// Class (25), as text.
    Class,
    /// A vendor sub-attribute (`planVendor`), as text.
    Vendor,
}

/// Where the plan name is read from, in Access-Accept and CoA-Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanAttribute {
    FilterId,
    Class,
    Vendor { vendor_id: u32, vendor_type: u8 },
}

/// A shared secret; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(<{} bytes>)", self.0.len())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub auth: SocketAddr,
    pub acct: SocketAddr,
    pub secret: Secret,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DasConfig {
    pub listen: SocketAddr,
    pub clients: Vec<(IpAddr, Secret)>,
}

/// The validated `aaa.radius`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RadiusConfig {
    pub servers: Vec<Server>,
    pub timeout: Duration,
    pub retries: u32,
    pub nas_identifier: String,
    pub nas_ip: Option<Ipv4Addr>,
    pub user_name: UserNameSource,
    pub mac_format: MacFormat,
    pub password: Option<String>,
    pub auth_method: AuthMethod,
    pub plan_attribute: PlanAttribute,
    pub accounting: bool,
    pub interim_secs: u32,
    pub counters_read_secs: u32,
    pub das: Option<DasConfig>,
}

fn read_secret(
    at: &str,
    file: &Option<PathBuf>,
    env: &Option<String>,
    problems: &mut Vec<String>,
) -> Secret {
    let got = match (file, env) {
        (Some(p), None) => std::fs::read(p)
            .map(|mut b| {
                if b.last() == Some(&b'\n') {
                    b.pop();
                }
                b
            })
            .map_err(|e| format!("{at}.secretFile: {}: {e}", p.display())),
        (None, Some(v)) => std::env::var(v)
            .map(String::into_bytes)
            .map_err(|_| format!("{at}.secretEnv: environment variable {v:?} is not set")),
        (Some(_), Some(_)) => Err(format!("{at}: give secretFile or secretEnv, not both")),
        (None, None) => Err(format!("{at}: a secretFile or secretEnv is needed")),
    };
    match got {
        Ok(b) if b.is_empty() => {
            problems.push(format!("{at}: the secret is empty"));
            Secret(b)
        }
        Ok(b) => Secret(b),
        Err(e) => {
            problems.push(e);
            Secret(Vec::new())
        }
    }
}

fn sock(at: &str, s: &str, problems: &mut Vec<String>) -> Option<SocketAddr> {
    s.parse()
        .map_err(|_| problems.push(format!("{at}: {s:?} is not host:port")))
        .ok()
}

impl AaaFile {
    /// The validated RADIUS section, or `None` (with `problems` filled when it was invalid).
    pub fn validate(&self, problems: &mut Vec<String>) -> Option<RadiusConfig> {
        let r = self.radius.as_ref()?;
        let before = problems.len();
        let mut servers = Vec::new();
        if r.servers.is_empty() {
            problems.push("aaa.radius.servers: at least one is needed".into());
        }
        for (i, s) in r.servers.iter().enumerate() {
            let at = format!("aaa.radius.servers[{i}]");
            let secret = read_secret(&at, &s.secret_file, &s.secret_env, problems);
            let auth = sock(&format!("{at}.address"), &s.address, problems);
            let acct = match &s.accounting_address {
                Some(a) => sock(&format!("{at}.accountingAddress"), a, problems),
                // The next port (1812 → 1813), which the last port has none of.
                None => auth.and_then(|a| match a.port().checked_add(1) {
                    Some(p) => Some(SocketAddr::new(a.ip(), p)),
                    None => {
                        problems.push(format!(
                            "{at}.accountingAddress: needed, {} has no next port",
                            a.port()
                        ));
                        None
                    }
                }),
            };
            if let (Some(auth), Some(acct)) = (auth, acct) {
                servers.push(Server { auth, acct, secret });
            }
        }
        // One socket, of the first server's family, sends to them all.
        let families = |v6: bool| {
            servers
                .iter()
                .any(|s| s.auth.is_ipv6() == v6 || s.acct.is_ipv6() == v6)
        };
        if families(true) && families(false) {
            problems.push(
                "aaa.radius.servers: all IPv4 or all IPv6 (one socket sends to them all)".into(),
            );
        }
        if !(100..=10_000).contains(&r.timeout_ms) {
            problems.push(format!(
                "aaa.radius.timeoutMs: {} is outside 100..=10000",
                r.timeout_ms
            ));
        }
        if r.retries > 10 {
            problems.push(format!("aaa.radius.retries: {} is above 10", r.retries));
        }
        // The whole attempt must end before the session's authorization window does, or the
        // session expires while a server that might still answer is being tried.
        let budget_ms = r
            .timeout_ms
            .saturating_mul(u64::from(r.retries) + 1)
            .saturating_mul(r.servers.len().max(1) as u64);
        let window_ms = AUTH_TIMEOUT_NS / 1_000_000;
        if budget_ms >= window_ms {
            problems.push(format!(
                "aaa.radius.timeoutMs: timeoutMs × (retries + 1) × servers = {budget_ms} ms, \
                 not below the {window_ms} ms a session waits for its authorization"
            ));
        }
        if r.nas_identifier.is_empty() || r.nas_identifier.len() > 253 {
            problems.push("aaa.radius.nasIdentifier: 1 to 253 bytes".into());
        }
        if r.password.as_ref().is_some_and(|p| p.len() > 128) {
            problems.push("aaa.radius.password: at most 128 bytes (RFC 2865 §5.2)".into());
        }
        let plan_attribute = match (r.plan_attribute, &r.plan_vendor) {
            (PlanAttributeKind::FilterId, None) => PlanAttribute::FilterId,
            (PlanAttributeKind::Class, None) => PlanAttribute::Class,
            (PlanAttributeKind::Vendor, Some(v)) => PlanAttribute::Vendor {
                vendor_id: v.vendor_id,
                vendor_type: v.vendor_type,
            },
            (PlanAttributeKind::Vendor, None) => {
                problems.push("aaa.radius.planVendor: needed with planAttribute: vendor".into());
                PlanAttribute::FilterId
            }
            (_, Some(_)) => {
                problems.push("aaa.radius.planVendor: only with planAttribute: vendor".into());
                PlanAttribute::FilterId
            }
        };
        let (accounting, interim_secs, counters_read_secs) = r
            .accounting
            .as_ref()
            .map_or((true, 0, default_counters_read_secs()), |a| {
                (a.enabled, a.interim_secs, a.counters_read_secs)
            });
        let das = r.das.as_ref().and_then(|d| {
            let listen = sock("aaa.radius.das.listen", &d.listen, problems);
            if d.clients.is_empty() {
                problems.push("aaa.radius.das.clients: at least one is needed".into());
            }
            let mut clients = Vec::new();
            for (i, c) in d.clients.iter().enumerate() {
                let at = format!("aaa.radius.das.clients[{i}]");
                let secret = read_secret(&at, &c.secret_file, &c.secret_env, problems);
                match c.address.parse::<IpAddr>() {
                    Ok(a) => clients.push((a, secret)),
                    Err(_) => problems.push(format!(
                        "{at}.address: {:?} is not an IP address",
                        c.address
                    )),
                }
            }
            Some(DasConfig {
                listen: listen?,
                clients,
            })
        });
        if problems.len() > before {
            return None;
        }
        Some(RadiusConfig {
            servers,
            timeout: Duration::from_millis(r.timeout_ms),
            retries: r.retries,
            nas_identifier: r.nas_identifier.clone(),
            nas_ip: r.nas_ip_address,
            user_name: r.user_name,
            mac_format: r.mac_format,
            password: r.password.clone(),
            auth_method: r.auth_method,
            plan_attribute,
            accounting,
            interim_secs,
            counters_read_secs,
            das,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Option<RadiusConfig>, Vec<String>> {
        let f: AaaFile = serde_yaml_ng::from_str(yaml).map_err(|e| vec![e.to_string()])?;
        let mut problems = Vec::new();
        let c = f.validate(&mut problems);
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems)
        }
    }

    /// A new file per call. Named by the secret's length, the file of "testing123\n" and
    /// "chap-secret" (11 bytes each) was one path for two tests that run in parallel: one's
    /// write (truncate, then write) left the other reading an empty or a foreign secret.
    fn secret_file(text: &str) -> SecretFile {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "kbng-radius-secret-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&p, text).unwrap();
        SecretFile(p)
    }

    /// Removed when the test ends, so that runs leave no secrets in the temp directory.
    struct SecretFile(PathBuf);

    impl SecretFile {
        fn display(&self) -> std::path::Display<'_> {
            self.0.display()
        }
    }

    impl Drop for SecretFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn good_section_with_defaults() {
        let p = secret_file("testing123\n");
        let c = parse(&format!(
            "radius:\n  servers: [{{address: '127.0.0.1:1812', secretFile: {}}}]\n  nasIdentifier: kbng-1\n  das: {{listen: '127.0.0.1:3799', clients: [{{address: 127.0.0.1, secretFile: {}}}]}}\n",
            p.display(),
            p.display()
        ))
        .unwrap()
        .unwrap();
        assert_eq!(c.servers[0].secret.0, b"testing123");
        assert_eq!(c.servers[0].acct, "127.0.0.1:1813".parse().unwrap());
        assert_eq!(c.plan_attribute, PlanAttribute::FilterId);
        assert_eq!(c.auth_method, AuthMethod::Pap);
        assert_eq!(
            (
                c.accounting,
                c.interim_secs,
                c.counters_read_secs,
                c.retries
            ),
            (true, 0, 30, 2)
        );
        assert_eq!(c.das.unwrap().clients.len(), 1);
        assert!(!format!("{:?}", c.servers[0]).contains("testing123"));
    }

    #[test]
    fn no_radius_section_is_none() {
        assert_eq!(parse("{}"), Ok(None));
    }

    #[test]
    fn every_problem_names_its_field() {
        let errs = parse(
            "radius:\n  servers:\n    - {address: 'nowhere', secretEnv: KBNG_SURELY_UNSET_VAR}\n    - {address: '127.0.0.1:1812'}\n  timeoutMs: 5000\n  nasIdentifier: ''\n  planAttribute: vendor\n  das: {listen: 'x', clients: []}\n",
        )
        .unwrap_err();
        let want = [
            "aaa.radius.servers[0].secretEnv",
            "aaa.radius.servers[0].address",
            "aaa.radius.servers[1]: a secretFile or secretEnv",
            "aaa.radius.timeoutMs: timeoutMs × (retries + 1) × servers = 30000 ms",
            "aaa.radius.nasIdentifier",
            "aaa.radius.planVendor",
            "aaa.radius.das.listen",
            "aaa.radius.das.clients",
        ];
        for w in want {
            assert!(errs.iter().any(|e| e.starts_with(w)), "{w} in {errs:#?}");
        }
        assert_eq!(errs.len(), want.len(), "{errs:#?}");
    }

    #[test]
    fn chap_is_chosen_by_name_and_a_typo_is_refused() {
        let p = secret_file("chap-secret");
        let yaml = |m: &str| {
            format!(
                "radius: {{servers: [{{address: '127.0.0.1:1812', secretFile: {}}}], nasIdentifier: x, authMethod: {m}}}",
                p.display()
            )
        };
        let c = parse(&yaml("chap")).unwrap().unwrap();
        assert_eq!(c.auth_method, AuthMethod::Chap);
        let e = parse(&yaml("chapv2")).unwrap_err();
        assert!(e[0].contains("chapv2"), "{e:?}");
    }

    #[test]
    fn servers_share_one_family_and_the_last_port_has_no_next() {
        let p = secret_file("testing123");
        let servers = |a: &str, b: &str| {
            format!(
                "radius: {{servers: [{{address: '{a}', secretFile: {s}}}, {{address: '{b}', secretFile: {s}}}], nasIdentifier: x}}",
                s = p.display()
            )
        };
        assert!(parse(&servers("127.0.0.1:1812", "127.0.0.2:1812")).is_ok());
        assert!(parse(&servers("[::1]:1812", "[::2]:1812")).is_ok());
        assert_eq!(
            parse(&servers("127.0.0.1:1812", "[::1]:1812")).unwrap_err(),
            ["aaa.radius.servers: all IPv4 or all IPv6 (one socket sends to them all)"]
        );
        assert_eq!(
            parse(&servers("127.0.0.1:65535", "127.0.0.2:1812")).unwrap_err(),
            ["aaa.radius.servers[0].accountingAddress: needed, 65535 has no next port"]
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = parse("radius: {servers: [], nasIdentifier: x, surprise: 1}").unwrap_err();
        assert!(e[0].contains("surprise"), "{e:?}");
    }

    #[test]
    fn mac_formats() {
        let m = [2, 0, 0xab, 0, 1, 1];
        assert_eq!(MacFormat::Colon.format(&m), "02:00:ab:00:01:01");
        assert_eq!(MacFormat::Hyphen.format(&m), "02-00-ab-00-01-01");
        assert_eq!(MacFormat::Bare.format(&m), "0200ab000101");
    }
}
