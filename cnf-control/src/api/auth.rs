//! A bearer token on the admin API. The API lists, drains and re-plans sessions; a
//! NetworkPolicy keeps most pods away from it, the token keeps out the ones it admits by
//! mistake. The readiness probe's path stays open (the kubelet cannot hold a secret).

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::{ApiError, ApiState, err};

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
        if !given.is_some_and(|g| same(g, token.as_bytes())) {
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
        assert_eq!(cfg.api_token.as_deref(), Some("s3cret"));
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
