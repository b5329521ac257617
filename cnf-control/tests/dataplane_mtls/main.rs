//! Mutual TLS between the real `kbng-control` and the real `kbng-dataplane` over loopback,
//! with certificates made here by `openssl`: one CA signs a certificate both ends present
//! (as a cert-manager Secret would hold it), a second CA stands for a stranger.
//!
//! It asserts: the control configured with the CA, its certificate and `https://` connects
//! and reconciles (`/v1/dataplanes` says connected); a control whose certificate the stranger
//! signed is refused by the dataplane, stays disconnected and says why in `lastError`; and the
//! control's own client code cannot reach the TLS listener in plaintext, without a client
//! certificate, or trusting only the stranger's CA. The dataplane runs on `net_null` ports.
//!
//! Needs root, `openssl` and a `kbng-dataplane` binary built from the current sources next to
//! `kbng-control`. Skipped with a message when any is missing, unless `KBNG_E2E_REQUIRED=1`.

#![allow(clippy::unwrap_used)]

// Only some of the onboarding lab's helpers are used here.
#[allow(dead_code)]
#[path = "../otel_onboarding/lab.rs"]
mod lab;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kbng_api::v1 as pb;
use kbng_control::dataplane::{Target, connect, error_chain};
use kbng_control::dataplane_tls::DataplaneTlsFile;
use lab::{Procs, free_port, has_tool, http_get, prerequisites, wait_for};

// lab.rs names these for the onboarding test's namespaces; unused here.
#[allow(dead_code)]
const CLIENT_MAC: &str = "02:00:00:00:0a:01";
#[allow(dead_code)]
const CORE_IP: &str = "192.0.2.1";

/// `openssl` with `args`, in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA `name`.crt/.key, and a leaf `name`-leaf.crt/.key it signs for localhost and
/// 127.0.0.1, usable as server and as client.
fn issue(dir: &Path, name: &str) {
    let (ca_key, ca_crt) = (format!("{name}.key"), format!("{name}.crt"));
    let (key, csr, crt) = (
        format!("{name}-leaf.key"),
        format!("{name}-leaf.csr"),
        format!("{name}-leaf.crt"),
    );
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut a = vec!["req", "-x509"];
    a.extend(ec);
    a.extend(["-keyout", &ca_key, "-out", &ca_crt, "-days", "2"]);
    let subj = format!("/CN={name} CA");
    a.extend(["-subj", &subj]);
    openssl(dir, &a);
    let mut a = vec!["req"];
    a.extend(ec);
    a.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=kbng"]);
    openssl(dir, &a);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n\
         basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
}

fn tls(dir: &Path, ca: &str, leaf: &str) -> tonic::transport::ClientTlsConfig {
    let mut problems = Vec::new();
    let file = DataplaneTlsFile {
        ca_file: dir.join(format!("{ca}.crt")),
        cert_file: dir.join(format!("{leaf}-leaf.crt")),
        key_file: dir.join(format!("{leaf}-leaf.key")),
    };
    file.validate(&mut problems)
        .unwrap_or_else(|| panic!("{problems:?}"))
}

/// Whether the control's client reaches the dataplane at `target` (an identity answered).
async fn answers(target: &Target) -> Result<(), String> {
    let mut c = connect(target).await.map_err(|e| error_chain(&e))?;
    c.get_identity(pb::GetIdentityRequest {})
        .await
        .map(|_| ())
        .map_err(|s| format!("{}: {}", s.code(), s.message()))
}

/// A control configuration dialling `url` with `tls` (ca, leaf) of `dir`.
fn control_config(dir: &Path, run: &str, url: &str, tls: (&str, &str), api: &str) -> PathBuf {
    let d = dir.display();
    let path = dir.join(format!("{run}.yaml"));
    std::fs::write(dir.join("cap"), "1000\n").unwrap();
    std::fs::write(
        &path,
        format!(
            r#"dataplanes: ["{url}"]
dataplaneTls: {{caFile: {d}/{ca}.crt, certFile: {d}/{leaf}-leaf.crt, keyFile: {d}/{leaf}-leaf.key}}
pools:
  - {{name: p0, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}}
plans: [{{name: gold, id: 10, rateBps: 100000000}}]
defaultPlan: gold
unknownSubscribers: captive
licence: {{capFile: {d}/cap}}
store: {d}/{run}.redb
apiListen: "{api}"
walledGarden: {{portalUrl: "http://portal.kbng.test/login", allowed: []}}
"#,
            ca = tls.0,
            leaf = tls.1,
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_and_dataplane_speak_mutual_tls() {
    let (ctl, dp) = match prerequisites().and_then(|b| {
        if has_tool("openssl") {
            Ok(b)
        } else {
            Err("openssl missing".to_string())
        }
    }) {
        Ok(b) => b,
        Err(why) => {
            assert!(
                std::env::var("KBNG_E2E_REQUIRED").is_err(),
                "end-to-end prerequisites missing: {why}"
            );
            eprintln!("SKIPPED control_and_dataplane_speak_mutual_tls: {why}");
            return;
        }
    };
    let tmp = TempDir(std::env::temp_dir().join(format!("kbng-mtls-{}", std::process::id())));
    let dir = tmp.0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    issue(&dir, "ours");
    issue(&dir, "stranger");
    let log = |n: &str| std::fs::File::create(dir.join(n)).unwrap();
    let grpc = free_port();
    let mut procs = Procs(Vec::new());
    let d = dir.display();
    let child = Command::new(&dp)
        .args([
            "--cores",
            "0,1",
            "--access",
            "net_null0",
            "--uplink",
            "net_null1",
        ])
        .args(["--no-huge", "--no-pci", "-m", "256", "--no-shconf"])
        .args(["--next-hop-mac", "02:00:00:00:00:fe"])
        .args([
            "--sessions",
            "1024",
            "--plans",
            "16",
            "--idle-sleep-us",
            "1000",
        ])
        .args(["--grpc-listen", &grpc.to_string()])
        .args(["--grpc-tls-cert", &format!("{d}/ours-leaf.crt")])
        .args(["--grpc-tls-key", &format!("{d}/ours-leaf.key")])
        .args(["--grpc-tls-client-ca", &format!("{d}/ours.crt")])
        .stdout(Stdio::null())
        .stderr(log("dataplane.log"))
        .spawn()
        .unwrap();
    procs.0.push(("dataplane", child));
    let url = format!("https://localhost:{}", grpc.port());
    let good = Target {
        addr: url.clone(),
        tls: Some(tls(&dir, "ours", "ours")),
    };
    wait_for("the dataplane answers over mutual TLS", 60, || {
        futures_block(answers(&good)).ok()
    });

    // Refused: plaintext, no client certificate, a stranger's client certificate, and a
    // client that trusts only the stranger's CA (the dataplane's certificate is not theirs).
    let plain = Target {
        addr: format!("http://localhost:{}", grpc.port()),
        tls: None,
    };
    let no_identity = Target {
        addr: url.clone(),
        tls: Some(tonic::transport::ClientTlsConfig::new().ca_certificate(
            tonic::transport::Certificate::from_pem(std::fs::read(dir.join("ours.crt")).unwrap()),
        )),
    };
    let stranger = Target {
        addr: url.clone(),
        tls: Some(tls(&dir, "ours", "stranger")),
    };
    let distrusting = Target {
        addr: url.clone(),
        tls: Some(tls(&dir, "stranger", "ours")),
    };
    for (what, t) in [
        ("plaintext", &plain),
        ("no client certificate", &no_identity),
        ("a stranger's client certificate", &stranger),
    ] {
        let r = answers(t).await;
        assert!(r.is_err(), "{what}: answered");
    }
    let r = answers(&distrusting).await.unwrap_err();
    assert!(r.contains("UnknownIssuer"), "distrusting client: {r}");

    // The real control: ours connects and reconciles; the stranger's stays out, saying why.
    for (run, leaf, connected) in [("ours", "ours", true), ("stranger", "stranger", false)] {
        let api = free_port();
        let cfg = control_config(&dir, run, &url, ("ours", leaf), &api.to_string());
        let child = Command::new(&ctl)
            .arg("--config")
            .arg(&cfg)
            .stdout(log(&format!("control-{run}.log")))
            .stderr(log(&format!("control-{run}.err.log")))
            .spawn()
            .unwrap();
        procs.0.push(("control", child));
        let body = wait_for(
            &format!("control {run}: connected = {connected}"),
            60,
            || {
                http_get(api, "/v1/dataplanes").ok().and_then(|(_, b)| {
                    let v: serde_json::Value = serde_json::from_str(&b).ok()?;
                    let dp = v.as_array()?.first()?.clone();
                    let settled = if connected {
                        dp["connected"] == true && !dp["lastReconcile"].is_null()
                    } else {
                        dp["lastError"].is_string()
                    };
                    settled.then_some(dp)
                })
            },
        );
        assert_eq!(body["connected"], connected, "control {run}: {body}");
        if !connected {
            // Still out after more attempts (one a second), never reconciled. TLS 1.3: the
            // client learns of the refusal at its first request (the dataplane's UnknownCA
            // alert, or the connection closed), so the error names that request.
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let (_, b) = http_get(api, "/v1/dataplanes").unwrap();
            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
            assert_eq!(v[0]["connected"], false, "{v}");
            assert!(v[0]["lastReconcile"].is_null(), "{v}");
            let why = v[0]["lastError"].as_str().unwrap();
            assert!(
                why.starts_with("GetIdentity") || why.starts_with("connect"),
                "{why}"
            );
        }
        procs.stop("control");
    }
}

/// A directory removed when the test ends, passed or not.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run `f` to completion from a synchronous closure inside the test's runtime.
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}
