//! A bearer token on the admin API. The API lists, drains and re-plans sessions; a
//! NetworkPolicy keeps most pods away from it, the token keeps out the ones it admits by
//! mistake. The readiness probe's path stays open (the kubelet cannot hold a secret).
//!
//! The token file is read again when a request comes more than [`CHECK_EVERY`] after the last
//! read: a Secret replaced after a leak takes effect once the kubelet has updated the mounted
//! file, with no control restart (which would pause DHCP for every subscriber). A file that
//! becomes unreadable or empty keeps the token in force, and says so.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{ApiError, ApiState, err};

/// How long a token read from the file is trusted before the file is read again.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// The token of `apiTokenFile`, read again when it may have changed.
pub struct ApiToken {
    path: PathBuf,
    every: Duration,
    current: Mutex<Current>,
}

struct Current {
    token: String,
    read_at: Instant,
    /// The last failure to read the file again, logged once.
    failing: Option<String>,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ApiToken {
    /// Reads `path` now: a missing or empty file stops the control at start.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        Self::load_checking_every(path, CHECK_EVERY)
    }

    fn load_checking_every(path: &std::path::Path, every: Duration) -> Result<Self, String> {
        let token = read_token(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            every,
            current: Mutex::new(Current {
                token,
                read_at: Instant::now(),
                failing: None,
            }),
        })
    }

    /// Whether `given` is the token in force (the file read again first when due).
    pub fn admits(&self, given: &[u8]) -> bool {
        let Ok(mut c) = self.current.lock() else {
            return false;
        };
        if c.read_at.elapsed() >= self.every {
            c.read_at = Instant::now();
            match read_token(&self.path) {
                Ok(t) => {
                    if t != c.token {
                        tracing::info!("apiTokenFile changed: the new token is in force");
                        c.token = t;
                    }
                    c.failing = None;
                }
                Err(e) => {
                    if c.failing.as_ref() != Some(&e) {
                        tracing::warn!("{e}; the token read before stays in force");
                        c.failing = Some(e);
                    }
                }
            }
        }
        same(given, c.token.as_bytes())
    }
}

/// The token from `apiTokenFile`: its content without the trailing newline; empty is refused.
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    let t = std::fs::read_to_string(path)
        .map_err(|e| format!("apiTokenFile: {}: {e}", path.display()))?;
    let t = t.trim_end_matches(['\n', '\r']);
    if t.is_empty() {
        return Err(format!("apiTokenFile: {} is empty", path.display()));
    }
    Ok(t.to_string())
}

/// Equal without stopping at the first difference, so the time taken does not say how much
/// of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Middleware: with a token configured, a request must say `Authorization: Bearer <token>`.
pub async fn require_token(
    State(s): State<ApiState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(token) = &s.cfg.api_token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| token.admits(g)) {
            crate::health_metrics::api_unauthorized();
            return Err(err(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer <token>)",
            ));
        }
    }
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(!same(b"", b"a"));
    }

    /// With a token configured: no header, a wrong token and another scheme get 401; the
    /// token gets through; the readiness path needs none.
    #[tokio::test]
    async fn the_router_asks_for_the_token_except_on_the_readiness_path() {
        use tower::ServiceExt as _;
        let dir = std::env::temp_dir().join(format!("kbng-api-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "s3cret\n").unwrap();
        let yaml = format!(
            r#"
dataplanes: ["unix:/tmp/dp.sock"]
pools:
  - {{name: p, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}}
plans: [{{name: gold, id: 10, rateBps: 100000000}}]
defaultPlan: gold
store: /tmp/x.redb
apiListen: 127.0.0.1:9090
apiTokenFile: {}/token
walledGarden: {{portalUrl: "http://192.0.2.80/", allowed: []}}
"#,
            dir.display()
        );
        let file: crate::config::ConfigFile = serde_yaml_ng::from_str(&yaml).unwrap();
        let cfg = file.validate().unwrap();
        assert!(cfg.api_token.as_ref().is_some_and(|t| t.admits(b"s3cret")));
        let (engine, mut cmds) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while let Some(cmd) = cmds.recv().await {
                if let crate::service::ApiCmd::List { reply, .. } = cmd {
                    let _ = reply.send((Vec::new(), 0));
                }
            }
        });
        let state = ApiState {
            engine,
            dps: Vec::new(),
            dp_status: Vec::new(),
            dp_addrs: Vec::new(),
            watch: tokio::sync::broadcast::channel(1).0,
            cfg: std::sync::Arc::new(cfg),
        };
        let status = |path: &str, auth: Option<&str>| {
            let mut req = axum::http::Request::get(path);
            if let Some(a) = auth {
                req = req.header(header::AUTHORIZATION, a);
            }
            let app = super::super::router(state.clone());
            async move {
                app.oneshot(req.body(axum::body::Body::empty()).unwrap())
                    .await
                    .unwrap()
                    .status()
            }
        };
        let sessions = "/v1/sessions?limit=1";
        assert_eq!(status(sessions, None).await, StatusCode::UNAUTHORIZED);
        assert_eq!(
            status(sessions, Some("Bearer wrong")).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(sessions, Some("Basic s3cret")).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(sessions, Some("Bearer s3cret")).await,
            StatusCode::OK
        );
        assert_eq!(status(super::super::READY_PATH, None).await, StatusCode::OK);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A replaced file is in force at the first request after the check interval; an emptied
    /// or removed one keeps the last good token.
    #[test]
    fn a_replaced_token_file_takes_over_and_a_broken_one_does_not() {
        let dir = std::env::temp_dir().join(format!("kbng-token-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "old\n").unwrap();
        let every = Duration::from_millis(50);
        let t = ApiToken::load_checking_every(&path, every).unwrap();
        assert!(t.admits(b"old"));
        std::fs::write(&path, "new\n").unwrap();
        assert!(t.admits(b"old"), "read again before the interval");
        std::thread::sleep(every);
        assert!(t.admits(b"new"));
        assert!(!t.admits(b"old"));
        std::fs::write(&path, "").unwrap();
        std::thread::sleep(every);
        assert!(
            t.admits(b"new"),
            "an emptied file dropped the token in force"
        );
        std::fs::remove_file(&path).unwrap();
        std::thread::sleep(every);
        assert!(
            t.admits(b"new"),
            "a removed file dropped the token in force"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn token_file_is_trimmed_and_must_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("kbng-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, empty) = (dir.join("good"), dir.join("empty"));
        std::fs::write(&good, "s3cret\n").unwrap();
        std::fs::write(&empty, "\n").unwrap();
        assert_eq!(read_token(&good).unwrap(), "s3cret");
        assert!(read_token(&empty).unwrap_err().ends_with("is empty"));
        assert!(
            read_token(&dir.join("absent"))
                .unwrap_err()
                .starts_with("apiTokenFile: ")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
