//! The operator's side of the control pod's HTTP API (`cnf-control/API.md`): `GET /v1/status`
//! for session counts and the dataplanes' identities, `POST /v1/sessions/drain` on deletion.
//!
//! Every call is bounded by a timeout; a control that cannot be reached is an error value the
//! reconciler turns into a condition, never a panic or a tight retry. [`parse_status`] is pure
//! and takes what is there: a field the control does not report yet is simply absent.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kbng_crds::bng::PoolUsage;
use serde_json::Value;

/// How long one request to a control pod may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest response read (a status of many dataplanes is a few kB).
const MAX_BODY: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ControlApiError {
    #[error("{0} is not an http://host:port URL")]
    BadUrl(String),
    #[error("{url}: no answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: {why}")]
    Io { url: String, why: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: response is not JSON: {why}")]
    Json { url: String, why: String },
}

/// `GET` or `POST` (empty body) `base` + `path`, with the control's bearer `token` when it
/// has one; the JSON body of a 2xx answer.
pub async fn call(
    method: hyper::Method,
    base: &str,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<Value, ControlApiError> {
    let url = format!("{}{path}", base.trim_end_matches('/'));
    match tokio::time::timeout(timeout, call_inner(method, base, path, token, &url)).await {
        Ok(r) => r,
        Err(_) => Err(ControlApiError::Timeout { url, timeout }),
    }
}

async fn call_inner(
    method: hyper::Method,
    base: &str,
    path: &str,
    token: Option<&str>,
    url: &str,
) -> Result<Value, ControlApiError> {
    let authority = base
        .strip_prefix("http://")
        .map(|a| a.trim_end_matches('/'))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .ok_or_else(|| ControlApiError::BadUrl(base.to_string()))?;
    let io = |why: String| ControlApiError::Io {
        url: url.to_string(),
        why,
    };
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| io(format!("connect: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| io(format!("handshake: {e}")))?;
    // The connection task ends with the request; its error, if any, shows in the response.
    let driver = tokio::spawn(conn);
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::ACCEPT, "application/json");
    if let Some(t) = token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| io(format!("request: {e}")))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| io(format!("request: {e}")))?;
    let status = response.status().as_u16();
    let body = http_body_util::Limited::new(response.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| io(format!("reading the body: {e}")))?
        .to_bytes();
    driver.abort();
    if !(200..300).contains(&status) {
        return Err(ControlApiError::Status {
            url: url.to_string(),
            status,
            body: String::from_utf8_lossy(&body).chars().take(300).collect(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| ControlApiError::Json {
        url: url.to_string(),
        why: e.to_string(),
    })
}

/// Session counts as the control reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionTally {
    pub active: u64,
    pub captive: u64,
    pub total: u64,
}

/// One dataplane as the control sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportedDataplane {
    /// The address the control dials.
    pub address: String,
    /// The dataplane's `--dataplane-id` (the operator sets it to the pod name).
    pub id: Option<String>,
    pub connected: bool,
    pub numa_node: Option<i32>,
    /// Main core first, then the workers.
    pub cores: Vec<u32>,
    /// PCI addresses of its ports; a port on a virtual device shows as `vdev:<name>`.
    pub devices: Vec<String>,
    /// Every port reported link up (`None`: no port reported).
    pub links_up: Option<bool>,
    pub error: Option<String>,
}

/// What `GET /v1/status` told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlReport {
    pub sessions: Option<SessionTally>,
    /// Active sessions by plan name.
    pub by_plan: BTreeMap<String, u64>,
    pub dataplanes: Vec<ReportedDataplane>,
    pub pools: Vec<PoolUsage>,
    /// `None` from a control older than the report.
    pub subscribers: Option<SubscribersReport>,
}

/// The control's local subscriber store, as `/v1/status` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscribersReport {
    /// Records in force.
    pub records: u64,
    /// `None`: the control reads no subscribers file. Else `Some(None)` while the file's
    /// content is in force, `Some(Some(why))` while it is rejected or held.
    pub file: Option<Option<String>>,
    /// While the file's content is held for the records it would remove: how many.
    pub held_removes: Option<u64>,
}

fn u(v: &Value) -> Option<u64> {
    v.as_u64()
}

fn is_pci(s: &str) -> bool {
    // dddd:bb:dd.f
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

fn dataplane(v: &Value) -> ReportedDataplane {
    let id = &v["identity"];
    let mut cores: Vec<u32> = id["mainCore"]
        .as_u64()
        .and_then(|c| u32::try_from(c).ok())
        .into_iter()
        .collect();
    if let Some(ws) = id["workerCores"].as_array() {
        cores.extend(
            ws.iter()
                .filter_map(|c| c.as_u64().and_then(|c| u32::try_from(c).ok())),
        );
    }
    let ports = id["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let devices = ports
        .iter()
        .filter_map(|p| {
            let bus = p["busAddress"].as_str().unwrap_or("");
            let name = p["deviceName"].as_str().unwrap_or("");
            if is_pci(bus) {
                Some(bus.to_string())
            } else if is_pci(name) {
                Some(name.to_string())
            } else if !name.is_empty() {
                Some(format!("vdev:{name}"))
            } else {
                None
            }
        })
        .collect();
    ReportedDataplane {
        address: v["address"].as_str().unwrap_or_default().to_string(),
        id: id["dataplaneId"]
            .as_str()
            .or_else(|| v["dataplaneId"].as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        connected: v["connected"].as_bool().unwrap_or(false),
        numa_node: id["numaNode"]
            .as_i64()
            .filter(|n| *n >= 0)
            .and_then(|n| i32::try_from(n).ok()),
        cores,
        devices,
        links_up: (!ports.is_empty())
            .then(|| ports.iter().all(|p| p["linkUp"].as_bool() == Some(true))),
        error: v["error"].as_str().map(str::to_string),
    }
}

/// Reads a `/v1/status` body. Copes with the earlier shape too (`sessions` a number with
/// `admittedActive`/`waitingCaptive` beside it).
pub fn parse_status(v: &Value) -> ControlReport {
    let s = &v["sessions"];
    let sessions = if s.is_object() {
        match (u(&s["active"]), u(&s["captive"]), u(&s["total"])) {
            (Some(active), Some(captive), Some(total)) => Some(SessionTally {
                active,
                captive,
                total,
            }),
            _ => None,
        }
    } else {
        match (u(s), u(&v["admittedActive"]), u(&v["waitingCaptive"])) {
            (Some(total), Some(active), Some(captive)) => Some(SessionTally {
                active,
                captive,
                total,
            }),
            _ => None,
        }
    };
    let by_plan = v["sessionsByPlan"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, n)| n.as_u64().map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    let dataplanes = v["dataplanes"]
        .as_array()
        .map(|a| a.iter().map(dataplane).collect())
        .unwrap_or_default();
    let pools = v["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(PoolUsage {
                name: p["name"].as_str()?.to_owned(),
                leasable: u32::try_from(u(&p["leasable"])?).ok()?,
                in_use: u32::try_from(u(&p["inUse"])?).ok()?,
                // An older control does not report it.
                fixed: u(&p["fixed"])
                    .and_then(|f| u32::try_from(f).ok())
                    .unwrap_or(0),
            })
        })
        .collect();
    let subs = &v["subscribers"];
    let subscribers = u(&subs["records"]).map(|records| SubscribersReport {
        records,
        file: subs["file"]
            .is_object()
            .then(|| subs["file"]["rejected"].as_str().map(str::to_string)),
        held_removes: u(&subs["file"]["held"]["removes"]),
    });
    ControlReport {
        sessions,
        by_plan,
        dataplanes,
        pools,
        subscribers,
    }
}

/// Where the operator reaches the control pod of a BNG: `--control-url-override` entries
/// (`<namespace>/<bng>=<url>` or `<bng>=<url>`), else the StatefulSet pod's DNS name behind
/// its headless Service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlUrls {
    overrides: BTreeMap<String, String>,
}

impl ControlUrls {
    /// Parses the override flags, naming the bad one.
    pub fn new(overrides: &[String]) -> Result<ControlUrls, String> {
        let mut out = BTreeMap::new();
        for o in overrides {
            let (key, url) = o
                .split_once('=')
                .filter(|(k, u)| !k.is_empty() && u.starts_with("http://"))
                .ok_or_else(|| {
                    format!(
                        "--control-url-override {o:?}: expected [<namespace>/]<bng>=http://host:port"
                    )
                })?;
            out.insert(key.to_string(), url.trim_end_matches('/').to_string());
        }
        Ok(ControlUrls { overrides: out })
    }

    pub fn url(&self, namespace: &str, bng: &str) -> String {
        let control = crate::build::control_name(bng);
        self.overrides
            .get(&format!("{namespace}/{bng}"))
            .or_else(|| self.overrides.get(bng))
            .cloned()
            .unwrap_or_else(|| {
                format!(
                    "http://{control}-0.{control}.{namespace}.svc:{}",
                    crate::binaries::control::ADMIN_PORT
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn full_status_with_identities() {
        let v = json!({
            "sessions": {"total": 5, "active": 3, "captive": 2},
            "sessionsByPlan": {"basic-50m": 2, "premium-1g": 1},
            "pools": [{"name": "p0", "leasable": 65530, "inUse": 5, "fixed": 2},
                {"name": "older-control", "leasable": 10, "inUse": 1}, {"name": "broken"}],
            "dataplanes": [{
                "index": 0, "address": "http://127.0.0.1:1", "connected": true,
                "identity": {"dataplaneId": "lab-dataplane-0", "numaNode": 1, "mainCore": 4,
                    "workerCores": [5, 6],
                    "ports": [
                        {"deviceName": "0000:3b:02.1", "busAddress": "0000:3b:02.1", "linkUp": true},
                        {"deviceName": "net_null1", "busAddress": "vdev", "linkUp": false}]},
                "error": null
            }, {"index": 1, "address": "http://x:2", "connected": false, "identity": null,
                "error": "connect refused"}]
        });
        let r = parse_status(&v);
        assert_eq!(
            r.sessions,
            Some(SessionTally {
                active: 3,
                captive: 2,
                total: 5
            })
        );
        assert_eq!(r.by_plan["premium-1g"], 1);
        assert_eq!(
            r.pools,
            vec![
                PoolUsage {
                    name: "p0".into(),
                    leasable: 65_530,
                    in_use: 5,
                    fixed: 2,
                },
                PoolUsage {
                    name: "older-control".into(),
                    leasable: 10,
                    in_use: 1,
                    fixed: 0,
                }
            ]
        );
        assert_eq!(r.subscribers, None, "an older control");
        let d = &r.dataplanes[0];
        assert_eq!(d.id.as_deref(), Some("lab-dataplane-0"));
        assert_eq!(d.numa_node, Some(1));
        assert_eq!(d.cores, vec![4, 5, 6]);
        assert_eq!(d.devices, vec!["0000:3b:02.1", "vdev:net_null1"]);
        assert_eq!(d.links_up, Some(false));
        let d = &r.dataplanes[1];
        assert!(!d.connected && d.id.is_none() && d.cores.is_empty() && d.links_up.is_none());
        assert_eq!(d.error.as_deref(), Some("connect refused"));
    }

    #[test]
    fn the_subscriber_store_and_its_file() {
        let report = |subs: Value| parse_status(&json!({ "subscribers": subs })).subscribers;
        assert_eq!(
            report(json!({"records": 3})),
            Some(SubscribersReport {
                records: 3,
                file: None,
                held_removes: None
            })
        );
        assert_eq!(
            report(json!({"records": 3, "file": {"path": "/etc/kbng-subscribers/s.csv"}})),
            Some(SubscribersReport {
                records: 3,
                file: Some(None),
                held_removes: None
            })
        );
        let rejected = json!({"records": 3, "file": {"path": "p", "rejected": "row 2: bad MAC"}});
        assert_eq!(
            report(rejected).and_then(|r| r.file),
            Some(Some("row 2: bad MAC".into()))
        );
        let held = json!({"records": 40, "file": {"path": "p", "rejected": "held: removes 35",
            "held": {"records": 5, "removes": 35}}});
        assert_eq!(report(held).and_then(|r| r.held_removes), Some(35));
    }

    #[test]
    fn earlier_shape_and_missing_fields() {
        let r = parse_status(&json!({"sessions": 4, "admittedActive": 3, "waitingCaptive": 1}));
        assert_eq!(
            r.sessions,
            Some(SessionTally {
                active: 3,
                captive: 1,
                total: 4
            })
        );
        assert_eq!(parse_status(&json!({})), ControlReport::default());
        assert_eq!(
            parse_status(&json!({"sessions": {"active": 1}})).sessions,
            None
        );
    }

    #[test]
    fn urls_and_overrides() {
        let u = ControlUrls::new(&["kbng/lab=http://127.0.0.1:9000/".into()]).unwrap();
        assert_eq!(u.url("kbng", "lab"), "http://127.0.0.1:9000");
        assert_eq!(
            u.url("kbng", "other"),
            "http://other-control-0.other-control.kbng.svc:8080"
        );
        let e = ControlUrls::new(&["lab:http://x".into()]).unwrap_err();
        assert!(e.contains("--control-url-override") && e.contains("lab:http://x"));
    }

    #[tokio::test]
    async fn get_and_post_against_an_http_server() {
        use axum::routing::{get, post};
        let app = axum::Router::new()
            .route(
                "/v1/status",
                get(|h: axum::http::HeaderMap| async move {
                    let authorised = h.get("authorization").is_some_and(|v| v == "Bearer t0k");
                    if authorised {
                        (
                            axum::http::StatusCode::OK,
                            r#"{"sessions": {"total": 1, "active": 1, "captive": 0}}"#,
                        )
                    } else {
                        (axum::http::StatusCode::UNAUTHORIZED, "token")
                    }
                }),
            )
            .route(
                "/v1/sessions/drain",
                post(|| async { r#"{"before": 1, "remaining": 0}"# }),
            )
            .route(
                "/broken",
                get(|| async {
                    (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        "engine stopped",
                    )
                }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await });
        let v = call(
            hyper::Method::GET,
            &base,
            "/v1/status",
            Some("t0k"),
            REQUEST_TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(parse_status(&v).sessions.map(|t| t.total), Some(1));
        let e = call(
            hyper::Method::GET,
            &base,
            "/v1/status",
            None,
            REQUEST_TIMEOUT,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(e, ControlApiError::Status { status: 401, .. }),
            "{e}"
        );
        let v = call(
            hyper::Method::POST,
            &base,
            "/v1/sessions/drain",
            None,
            REQUEST_TIMEOUT,
        )
        .await
        .unwrap();
        assert_eq!(v["remaining"], 0);
        let e = call(hyper::Method::GET, &base, "/broken", None, REQUEST_TIMEOUT)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ControlApiError::Status { status: 503, body, .. } if body == "engine stopped"),
            "{e}"
        );
        // Nothing listens on a port just released.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = call(
            hyper::Method::GET,
            &format!("http://127.0.0.1:{port}"),
            "/v1/status",
            None,
            REQUEST_TIMEOUT,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, ControlApiError::Io { .. }), "{e}");
    }

    #[tokio::test]
    async fn unreachable_control_is_an_error_within_the_timeout() {
        // A listener that accepts and never answers.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let t = std::time::Instant::now();
        let e = call(
            hyper::Method::GET,
            &base,
            "/v1/status",
            None,
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, ControlApiError::Timeout { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let e = call(hyper::Method::GET, "tcp://x", "/", None, REQUEST_TIMEOUT)
            .await
            .unwrap_err();
        assert!(matches!(e, ControlApiError::BadUrl(_)), "{e}");
    }
}
