//! `kbngctl` against a real `kbng-control` binary on loopback (no dataplane: its socket does
//! not exist, so the control keeps retrying it while the API answers). Subscribers, plans and
//! licence status are checked here; sessions with real DHCP clients in tests/control/run.sh.
//!
//! The control binary is the one `cargo test --workspace` builds next to this test; run
//! `cargo build -p kbng-control` first when testing this package alone.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn control_bin() -> PathBuf {
    // target/<profile>/deps/control_api-<hash> -> target/<profile>/kbng-control
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("kbng-control");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p kbng-control` (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

struct Control {
    child: Child,
    server: String,
    dir: tempfile::TempDir,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a control whose licence section is `licence` (YAML flow mapping, `$DIR` = its dir).
fn start(licence: &str, prepare: impl FnOnce(&Path)) -> Control {
    start_with(licence, "", prepare)
}

/// As [`start`], with `extra` lines of configuration (`$DIR` = its dir).
fn start_with(licence: &str, extra: &str, prepare: impl FnOnce(&Path)) -> Control {
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path());
    let port = free_port();
    let d = dir.path().display().to_string();
    let cfg = format!(
        r#"
dataplanes: ["unix:{d}/no-dataplane.sock"]
pools:
  - {{name: p, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}}
plans:
  - {{name: gold, id: 10, rateBps: 100000000}}
  - name: silver
    id: 20
    rateBps: 20000000
    upstream: {{mode: trTCM, cirBps: 5000000, pirBps: 10000000, cbsBytes: 62500, pbsBytes: 125000,
               actions: {{green: {{action: transmit}}, yellow: {{action: remark, dscp: 8}}, red: {{action: drop}}}}}}
defaultPlan: silver
store: {d}/sessions.redb
apiListen: 127.0.0.1:{port}
licence: {}
walledGarden: {{portalUrl: "http://192.0.2.80/", allowed: [{{prefix: 192.0.2.80/32}}]}}
{}
"#,
        licence.replace("$DIR", &d),
        extra.replace("$DIR", &d)
    );
    std::fs::write(dir.path().join("control.yaml"), cfg).unwrap();
    let c = Control {
        child: spawn(dir.path()),
        server: format!("127.0.0.1:{port}"),
        dir,
    };
    wait_up(&c);
    c
}

fn spawn(dir: &Path) -> Child {
    Command::new(control_bin())
        .arg("--config")
        .arg(dir.join("control.yaml"))
        .args(["--log", "error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The control stopped and started again on its configuration and store.
fn restart(c: &mut Control) {
    let _ = c.child.kill();
    let _ = c.child.wait();
    c.child = spawn(c.dir.path());
    wait_up(c);
}

fn wait_up(c: &Control) {
    let t0 = Instant::now();
    while !kbngctl(c, &["plans"]).status.success() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "control did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kbngctl(c: &Control, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbngctl"))
        .args(args)
        .env("KBNG_SERVER", &c.server)
        .output()
        .unwrap()
}

fn ok(c: &Control, args: &[&str]) -> String {
    let o = kbngctl(c, args);
    assert!(o.status.success(), "kbngctl {args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

fn fails(c: &Control, args: &[&str]) -> String {
    let o = kbngctl(c, args);
    assert!(!o.status.success(), "kbngctl {args:?} should fail: {o:?}");
    String::from_utf8(o.stderr).unwrap()
}

fn json(c: &Control, args: &[&str]) -> Value {
    serde_json::from_str(&ok(c, args)).unwrap()
}

/// A licence for `max` sessions, valid `days` from `from`, signed with the lab key (or a
/// forger's key when `forged`).
fn issue(dir: &Path, name: &str, max: u64, from: &str, days: u32, forged: bool) {
    let key = if forged {
        let k = dir.join("forger.key");
        let o = Command::new(env!("CARGO_BIN_EXE_kbngctl"))
            .args(["licence", "keygen", "--signing-key-out"])
            .arg(&k)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        k
    } else {
        root().join("deploy/samples/lab-signing.key")
    };
    let o = Command::new(env!("CARGO_BIN_EXE_kbngctl"))
        .args(["licence", "issue", "--signing-key"])
        .arg(&key)
        .args(["--name", "t", "--customer", "Test", "--licence-id", "T-1"])
        .args(["--max-sessions", &max.to_string(), "--not-before", from])
        .args(["--days", &days.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::fs::write(dir.join(name), o.stdout).unwrap();
}

const SIGNED: &str = "{file: $DIR/licence.yaml, publicKeyFile: KEY}";

fn signed() -> String {
    SIGNED.replace(
        "KEY",
        &root()
            .join("deploy/samples/lab-licence-public.key")
            .display()
            .to_string(),
    )
}

#[test]
fn subscribers_listed_in_pages_and_option82_records_by_their_identity() {
    let c = start(&signed(), |d| {
        issue(d, "licence.yaml", 7, "2026-01-01T00:00:00Z", 3650, false)
    });
    let mut text: String = (0..2500u32)
        .rev()
        .map(|i| format!("0a:00:00:00:{:02x}:{:02x},,,gold\n", i >> 8, i & 0xff))
        .collect();
    text.push_str(",c-1,,silver\n,c-1,r-1,gold\n,,r-2,,,p\n");
    let path = c.dir.path().join("subs.csv");
    std::fs::write(&path, text).unwrap();
    ok(&c, &["subscribers", "import", path.to_str().unwrap()]);

    // Pages of 1,000 (three requests): MAC records in MAC order, then option 82 ones.
    let listed = json(&c, &["subscribers", "list", "-o", "json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2503);
    assert_eq!(listed[0]["mac"], "0a:00:00:00:00:00");
    assert_eq!(listed[2499]["mac"], "0a:00:00:00:09:c3");
    let tail: Vec<&Value> = listed[2500..].iter().collect();
    assert_eq!(
        tail,
        [
            &serde_json::json!({"remote_id": "r-2", "pool": "p"}),
            &serde_json::json!({"circuit_id": "c-1", "plan": "silver"}),
            &serde_json::json!({"circuit_id": "c-1", "remote_id": "r-1", "plan": "gold"}),
        ]
    );
    let table = ok(&c, &["subscribers", "list", "--page-size", "7"]);
    assert!(
        table.ends_with("2503 subscriber(s)\n"),
        "{}",
        &table[table.len() - 80..]
    );
    assert!(
        table.contains(
            "\n-                  -                r-2              (default)    pool p\n"
        ),
        "{table}"
    );
    // The JSON listing is an import file.
    let back = c.dir.path().join("back.json");
    std::fs::write(&back, serde_json::to_vec(listed).unwrap()).unwrap();
    let said = ok(&c, &["subscribers", "import", back.to_str().unwrap()]);
    assert!(said.contains("imported 2503"), "{said}");

    // A record keyed by option 82 is read and removed by its exact identity.
    let exact = ["--circuit-id", "c-1", "--remote-id", "r-1"];
    fn show<'a>(who: &[&'a str]) -> Vec<&'a str> {
        [&["subscribers", "show"][..], who, &["-o", "json"]].concat()
    }
    assert_eq!(json(&c, &show(&exact))["plan"], "gold");
    assert_eq!(json(&c, &show(&["--circuit-id", "c-1"]))["plan"], "silver");
    assert_eq!(
        ok(&c, &["subscribers", "remove", "--circuit-id", "c-1"]),
        "removed circuit-id c-1\n"
    );
    let err = fails(&c, &show(&["--circuit-id", "c-1"]));
    assert!(err.contains("404 Not Found: no such subscriber"), "{err}");
    assert_eq!(
        json(&c, &show(&exact))["plan"],
        "gold",
        "only the exact one removed"
    );
    let err = fails(&c, &["subscribers", "remove", "--remote-id", "r-1"]);
    assert!(err.contains("404"), "{err}");
    let err = fails(&c, &["subscribers", "show"]);
    assert!(err.contains("required"), "{err}");
    let err = fails(
        &c,
        &[
            "subscribers",
            "show",
            "0a:00:00:00:00:00",
            "--circuit-id",
            "c",
        ],
    );
    assert!(err.contains("cannot be used with"), "{err}");
    let n = ok(&c, &["subscribers", "list"]);
    assert!(
        n.ends_with("2502 subscriber(s)\n"),
        "{}",
        &n[n.len() - 40..]
    );
}

#[test]
fn subscribers_plans_sessions_and_a_valid_licence() {
    let c = start(&signed(), |d| {
        issue(d, "licence.yaml", 7, "2026-01-01T00:00:00Z", 3650, false)
    });

    let l = json(&c, &["licence", "status", "-o", "json"]);
    assert_eq!(l["licence"]["cap"], 7, "{l}");
    assert_eq!(l["licence"]["source"], "licence");
    assert_eq!(l["licence"]["valid"], true);
    assert_eq!(l["licence"]["licenceId"], "T-1");
    assert!(l["licence"]["daysRemaining"].as_u64().unwrap() > 300, "{l}");
    assert_eq!(l["sessions"]["active"], 0);
    let table = ok(&c, &["licence", "status"]);
    assert!(table.contains("source:         licence"), "{table}");

    let p = json(&c, &["plans", "-o", "json"]);
    let plans = p["plans"].as_array().unwrap();
    let by_name = |n: &str| plans.iter().find(|x| x["name"] == n).unwrap().clone();
    assert_eq!(plans.len(), 2, "{p}");
    // rateBps is single-rate srTCM in each direction not given; a given one is kept whole.
    assert_eq!(by_name("gold")["upstream"]["mode"], "srTCM");
    assert_eq!(by_name("gold")["downstream"]["cirBps"], 100_000_000);
    assert_eq!(by_name("silver")["upstream"]["mode"], "trTCM");
    assert_eq!(by_name("silver")["upstream"]["pirBps"], 10_000_000);
    assert_eq!(
        by_name("silver")["upstream"]["actions"]["yellow"]["dscp"],
        8
    );
    assert_eq!(by_name("silver")["downstream"]["cirBps"], 20_000_000);
    assert_eq!(by_name("silver")["default"], true);
    assert_eq!(by_name("gold")["sessions"], 0);
    let table = ok(&c, &["plans"]);
    assert!(table.contains("srTCM 100.0 Mb/s"), "{table}");
    assert!(table.contains("trTCM 5.0 Mb/s/10.0 Mb/s"), "{table}");

    // `kbngctl subscribers import` of a file `name` holding `text`.
    let import = |name: &str, text: &str| {
        let path = c.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        kbngctl(&c, &["subscribers", "import", path.to_str().unwrap()])
    };
    let stderr = |o: Output| String::from_utf8(o.stderr).unwrap();
    // Import a CSV; each imported MAC is then removable exactly once.
    let o = import(
        "subs.csv",
        "mac,circuit_id,remote_id,plan\n02:00:00:00:00:01,,,gold\n02:00:00:00:00:02,,,silver\n,c-7,,gold\n",
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("imported 3"),
        "{o:?}"
    );
    // A file with bad rows adds nothing, and names every bad row.
    let err = stderr(import(
        "bad.csv",
        "02:00:00:00:00:03,,,gold\nnot-a-mac,,,gold\n02:00:00:00:00:04,,,platinum\n",
    ));
    assert!(err.contains("400 Bad Request"), "{err}");
    assert!(
        err.contains(&format!("http://{}/v1/subscribers", c.server)),
        "{err}"
    );
    assert!(err.contains("row 3: unknown plan \"platinum\""), "{err}");
    let err = fails(&c, &["subscribers", "remove", "02:00:00:00:00:03"]);
    assert!(
        err.contains("404 Not Found"),
        "the bad file added a row: {err}"
    );
    // JSON import, single add and removal.
    let o = import(
        "subs.json",
        r#"[{"mac": "02:00:00:00:00:05", "plan": "gold"}]"#,
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("imported 1"),
        "{o:?}"
    );
    ok(
        &c,
        &[
            "subscribers",
            "add",
            "--mac",
            "02:00:00:00:00:06",
            "--plan",
            "silver",
        ],
    );
    let err = fails(
        &c,
        &[
            "subscribers",
            "add",
            "--mac",
            "02:00:00:00:00:07",
            "--plan",
            "x",
        ],
    );
    assert!(err.contains("unknown plan"), "{err}");
    let err = fails(&c, &["subscribers", "add", "--plan", "gold"]);
    assert!(err.contains("--mac"), "{err}");
    // An address or a pool: one the control serves, named when not.
    let add = |rest: &[&str]| {
        let mut a = vec!["subscribers", "add", "--mac", "02:00:00:00:00:08"];
        a.extend_from_slice(rest);
        kbngctl(&c, &a)
    };
    let said = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let o = add(&["--ipv4", "100.64.0.9"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        said(&o).contains("on plan (default) at 100.64.0.9"),
        "{o:?}"
    );
    assert_eq!(
        ok(&c, &["subscribers", "show", "02:00:00:00:00:08"]),
        "subscriber 02:00:00:00:00:08\n  plan: (default)\n  address: 100.64.0.9\n"
    );
    let o = add(&["--pool", "p"]);
    assert!(said(&o).contains("in pool p"), "{o:?}");
    assert_eq!(
        json(
            &c,
            &["subscribers", "show", "02:00:00:00:00:08", "-o", "json"]
        ),
        serde_json::json!({"mac": "02:00:00:00:00:08", "pool": "p"}),
        "replaced whole"
    );
    ok(&c, &["subscribers", "remove", "02:00:00:00:00:08"]);
    for (rest, why) in [
        (&["--pool", "q"][..], "row 1: unknown pool \"q\""),
        (
            &["--ipv4", "10.0.0.9"][..],
            "row 1: ipv4 10.0.0.9 is in no pool",
        ),
        (
            &["--ipv4", "100.64.0.9", "--pool", "p"][..],
            "cannot be used with",
        ),
        (
            &["--ipv4", "100.64.0.300"][..],
            "invalid value '100.64.0.300' for '--ipv4",
        ),
    ] {
        let o = add(rest);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{rest:?}: {o:?}");
    }
    let err = fails(&c, &["subscribers", "remove", "02:00:00:00:00:08"]);
    assert!(err.contains("404"), "a refused add added it: {err}");
    let err = fails(&c, &["subscribers", "show", "02:00:00:00:00:08"]);
    assert!(err.contains("404 Not Found: no such subscriber"), "{err}");
    let err = fails(&c, &["subscribers", "show", "nope"]);
    assert!(err.contains("400 Bad Request: bad MAC \"nope\""), "{err}");
    // The issue's bulk size, 100,000 rows (about 2.5 MB), in one import.
    let rows: String = (0..100_000u32)
        .map(|i| {
            let b = i.to_be_bytes();
            format!(
                "0a:00:{:02x}:{:02x}:{:02x}:{:02x},,,gold\n",
                b[0], b[1], b[2], b[3]
            )
        })
        .collect();
    let o = import("bulk.csv", &rows);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("imported 100000"),
        "{o:?}"
    );
    let err = stderr(import(
        "subs6.csv",
        "02:00:00:00:00:09,,,gold,100.64.0.10,\n,c-9,,,,nope\n",
    ));
    assert!(err.contains("row 2: unknown pool \"nope\""), "{err}");
    for mac in [
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "02:00:00:00:00:05",
        "02:00:00:00:00:06",
    ] {
        ok(&c, &["subscribers", "remove", mac]);
        let err = fails(&c, &["subscribers", "remove", mac]);
        assert!(err.contains("404"), "{mac} removed twice: {err}");
    }
    let err = fails(&c, &["subscribers", "remove", "02:00:00:00:00:07"]);
    assert!(err.contains("no such subscriber"), "{err}");

    // Sessions: none without a dataplane, and every command says so without failing.
    assert!(ok(&c, &["sessions", "list"]).contains("0 session(s)"));
    assert_eq!(
        json(&c, &["sessions", "list", "-o", "json"]),
        serde_json::json!([])
    );
    assert!(ok(&c, &["sessions", "list", "--plan", "gold"]).contains("0 session(s)"));
    let err = fails(&c, &["sessions", "list", "--plan", "platinum"]);
    assert!(
        err.contains("400 Bad Request: unknown plan \"platinum\""),
        "{err}"
    );
    assert!(ok(&c, &["sessions", "drain", "--timeout", "5"]).contains("0 sessions remain"));
    let err = fails(&c, &["sessions", "show", "42"]);
    assert!(err.contains("404 Not Found: no session 42"), "{err}");
    let err = fails(&c, &["sessions", "release", "42", "43"]);
    assert!(
        err.contains("404 Not Found: no session 42")
            && err.contains("no session 43")
            && err.contains("2 of 2 session(s) not released"),
        "{err}"
    );
    let err = fails(&c, &["sessions", "set-plan", "42", "gold"]);
    assert!(err.contains("404 Not Found: no session 42"), "{err}");
    let err = fails(&c, &["sessions", "set-plan", "42", "platinum"]);
    assert!(
        err.contains("400 Bad Request: unknown plan \"platinum\""),
        "{err}"
    );
    let t0 = Instant::now();
    ok(&c, &["sessions", "watch", "--timeout", "1"]);
    assert!(t0.elapsed() < Duration::from_secs(5));

    // /v1/status carries what the operator reads.
    let s = json(&c, &["licence", "status", "-o", "json"]);
    assert_eq!(s["sessions"]["total"], 0);
}

#[test]
fn forged_expired_and_replaced_licences_are_reported_truly() {
    let forged = start(&signed(), |d| {
        issue(d, "licence.yaml", 5000, "2026-01-01T00:00:00Z", 3650, true)
    });
    let l = json(&forged, &["licence", "status", "-o", "json"])["licence"].clone();
    assert_eq!(l["source"], "free-baseline", "{l}");
    assert_eq!(l["reason"], "BadSignature");
    assert_eq!(l["cap"], 64);
    assert_eq!(l["valid"], false);
    drop(forged);

    let c = start(&signed(), |d| {
        issue(d, "licence.yaml", 9, "2020-01-01T00:00:00Z", 1, false)
    });
    let l = json(&c, &["licence", "status", "-o", "json"])["licence"].clone();
    assert_eq!(
        (l["source"].as_str(), l["reason"].as_str()),
        (Some("free-baseline"), Some("Expired")),
        "{l}"
    );
    assert_eq!(l["expires"], "2020-01-02T00:00:00Z");
    // A renewed licence replaces the file: the control takes it up within a few seconds.
    issue(
        c.dir.path(),
        "renewed.yaml",
        9,
        "2026-01-01T00:00:00Z",
        3650,
        false,
    );
    std::fs::rename(
        c.dir.path().join("renewed.yaml"),
        c.dir.path().join("licence.yaml"),
    )
    .unwrap();
    let t0 = Instant::now();
    loop {
        let l = json(&c, &["licence", "status", "-o", "json"])["licence"].clone();
        if l["source"] == "licence" {
            assert_eq!(l["cap"], 9);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "renewal not taken up: {l}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_unreachable_server_is_named() {
    let port = free_port();
    let o = Command::new(env!("CARGO_BIN_EXE_kbngctl"))
        .args(["--server", &format!("127.0.0.1:{port}"), "sessions", "list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("http://127.0.0.1:{port}/v1/")),
        "{err}"
    );
    assert!(err.contains("cannot reach kbng-control"), "{err}");
}

/// Records `02:00:00:00:01:{from..to}` on gold, as the subscribers file holds them.
fn rows(from: u8, to: u8) -> String {
    (from..to)
        .map(|i| format!("02:00:00:00:01:{i:02x},,,gold\n"))
        .collect()
}

/// The subscribers file's state in `/v1/status`, once `until` holds of it (the control
/// rereads the file every second).
fn file_status(c: &Control, until: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let s = json(c, &["status", "-o", "json"])["subscribers"].clone();
        if until(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "status stayed {s}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_file_edit_removing_most_records_is_held_until_accepted() {
    let mut c = start_with(
        &signed(),
        "subscribersFile: $DIR/subs.csv\nsubscribersRecheckSecs: 1",
        |d| std::fs::write(d.join("subs.csv"), rows(0, 40)).unwrap(),
    );
    let subs = c.dir.path().join("subs.csv");
    assert_eq!(file_status(&c, |_| true)["records"], 40);

    // A truncated file: 35 of the 40 records would go.
    std::fs::write(&subs, rows(0, 5)).unwrap();
    let s = file_status(&c, |s| s["file"].get("held").is_some());
    assert_eq!(s["records"], 40, "the records in force stay: {s}");
    assert_eq!(s["file"]["held"]["removes"], 35, "{s}");
    let why = s["file"]["rejected"].as_str().unwrap();
    assert!(why.contains("removes 35 of the 40 records"), "{why}");
    let line = ok(&c, &["status"]);
    assert!(line.contains("its latest content HELD"), "{line}");
    // The records it would remove, listed: the 35 rows the truncation dropped.
    let removes = json(&c, &["subscribers", "held", "-o", "json"]);
    let macs: Vec<&str> = removes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mac"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (5..40).map(|i| format!("02:00:00:00:01:{i:02x}")).collect();
    assert_eq!(macs, want);
    ok(&c, &["subscribers", "show", "02:00:00:00:01:20"]);

    // A restart reads the file again and compares it with the content last in force, kept
    // in its store: still held.
    restart(&mut c);
    let s = file_status(&c, |_| true);
    assert_eq!(s["records"], 40, "{s}");
    assert_eq!(s["file"]["held"]["removes"], 35, "{s}");

    // A record added through the API meanwhile survives the acceptance.
    ok(&c, &["subscribers", "add", "--mac", "02:00:00:00:02:01"]);
    let said = ok(&c, &["subscribers", "accept-file"]);
    assert_eq!(
        said.trim(),
        "subscribers file in force: 6 records, 35 removed"
    );
    let s = file_status(&c, |_| true);
    assert_eq!(s["records"], 6, "{s}");
    assert!(s["file"].get("rejected").is_none(), "{s}");
    let err = fails(&c, &["subscribers", "show", "02:00:00:00:01:20"]);
    assert!(err.contains("no such subscriber"), "{err}");
    ok(&c, &["subscribers", "show", "02:00:00:00:02:01"]);
    let err = fails(&c, &["subscribers", "accept-file"]);
    assert!(err.contains("no subscribers file content is held"), "{err}");
    let o = kbngctl(&c, &["subscribers", "held", "-o", "json"]);
    assert!(!o.status.success() && o.stdout.is_empty(), "{o:?}");
    // The accepted content is the one kept: a restart takes the file as it is.
    restart(&mut c);
    let s = file_status(&c, |_| true);
    assert_eq!(s["records"], 6, "{s}");
    assert!(s["file"].get("held").is_none(), "{s}");

    // A handful removed is routine: in force at once, whatever its share.
    std::fs::write(&subs, rows(0, 1)).unwrap();
    let s = file_status(&c, |s| s["records"] == 2);
    assert!(s["file"].get("rejected").is_none(), "{s}");

    // Held again, then the file put back: the held content is dropped, nothing removed.
    std::fs::write(&subs, rows(0, 40)).unwrap();
    file_status(&c, |s| s["records"] == 41);
    std::fs::write(&subs, "").unwrap();
    file_status(&c, |s| s["file"]["held"]["removes"] == 40);
    std::fs::write(&subs, rows(0, 40)).unwrap();
    let s = file_status(&c, |s| s["file"].get("held").is_none());
    assert_eq!(s["records"], 41, "{s}");
    let err = fails(&c, &["subscribers", "accept-file"]);
    assert!(err.contains("no subscribers file content is held"), "{err}");

    // A file that does not parse is rejected, and a restart starts on the content last in
    // force rather than not at all; the file fixed is taken.
    std::fs::write(&subs, format!("{}not-a-mac,,,gold\n", rows(0, 40))).unwrap();
    file_status(&c, |s| s["file"].get("rejected").is_some());
    restart(&mut c);
    let s = file_status(&c, |_| true);
    assert_eq!(s["records"], 41, "the 40 rows and the API's: {s}");
    let why = s["file"]["rejected"].as_str().unwrap_or_default();
    assert!(why.contains("row 41"), "{s}");
    std::fs::write(&subs, rows(0, 39)).unwrap();
    let s = file_status(&c, |s| s["file"].get("rejected").is_none());
    assert_eq!(s["records"], 40, "{s}");
}
