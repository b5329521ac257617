//! Mutual TLS on the gRPC listener, with certificates that change under a running dataplane.
//!
//! cert-manager renews a certificate into its Secret and the kubelet swaps the mounted files;
//! restarting the dataplane to pick them up would cut every subscriber it forwards for. So the
//! listener does the handshakes itself: each accepted connection takes the acceptor current at
//! that moment, and the files are read again every [`RELOAD_EVERY`]; when they changed and
//! parse, new connections get the new certificate and CA, open ones keep theirs. Files that
//! do not parse (a half-written renewal) are reported and counted at each check, and the old
//! acceptor stays.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use kbng_telemetry::metrics::GrpcTlsCounts;
use kbng_wire::x509::earliest_not_after;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How often the files are read again.
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// A handshake not done by then is dropped (a client that connects and says nothing).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The three PEM files: certificate chain, its key, and the CA of the clients let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

/// What the listener refused, and renewals it could not take, since start. A refusal is
/// either a stranger or our own control after a botched renewal; the logs say which peer,
/// these say how often, so that an alert can fire before a control restart finds itself
/// locked out. Beside them, when what is loaded expires: a renewal that never loads is
/// otherwise silent until that moment.
#[derive(Debug)]
pub struct TlsCounters {
    handshakes_failed: AtomicU64,
    handshakes_timed_out: AtomicU64,
    reloads_failed: AtomicU64,
    cert_not_after: AtomicI64,
    client_ca_not_after: AtomicI64,
}

/// In the expiry fields: not known (a certificate whose validity could not be read).
const UNKNOWN: i64 = i64::MIN;

impl Default for TlsCounters {
    fn default() -> Self {
        Self {
            handshakes_failed: AtomicU64::new(0),
            handshakes_timed_out: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            cert_not_after: AtomicI64::new(UNKNOWN),
            client_ca_not_after: AtomicI64::new(UNKNOWN),
        }
    }
}

impl TlsCounters {
    fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn read(&self) -> GrpcTlsCounts {
        let at = |a: &AtomicI64| Some(a.load(Ordering::Relaxed)).filter(|&t| t != UNKNOWN);
        GrpcTlsCounts {
            handshakes_failed: self.handshakes_failed.load(Ordering::Relaxed),
            handshakes_timed_out: self.handshakes_timed_out.load(Ordering::Relaxed),
            reloads_failed: self.reloads_failed.load(Ordering::Relaxed),
            cert_not_after: at(&self.cert_not_after),
            client_ca_not_after: at(&self.client_ca_not_after),
        }
    }

    fn set_expiry(&self, e: Expiry) {
        self.cert_not_after
            .store(e.cert.unwrap_or(UNKNOWN), Ordering::Relaxed);
        self.client_ca_not_after
            .store(e.client_ca.unwrap_or(UNKNOWN), Ordering::Relaxed);
    }
}

/// The files' bytes as last read, and the acceptor built from them.
#[derive(Clone)]
pub struct Loaded {
    bytes: [Vec<u8>; 3],
    acceptor: TlsAcceptor,
    expiry: Expiry,
}

/// The earliest notAfter (Unix seconds) of the served chain and of the client CAs; none for a
/// file with a certificate whose validity could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub cert: Option<i64>,
    pub client_ca: Option<i64>,
}

impl TlsFiles {
    fn read(&self) -> Result<[Vec<u8>; 3], String> {
        let read = |flag: &str, p: &PathBuf| {
            std::fs::read(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
        };
        Ok([
            read("--grpc-tls-cert", &self.cert)?,
            read("--grpc-tls-key", &self.key)?,
            read("--grpc-tls-client-ca", &self.client_ca)?,
        ])
    }

    /// Read and parse the files; the error names the flag whose file is at fault.
    pub fn load(&self) -> Result<Loaded, String> {
        let bytes = self.read()?;
        let (acceptor, expiry) = acceptor(&bytes)?;
        Ok(Loaded {
            bytes,
            acceptor,
            expiry,
        })
    }
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Loaded(..)")
    }
}

fn acceptor([cert, key, ca]: &[Vec<u8>; 3]) -> Result<(TlsAcceptor, Expiry), String> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--grpc-tls-cert: {e}"))?;
    if chain.is_empty() {
        return Err("--grpc-tls-cert: no certificate in the file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("--grpc-tls-key: {e}"))?;
    let cas = CertificateDer::pem_slice_iter(ca)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--grpc-tls-client-ca: {e}"))?;
    let expiry = Expiry {
        cert: earliest_not_after(chain.iter().map(|c| c.as_ref())),
        client_ca: earliest_not_after(cas.iter().map(|c| c.as_ref())),
    };
    for (flag, at) in [
        ("--grpc-tls-cert", expiry.cert),
        ("--grpc-tls-client-ca", expiry.client_ca),
    ] {
        if at.is_none() {
            tracing::warn!("{flag}: a certificate's validity could not be read; no expiry metric");
        }
    }
    let mut roots = RootCertStore::empty();
    for c in cas {
        roots
            .add(c)
            .map_err(|e| format!("--grpc-tls-client-ca: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("--grpc-tls-client-ca: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("--grpc-tls-cert, --grpc-tls-key: {e}"))?;
    // gRPC is HTTP/2; clients insist on negotiating it.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), expiry))
}

/// Accept on `listener` for as long as the receiver is held: every connection that completes
/// its handshake goes out on the returned channel (for `serve_with_incoming_shutdown`);
/// refusals and failed reloads are counted in `counters`.
pub fn incoming(
    listener: TcpListener,
    files: TlsFiles,
    first: Loaded,
    counters: Arc<TlsCounters>,
) -> mpsc::Receiver<std::io::Result<TlsStream<TcpStream>>> {
    let (tx, rx) = mpsc::channel(64);
    counters.set_expiry(first.expiry);
    tokio::spawn(async move {
        let mut current = first;
        let mut last_error: Option<String> = None;
        // On a timer, not on connections: a renewal that does not load must be counted while
        // no one connects, since the next one to connect may be a restarted control.
        let mut check = tokio::time::interval_at(Instant::now() + RELOAD_EVERY, RELOAD_EVERY);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let tcp = tokio::select! {
                r = listener.accept() => r,
                _ = check.tick() => {
                    match reload(&files, &mut current) {
                        Ok(()) => {
                            counters.set_expiry(current.expiry);
                            last_error = None
                        }
                        Err(e) => {
                            TlsCounters::inc(&counters.reloads_failed);
                            if last_error.as_ref() != Some(&e) {
                                tracing::warn!("{e}; keeping the old certificate and CA");
                                last_error = Some(e);
                            }
                        }
                    }
                    continue;
                }
                () = tx.closed() => return,
            };
            let (tcp, peer) = match tcp {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("gRPC accept: {e}");
                    continue;
                }
            };
            let (acceptor, tx) = (current.acceptor.clone(), tx.clone());
            let counters = Arc::clone(&counters);
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(s)).await;
                    }
                    Ok(Err(e)) => {
                        TlsCounters::inc(&counters.handshakes_failed);
                        tracing::warn!(%peer, "gRPC TLS handshake refused: {e}")
                    }
                    Err(_) => {
                        TlsCounters::inc(&counters.handshakes_timed_out);
                        tracing::warn!(%peer, "gRPC TLS handshake timed out")
                    }
                }
            });
        }
    });
    rx
}

/// Swap in the files' new contents when they changed and parse; an error when they changed
/// but cannot be taken (the old ones stay).
fn reload(files: &TlsFiles, current: &mut Loaded) -> Result<(), String> {
    let bytes = files
        .read()
        .map_err(|e| format!("gRPC TLS files unreadable ({e})"))?;
    if bytes == current.bytes {
        return Ok(());
    }
    let (acceptor, expiry) =
        acceptor(&bytes).map_err(|e| format!("gRPC TLS files changed but do not load ({e})"))?;
    *current = Loaded {
        bytes,
        acceptor,
        expiry,
    };
    tracing::info!("gRPC TLS certificate and CA reloaded");
    Ok(())
}
