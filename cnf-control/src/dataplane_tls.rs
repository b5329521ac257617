//! Mutual TLS to the dataplanes: the control proves itself with a client certificate and
//! checks each dataplane's against a CA. A dataplane installs whatever sessions its client
//! sends, so on a shared network both ends must know who they talk to. The files are read at
//! every connection, and [`watch_files`] reopens every connection when they change: a
//! dataplane checks a client's certificate only at the handshake, so a connection kept open
//! would outlive the renewal, the old CA's removal and even the old certificate's expiry.
//! When the certificates expire is exported too: a renewal that never reaches the mounted
//! files shows there weeks before the control is locked out.

use std::path::PathBuf;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use serde::Deserialize;
use tokio::sync::watch;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// `dataplaneTls` in the configuration file: PEM files.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneTlsFile {
    /// The CA that signed the dataplanes' certificates.
    pub ca_file: PathBuf,
    /// The control's own certificate chain, presented to every dataplane.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// How often the files are read again (the kubelet refreshes a mounted Secret about once
    /// a minute).
    #[serde(default = "default_recheck_secs")]
    pub recheck_secs: u32,
}

fn default_recheck_secs() -> u32 {
    30
}

/// The longest `recheckSecs`: a renewal must reach the connections well within a certificate's
/// last days.
const MAX_RECHECK_SECS: u32 = 3600;

impl DataplaneTlsFile {
    /// The client TLS settings from the files as they are now; the error names the field
    /// whose file could not be read. The PEM is parsed where it is used (`Endpoint::
    /// tls_config`), at each connection, and once by [`Self::validate`] at start.
    pub fn client_config(&self) -> Result<ClientTlsConfig, String> {
        let read = |field: &str, p: &PathBuf| {
            std::fs::read(p).map_err(|e| format!("dataplaneTls.{field}: {}: {e}", p.display()))
        };
        let ca = read("caFile", &self.ca_file)?;
        let cert = read("certFile", &self.cert_file)?;
        let key = read("keyFile", &self.key_file)?;
        Ok(client_config(ca, cert, key))
    }

    /// Checked at start (and by `--check-config`): the files read and parsed, so a bad one
    /// stops the control, named, rather than failing every connection.
    pub fn validate(&self, problems: &mut Vec<String>) -> bool {
        if !(1..=MAX_RECHECK_SECS).contains(&self.recheck_secs) {
            problems.push(format!(
                "dataplaneTls.recheckSecs: {} not in 1..={MAX_RECHECK_SECS}",
                self.recheck_secs
            ));
            return false;
        }
        self.client_config()
            .and_then(parse)
            .map_err(|e| problems.push(e))
            .is_ok()
    }
}

fn client_config(ca: Vec<u8>, cert: Vec<u8>, key: Vec<u8>) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .identity(Identity::from_pem(cert, key))
}

/// Whether the settings parse, as a connection would parse them.
fn parse(tls: ClientTlsConfig) -> Result<(), String> {
    Endpoint::from_static("https://dataplane.invalid")
        .tls_config(tls)
        .map(drop)
        .map_err(|e| format!("dataplaneTls: {}", crate::dataplane::error_chain(&e)))
}

/// The earliest notAfter (Unix seconds) of the certificates in a PEM file; none when the file
/// holds no certificate or one whose validity cannot be read.
pub fn earliest_not_after(pem: &[u8]) -> Option<i64> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    kbng_wire::x509::earliest_not_after(certs.iter().map(|c| c.as_ref()))
}

/// One reading of the three files: each one's contents, none where it could not be read.
struct Reading {
    ca: Option<Vec<u8>>,
    cert: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
}

impl Reading {
    fn take(files: &DataplaneTlsFile) -> Reading {
        let read = |p: &PathBuf| std::fs::read(p).ok();
        Reading {
            ca: read(&files.ca_file),
            cert: read(&files.cert_file),
            key: read(&files.key_file),
        }
    }

    /// What the files hold, for telling a renewal: a hash of the contents, or none while one
    /// cannot be read or they do not parse (a renewal half-written, or broken). Hashed and
    /// parsed from the same bytes, so a file rewritten meanwhile cannot pass for parsed.
    fn fingerprint(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let (ca, cert, key) = (self.ca.as_ref()?, self.cert.as_ref()?, self.key.as_ref()?);
        parse(client_config(ca.clone(), cert.clone(), key.clone())).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (ca, cert, key).hash(&mut h);
        Some(h.finish())
    }
}

/// The files' [`Reading::fingerprint`] now.
pub fn fingerprint(files: &DataplaneTlsFile) -> Option<u64> {
    Reading::take(files).fingerprint()
}

/// Reads `files` every `recheckSecs`: exports when the client chain and the CAs expire, and
/// when the files change to ones that parse, sends their [`fingerprint`] on `renewed` (the
/// dataplane connections reopen with them). A file that cannot be read or parsed keeps its
/// last expiry and is logged once (connections report their own errors); `renewed` starts at
/// the files' fingerprint when the control started.
pub async fn watch_files(files: DataplaneTlsFile, renewed: watch::Sender<Option<u64>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(u64::from(files.recheck_secs.max(1))));
    let mut unreadable: Vec<&'static str> = Vec::new();
    loop {
        tick.tick().await;
        let f = files.clone();
        let Ok(reading) = tokio::task::spawn_blocking(move || Reading::take(&f)).await else {
            continue;
        };
        for (file, path, pem) in [
            ("cert", &files.cert_file, &reading.cert),
            ("ca", &files.ca_file, &reading.ca),
        ] {
            match pem.as_deref().and_then(earliest_not_after) {
                Some(at) => {
                    unreadable.retain(|f| *f != file);
                    crate::health_metrics::dataplane_tls_expiry(file, at);
                }
                None if !unreadable.contains(&file) => {
                    unreadable.push(file);
                    tracing::warn!(
                        path = %path.display(),
                        "dataplaneTls: no certificate expiry could be read; its metric keeps \
                         the last value"
                    );
                }
                None => {}
            }
        }
        let now = reading.fingerprint();
        if now.is_some() {
            renewed.send_if_modified(|seen| {
                let changed = *seen != now;
                if changed {
                    tracing::info!("dataplaneTls: the files changed; reconnecting every dataplane");
                    *seen = now;
                }
                changed
            });
        }
    }
}

/// What the dataplane addresses must look like: `https://` with TLS, else `http://` or
/// `unix:` (a socket in a shared volume, guarded by file permissions).
pub fn check_addresses(addresses: &[String], tls: bool, problems: &mut Vec<String>) {
    for (i, d) in addresses.iter().enumerate() {
        let ok = if tls {
            d.starts_with("https://")
        } else {
            d.starts_with("unix:") || d.starts_with("http://")
        };
        if !ok {
            problems.push(if tls {
                format!("dataplanes[{i}]: {d:?} is not https://host:port (dataplaneTls is set)")
            } else {
                format!("dataplanes[{i}]: {d:?} is neither unix:/path nor http://host:port")
            });
        }
    }
}

/// How the control reaches one dataplane.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: String,
    pub tls: Option<DataplaneTlsFile>,
}

impl Target {
    pub fn all(addresses: &[String], tls: Option<&DataplaneTlsFile>) -> Vec<Target> {
        addresses
            .iter()
            .map(|a| Target {
                addr: a.clone(),
                tls: tls.cloned(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_match_the_transport() {
        let check = |a: &[&str], tls| {
            let mut p = Vec::new();
            check_addresses(
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                tls,
                &mut p,
            );
            p
        };
        assert!(check(&["unix:/run/dp.sock", "http://dp:50051"], false).is_empty());
        assert!(check(&["https://dp:50051"], true).is_empty());
        assert_eq!(
            check(&["http://dp:50051"], true),
            ["dataplanes[0]: \"http://dp:50051\" is not https://host:port (dataplaneTls is set)"]
        );
        assert_eq!(
            check(&["https://dp:50051"], false),
            ["dataplanes[0]: \"https://dp:50051\" is neither unix:/path nor http://host:port"]
        );
    }

    #[test]
    fn unreadable_and_malformed_files_are_named() {
        let dir = std::env::temp_dir().join(format!("kbng-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let file = |ca: &PathBuf| DataplaneTlsFile {
            ca_file: ca.clone(),
            cert_file: junk.clone(),
            key_file: junk.clone(),
            recheck_secs: 30,
        };
        let mut p = Vec::new();
        assert!(!file(&dir.join("absent.pem")).validate(&mut p));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("dataplaneTls.caFile: ") && p[0].contains("absent.pem"),
            "{p:?}"
        );
        let mut p = Vec::new();
        assert!(!file(&junk).validate(&mut p));
        assert_eq!(p.len(), 1);
        assert!(p[0].starts_with("dataplaneTls: "), "{p:?}");
        // Files that do not parse are no renewal: nothing to reconnect with.
        assert_eq!(fingerprint(&file(&junk)), None);
        assert_eq!(fingerprint(&file(&dir.join("absent.pem"))), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_recheck_interval_is_bounded_and_named() {
        let f = |secs| DataplaneTlsFile {
            ca_file: "/absent/ca.pem".into(),
            cert_file: "/absent/cert.pem".into(),
            key_file: "/absent/key.pem".into(),
            recheck_secs: secs,
        };
        for secs in [0, 3601] {
            let mut p = Vec::new();
            assert!(!f(secs).validate(&mut p));
            assert_eq!(
                p,
                [format!("dataplaneTls.recheckSecs: {secs} not in 1..=3600")]
            );
        }
        let mut p = Vec::new();
        assert!(!f(3600).validate(&mut p));
        assert!(p[0].starts_with("dataplaneTls.caFile: "), "{p:?}");
        let yaml = "{caFile: /a, certFile: /b, keyFile: /c}";
        let parsed: DataplaneTlsFile = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(parsed.recheck_secs, 30, "the default");
    }
}
