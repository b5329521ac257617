//! Mutual TLS between the real `kbng-control` and the real `kbng-dataplane` over loopback,
//! with certificates made here by `openssl`: one CA signs a certificate both ends present
//! (as a cert-manager Secret would hold it), a second CA stands for a stranger.
//!
//! It asserts: the control configured with the CA, its certificate and `https://` connects
//! and reconciles (`/v1/dataplanes` says connected); a control whose certificate the stranger
//! signed is refused by the dataplane, stays disconnected and says why in `lastError`; and the
//! control's own client code cannot reach the TLS listener in plaintext, without a client
//! certificate, or trusting only the stranger's CA. The dataplane counts each refusal on
//! `/metrics`, a client that never starts its handshake as timed out, and each check that finds
//! a renewal it cannot load; the expiry it exports for its certificate and client CA is what
//! openssl reads from the files it holds, before and after a renewal, and so is the control's
//! for its own certificate and CA. The dataplane runs on
//! `net_null` ports.
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
use kbng_control::dataplane::{Target, connect};
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

/// A CA `name`.crt/.key valid for `days`, and a leaf `name`-leaf.crt/.key it signs for
/// localhost and 127.0.0.1, usable as server and as client, valid for a day less.
fn issue(dir: &Path, name: &str, days: u32) {
    let (ca_days, leaf_days) = (days.to_string(), (days - 1).to_string());
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
    a.extend(["-keyout", &ca_key, "-out", &ca_crt, "-days", &ca_days]);
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
            &leaf_days,
            "-extfile",
            "leaf.ext",
        ],
    );
}

/// The control's TLS files: the CA `ca` it trusts, the certificate and key of `leaf`.
fn files(dir: &Path, ca: &str, leaf: &str) -> DataplaneTlsFile {
    DataplaneTlsFile {
        ca_file: dir.join(format!("{ca}.crt")),
        cert_file: dir.join(format!("{leaf}-leaf.crt")),
        key_file: dir.join(format!("{leaf}-leaf.key")),
        recheck_secs: 30,
    }
}

fn https(url: &str, dir: &Path, ca: &str, leaf: &str) -> Target {
    Target {
        addr: url.to_string(),
        tls: Some(files(dir, ca, leaf)),
    }
}

/// The dataplane's own files (copies, so that a renewal can replace them under it).
fn install_dataplane_files(dir: &Path, from: &str) {
    for (src, dst) in [
        (format!("{from}-leaf.crt"), "dp.crt"),
        (format!("{from}-leaf.key"), "dp.key"),
        (format!("{from}.crt"), "dp-clients-ca.crt"),
    ] {
        std::fs::copy(dir.join(src), dir.join(format!("{dst}.new"))).unwrap();
        std::fs::rename(dir.join(format!("{dst}.new")), dir.join(dst)).unwrap();
    }
}

/// The control `run`'s files (copies, as for the dataplane): the CA `ca` it trusts, the
/// certificate and key of `leaf`.
fn install_control_files(dir: &Path, run: &str, ca: &str, leaf: &str) {
    for (src, dst) in [
        (format!("{leaf}-leaf.crt"), format!("{run}-ctl.crt")),
        (format!("{leaf}-leaf.key"), format!("{run}-ctl.key")),
        (format!("{ca}.crt"), format!("{run}-ctl-ca.crt")),
    ] {
        std::fs::copy(dir.join(src), dir.join(format!("{dst}.new"))).unwrap();
        std::fs::rename(dir.join(format!("{dst}.new")), dir.join(dst)).unwrap();
    }
}

/// The control's view of dataplane 0 (`/v1/dataplanes`).
fn dataplane_status(api: std::net::SocketAddr) -> Option<serde_json::Value> {
    let (_, b) = http_get(api, "/v1/dataplanes").ok()?;
    let v: serde_json::Value = serde_json::from_str(&b).ok()?;
    v.as_array()?.first().cloned()
}

/// Whether the control's client reaches the dataplane at `target` (an identity answered).
async fn answers(target: &Target) -> Result<(), String> {
    let mut c = connect(target).await?;
    c.get_identity(pb::GetIdentityRequest {})
        .await
        .map(|_| ())
        .map_err(|s| format!("{}: {}", s.code(), s.message()))
}

/// A control configuration dialling `url` with `tls` (ca, leaf) of `dir`, copied for it, and
/// read again every second.
fn control_config(dir: &Path, run: &str, url: &str, tls: (&str, &str), api: &str) -> PathBuf {
    install_control_files(dir, run, tls.0, tls.1);
    let d = dir.display();
    let path = dir.join(format!("{run}.yaml"));
    std::fs::write(dir.join("cap"), "1000\n").unwrap();
    std::fs::write(
        &path,
        format!(
            r#"dataplanes: ["{url}"]
dataplaneTls: {{caFile: {d}/{run}-ctl-ca.crt, certFile: {d}/{run}-ctl.crt, keyFile: {d}/{run}-ctl.key, recheckSecs: 1}}
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
    // Different lifetimes, so that the expiry the dataplane exports tells them apart.
    for (ca, days) in [("ours", 3), ("stranger", 7), ("renewed", 5)] {
        issue(&dir, ca, days);
    }
    install_dataplane_files(&dir, "ours");
    let log = |n: &str| std::fs::File::create(dir.join(n)).unwrap();
    let grpc = free_port();
    let metrics = free_port();
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
        .args(["--metrics-listen", &metrics.to_string()])
        .args(["--grpc-tls-cert", &format!("{d}/dp.crt")])
        .args(["--grpc-tls-key", &format!("{d}/dp.key")])
        .args(["--grpc-tls-client-ca", &format!("{d}/dp-clients-ca.crt")])
        .stdout(Stdio::null())
        .stderr(log("dataplane.log"))
        .spawn()
        .unwrap();
    procs.0.push(("dataplane", child));
    let url = format!("https://localhost:{}", grpc.port());
    let good = https(&url, &dir, "ours", "ours");
    wait_for("the dataplane answers over mutual TLS", 60, || {
        futures_block(answers(&good)).ok()
    });
    expiry_is(metrics, &dir, "ours");

    // Refused: plaintext, no client certificate, a stranger's client certificate, and a
    // client that trusts only the stranger's CA (the dataplane's certificate is not theirs).
    // And one that connects and says nothing, held open past the handshake timeout.
    let silent = std::net::TcpStream::connect(grpc).unwrap();
    let mut refused = wait_for("TLS counters on /metrics", 20, || {
        tls_metric(metrics, FAILED)
    });
    let plain = Target {
        addr: format!("http://localhost:{}", grpc.port()),
        tls: None,
    };
    assert!(answers(&plain).await.is_err(), "plaintext answered");
    refused = counted_refusal(metrics, refused, "plaintext");
    let ca_only = tonic::transport::ClientTlsConfig::new().ca_certificate(
        tonic::transport::Certificate::from_pem(std::fs::read(dir.join("ours.crt")).unwrap()),
    );
    let no_identity = async {
        let ch = tonic::transport::Endpoint::from_shared(url.clone())?
            .tls_config(ca_only)?
            .connect()
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(
            pb::dataplane_client::DataplaneClient::new(ch)
                .get_identity(pb::GetIdentityRequest {})
                .await?,
        )
    };
    assert!(no_identity.await.is_err(), "no client certificate answered");
    refused = counted_refusal(metrics, refused, "no client certificate");
    let stranger = https(&url, &dir, "ours", "stranger");
    assert!(
        answers(&stranger).await.is_err(),
        "a stranger's certificate answered"
    );
    refused = counted_refusal(metrics, refused, "a stranger's certificate");
    let r = answers(&https(&url, &dir, "stranger", "ours"))
        .await
        .unwrap_err();
    assert!(r.contains("UnknownIssuer"), "distrusting client: {r}");
    counted_refusal(metrics, refused, "a client distrusting the dataplane");

    // The real control: the stranger's stays out, saying why; ours connects and reconciles.
    for (run, leaf, connected) in [("stranger", "stranger", false), ("ours", "ours", true)] {
        let api = free_port();
        let cfg = control_config(&dir, run, &url, ("ours", leaf), &api.to_string());
        let ctl_metrics = free_port();
        let child = Command::new(&ctl)
            .arg("--config")
            .arg(&cfg)
            .args(["--metrics-listen", &ctl_metrics.to_string()])
            .stdout(log(&format!("control-{run}.log")))
            .stderr(log(&format!("control-{run}.err.log")))
            .spawn()
            .unwrap();
        procs.0.push(("control", child));
        let status = wait_for(
            &format!("control {run}: connected = {connected}"),
            60,
            || {
                dataplane_status(api).filter(|dp| {
                    if connected {
                        dp["connected"] == true && !dp["lastReconcile"].is_null()
                    } else {
                        dp["lastError"].is_string()
                    }
                })
            },
        );
        assert_eq!(status["connected"], connected, "control {run}: {status}");
        // Exported whether or not the dataplane lets it in: the files are what expires.
        for (file, cert) in [
            ("cert", format!("{leaf}-leaf.crt")),
            ("ca", "ours.crt".into()),
        ] {
            let want = not_after(&dir.join(&cert));
            let name =
                format!("kbng_control_dataplane_tls_expiry_timestamp_seconds{{file=\"{file}\"}}");
            let got = wait_for(&format!("control {run}: expiry of {file}"), 20, || {
                scraped(ctl_metrics, &name)
            });
            assert_eq!(got, want, "control {run}: expiry of {file}, against {cert}");
        }
        if connected {
            renewal_keeps_the_connection_and_changes_who_gets_in(&dir, &url, api, metrics).await;
            the_controls_renewal_reopens_its_connection(&dir, run, api).await;
        } else {
            // Still out after more attempts (one a second), never reconciled. TLS 1.3: the
            // client learns of the refusal at its first request (the dataplane's UnknownCA
            // alert, or the connection closed), so the error names that request.
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let v = dataplane_status(api).unwrap();
            assert_eq!(v["connected"], false, "{v}");
            assert!(v["lastReconcile"].is_null(), "{v}");
            let why = v["lastError"].as_str().unwrap();
            assert!(
                why.starts_with("GetIdentity") || why.starts_with("connect"),
                "{why}"
            );
        }
        procs.stop("control");
    }
    wait_for("the silent client timed out on /metrics", 30, || {
        (tls_metric(metrics, "refused_total{reason=\"handshake timed out\"}") == Some(1))
            .then_some(())
    });
    drop(silent);
}

const FAILED: &str = "refused_total{reason=\"handshake failed\"}";

/// Waits for the refused handshakes on `/metrics` to pass `before` (the refusal of `what`);
/// returns the new count. A client may try more than once (tonic's does without a client
/// certificate), so the count must grow, by one or more.
fn counted_refusal(metrics: std::net::SocketAddr, before: u64, what: &str) -> u64 {
    wait_for(&format!("the refusal of {what} on /metrics"), 20, || {
        tls_metric(metrics, FAILED).filter(|&n| n > before)
    })
}

/// The dataplane's exported expiry of its certificate and client CA become those of `name`'s
/// leaf and CA, as openssl reads them. Waited for: the gauge follows the files the dataplane
/// loaded, which a scrape just after a handshake can precede.
fn expiry_is(metrics: std::net::SocketAddr, dir: &Path, name: &str) {
    for (file, cert) in [
        ("cert", format!("{name}-leaf.crt")),
        ("client-ca", format!("{name}.crt")),
    ] {
        let want = not_after(&dir.join(&cert));
        let what = format!("expiry of {file} on /metrics to be {cert}'s ({want})");
        wait_for(&what, 20, || {
            let got = tls_metric(
                metrics,
                &format!("expiry_timestamp_seconds{{file=\"{file}\"}}"),
            );
            (got == Some(want)).then_some(())
        });
    }
}

/// A certificate's notAfter in Unix seconds, from `openssl x509 -enddate` and `date`.
fn not_after(cert: &Path) -> u64 {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-enddate", "-in"])
        .arg(cert)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let when = text.trim().strip_prefix("notAfter=").unwrap().to_string();
    let out = Command::new("date")
        .args(["-u", "+%s", "-d", &when])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A `kbng_dataplane_grpc_tls_*` sample of the dataplane's `/metrics` (`name` without the
/// prefix, with its labels).
fn tls_metric(metrics: std::net::SocketAddr, name: &str) -> Option<u64> {
    scraped(metrics, &format!("kbng_dataplane_grpc_tls_{name}"))
}

/// The sample of `series` (name and labels) on the `/metrics` at `addr`: counts and Unix
/// seconds, exact in the scrape's float.
fn scraped(addr: std::net::SocketAddr, series: &str) -> Option<u64> {
    let (_, body) = http_get(addr, "/metrics").ok()?;
    lab::sample(&body, &format!("{series} ")).map(|v| v as u64)
}

/// A renewal (cert-manager writing a new certificate and CA into the mounted Secret) under
/// the running dataplane: the control's open connection stays up, not one reconnect; within
/// the reload interval new connections get the new certificate, so a client of the old CA is
/// refused and one of the new CA answers. A broken renewal before it is counted on `metrics`
/// and changes nothing.
async fn renewal_keeps_the_connection_and_changes_who_gets_in(
    dir: &Path,
    url: &str,
    api: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
) {
    let before = dataplane_status(api).unwrap();
    // A half-written renewal first: checked, counted, and the old certificate stays.
    let errors = tls_metric(metrics, "reload_errors_total").unwrap();
    std::fs::write(dir.join("dp.crt"), "-----BEGIN CERTIFICATE-----\ntruncated").unwrap();
    wait_for("a failed reload on /metrics", 30, || {
        (tls_metric(metrics, "reload_errors_total") > Some(errors)).then_some(())
    });
    answers(&https(url, dir, "ours", "ours"))
        .await
        .expect("the old certificate still serves after a renewal that does not load");
    expiry_is(metrics, dir, "ours");
    install_dataplane_files(dir, "renewed");
    let renewed = https(url, dir, "renewed", "renewed");
    wait_for("the dataplane takes the renewed certificate", 30, || {
        futures_block(answers(&renewed)).ok()
    });
    expiry_is(metrics, dir, "renewed");
    let old = answers(&https(url, dir, "ours", "ours")).await;
    assert!(
        old.is_err(),
        "a client of the old CA still answered after the renewal"
    );
    let after = dataplane_status(api).unwrap();
    assert_eq!(after["connected"], true, "{after}");
    assert_eq!(
        after["reconnects"], before["reconnects"],
        "{before} -> {after}"
    );
}

/// The control's own renewal (its Secret updated after the dataplane's above, which left its
/// connection open on the old certificate): the control reconnects with the new
/// certificate, which the dataplane now requires, and then stays connected (this test swaps
/// the three files one by one, so a check may see them half-renewed and reconnect twice; a
/// kubelet swaps a Secret's files at once). A half-written one before it (a file that does not
/// parse) leaves the connection alone.
async fn the_controls_renewal_reopens_its_connection(
    dir: &Path,
    run: &str,
    api: std::net::SocketAddr,
) {
    let reconnects = |v: &serde_json::Value| v["reconnects"].as_u64().unwrap();
    let before = dataplane_status(api).unwrap();
    std::fs::write(
        dir.join(format!("{run}-ctl.crt")),
        "-----BEGIN CERTIFICATE-----\ntruncated",
    )
    .unwrap();
    // Three of the control's checks (one a second).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let broken = dataplane_status(api).unwrap();
    assert_eq!(broken["connected"], true, "{broken}");
    assert_eq!(
        reconnects(&broken),
        reconnects(&before),
        "{before} -> {broken}"
    );
    install_control_files(dir, run, "renewed", "renewed");
    let after = wait_for(
        "the control reconnects with its renewed certificate",
        30,
        || {
            dataplane_status(api)
                .filter(|v| v["connected"] == true && reconnects(v) > reconnects(&before))
        },
    );
    assert!(after["lastError"].is_null(), "{after}");
    // Settled: at most the two reconnects a half-renewed check can cause, then none.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let settled = dataplane_status(api).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let later = dataplane_status(api).unwrap();
    assert!(
        reconnects(&settled) <= reconnects(&before) + 2,
        "{before} -> {settled}"
    );
    assert_eq!(later["connected"], true, "{later}");
    assert_eq!(
        reconnects(&later),
        reconnects(&settled),
        "still reconnecting: {settled} -> {later}"
    );
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
