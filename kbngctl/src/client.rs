//! A small HTTP/1.1 client for kbng-control's operator API (`cnf-control/API.md`), on the hyper
//! already in the tree: one connection per request, JSON in and out, and a streaming body for
//! the watch. Plain HTTP only: the API listens on loopback or the pod network, where the
//! cluster's network policy, not TLS, is the boundary; a control started with `apiTokenFile`
//! (as the operator starts it) also wants its bearer token (`--token-file`).
//!
//! Every error names the URL, and for an answer the HTTP status and the server's own message.

use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// The lab's API address (`lab/run`), and what `kbng-control` listens on by default there.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7180";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where kbng-control's API is.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// kbng-control's API: `http://host:port` or `host:port`.
    #[arg(long, env = "KBNG_SERVER", default_value = DEFAULT_SERVER, global = true)]
    pub server: String,
    /// A file holding the API's bearer token (in a cluster, the `token` of the BNG's
    /// `<bng>-control-api` Secret).
    #[arg(long, env = "KBNG_TOKEN_FILE", global = true)]
    pub token_file: Option<std::path::PathBuf>,
}

/// Table for people, JSON for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Debug, Clone)]
pub struct Client {
    /// `http://host:port`, no trailing slash.
    base: String,
    /// `host:port` to dial.
    authority: String,
    /// Sent as `Authorization: Bearer`, when given.
    token: Option<String>,
}

impl Client {
    pub fn new(args: &ServerArgs) -> anyhow::Result<Client> {
        let s = args.server.trim().trim_end_matches('/');
        if s.starts_with("https://") {
            bail!("--server {s}: only http:// is supported (the API is plain HTTP)");
        }
        let authority = s.strip_prefix("http://").unwrap_or(s);
        if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
            bail!(
                "--server {:?}: want http://host:port or host:port",
                args.server
            );
        }
        let token = match &args.token_file {
            Some(p) => {
                let t = std::fs::read_to_string(p)
                    .with_context(|| format!("--token-file {}", p.display()))?;
                let t = t.trim_end_matches(['\n', '\r']).to_string();
                if t.is_empty() {
                    bail!("--token-file {}: the file is empty", p.display());
                }
                Some(t)
            }
            None => None,
        };
        Ok(Client {
            base: format!("http://{authority}"),
            authority: authority.to_string(),
            token,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends one request and returns the response with its body still streaming.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> anyhow::Result<hyper::Response<Incoming>> {
        let url = self.url(path);
        let stream = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(&self.authority),
        )
        .await
        .map_err(|_| anyhow!("{method} {url}: no connection within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| {
            anyhow!(
                "{method} {url}: cannot reach kbng-control ({e}); is it running? \
                 (--server or KBNG_SERVER)"
            )
        })?;
        let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("{method} {url}: HTTP handshake"))?;
        tokio::spawn(async move {
            // The connection ends with the request; its error, if any, shows in the response.
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(hyper::header::HOST, &self.authority);
        if let Some(t) = &self.token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let payload = match body {
            Some((content_type, bytes)) => {
                req = req.header(hyper::header::CONTENT_TYPE, content_type);
                Bytes::from(bytes)
            }
            None => Bytes::new(),
        };
        let req = req
            .body(Full::new(payload))
            .with_context(|| format!("{method} {url}: building the request"))?;
        tx.send_request(req)
            .await
            .with_context(|| format!("{method} {url}: no answer"))
    }

    /// One request whose answer must be 2xx JSON.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> anyhow::Result<Value> {
        let url = self.url(path);
        let what = format!("{method} {url}");
        let fut = async {
            let resp = self.send(method, path, body).await?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .with_context(|| format!("{what}: reading the answer"))?
                .to_bytes();
            if !status.is_success() {
                bail!("{what}: {status}: {}", server_message(&bytes));
            }
            serde_json::from_slice(&bytes).with_context(|| format!("{what}: answer is not JSON"))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, fut)
            .await
            .map_err(|_| anyhow!("{what}: no answer within {REQUEST_TIMEOUT:?}"))?
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// A streaming GET (the watch): the body, once the status said 200.
    pub async fn stream(&self, path: &str) -> anyhow::Result<Incoming> {
        let url = self.url(path);
        let resp = self.send(Method::GET, path, None).await?;
        let status = resp.status();
        if status != StatusCode::OK {
            let bytes = resp.into_body().collect().await?.to_bytes();
            bail!("GET {url}: {status}: {}", server_message(&bytes));
        }
        Ok(resp.into_body())
    }
}

/// The server's `{"error": ...}` or `{"errors": [...]}`, else the raw text.
fn server_message(bytes: &[u8]) -> String {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v.get("error").is_some() => v["error"].as_str().unwrap_or_default().to_string(),
        Ok(v) if v.get("errors").is_some() => v["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default(),
        _ => String::from_utf8_lossy(bytes).trim().to_string(),
    }
}

/// Runs `fut` on a small runtime (kbngctl is synchronous outside its API calls).
pub fn block_on<T>(fut: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(fut)
}

/// Percent-encodes a query value (MACs, states, IPs need no more than this).
pub fn query_value(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `123_456_789` bps as `123.5 Mb/s`.
pub fn rate(bps: f64) -> String {
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "Gb/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mb/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kb/s")
    } else {
        (bps, "b/s")
    };
    format!("{v:.1} {u}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> ServerArgs {
        ServerArgs {
            server: s.into(),
            token_file: None,
        }
    }

    #[test]
    fn server_forms() {
        assert_eq!(
            Client::new(&args("127.0.0.1:7180")).unwrap().url("/v1/x"),
            "http://127.0.0.1:7180/v1/x"
        );
        assert_eq!(
            Client::new(&args("http://[::1]:80/")).unwrap().url("/a"),
            "http://[::1]:80/a"
        );
        for bad in ["https://x:1", "nohost", "http://x:1/path", ""] {
            assert!(Client::new(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn messages_and_units() {
        assert_eq!(
            server_message(br#"{"error":"no session 7"}"#),
            "no session 7"
        );
        assert_eq!(
            server_message(br#"{"errors":["row 2: bad MAC","row 3: x"]}"#),
            "row 2: bad MAC; row 3: x"
        );
        assert_eq!(server_message(b"plain"), "plain");
        assert_eq!(
            query_value("02:00:00:00:01:01"),
            "02%3A00%3A00%3A00%3A01%3A01"
        );
        assert_eq!(rate(20_000_000.0), "20.0 Mb/s");
        assert_eq!(rate(999.0), "999.0 b/s");
    }
}
