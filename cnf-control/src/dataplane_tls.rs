//! Mutual TLS to the dataplanes: the control proves itself with a client certificate and
//! checks each dataplane's against a CA. A dataplane installs whatever sessions its client
//! sends, so on a shared network both ends must know who they talk to. The files are read at
//! every connection, so a renewed certificate is used from the next one without a restart.
//! When their certificates expire is exported ([`export_expiry`]): a renewal that never
//! reaches the mounted files shows there weeks before the control is locked out.

use std::path::PathBuf;
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use serde::Deserialize;
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
}

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
        Ok(ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .identity(Identity::from_pem(cert, key)))
    }

    /// Checked at start (and by `--check-config`): the files read and parsed, so a bad one
    /// stops the control, named, rather than failing every connection.
    pub fn validate(&self, problems: &mut Vec<String>) -> bool {
        let parsed = self.client_config().and_then(|tls| {
            Endpoint::from_static("https://dataplane.invalid")
                .tls_config(tls)
                .map_err(|e| format!("dataplaneTls: {}", crate::dataplane::error_chain(&e)))
        });
        parsed.map_err(|e| problems.push(e)).is_ok()
    }
}

/// How often [`export_expiry`] reads the files again (the kubelet refreshes a mounted Secret
/// about once a minute).
pub const EXPIRY_CHECK_EVERY: Duration = Duration::from_secs(30);

/// The earliest notAfter (Unix seconds) of the certificates in a PEM file; none when the file
/// holds no certificate or one whose validity cannot be read.
pub fn earliest_not_after(pem: &[u8]) -> Option<i64> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    kbng_wire::x509::earliest_not_after(certs.iter().map(|c| c.as_ref()))
}

/// Exports when `files`' client chain and CAs expire, read now and every
/// [`EXPIRY_CHECK_EVERY`]; a file that cannot be read or parsed keeps its last value and is
/// logged once (connections report their own errors).
pub async fn export_expiry(files: DataplaneTlsFile) {
    let mut tick = tokio::time::interval(EXPIRY_CHECK_EVERY);
    let mut unreadable: Vec<&'static str> = Vec::new();
    loop {
        tick.tick().await;
        for (file, path) in [("cert", &files.cert_file), ("ca", &files.ca_file)] {
            let at = tokio::fs::read(path)
                .await
                .ok()
                .and_then(|pem| earliest_not_after(&pem));
            match at {
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
