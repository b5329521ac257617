//! The namespaces, processes and plain HTTP of the end-to-end test.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::{CLIENT_MAC, CORE_IP};

pub fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("running {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn sh(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

pub fn in_ns(ns: &str, args: &[&str]) -> String {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    sh(&v)
}

pub fn has_tool(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The newest modification time of any file under `dir`.
pub fn newest(dir: &Path) -> SystemTime {
    let mut t = SystemTime::UNIX_EPOCH;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            let m = if p.is_dir() {
                newest(&p)
            } else {
                e.metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            };
            t = t.max(m);
        }
    }
    t
}

/// The two binaries, or why the test cannot run.
pub fn prerequisites() -> Result<(PathBuf, PathBuf), String> {
    if sh(&["id", "-u"]).trim() != "0" {
        return Err("not root".into());
    }
    for tool in ["ip", "ethtool", "udhcpc", "promtool", "bash"] {
        if !has_tool(tool) {
            return Err(format!("{tool} missing"));
        }
    }
    let ctl = PathBuf::from(env!("CARGO_BIN_EXE_kbng-control"));
    let dp = ctl.with_file_name("kbng-dataplane");
    let built = std::fs::metadata(&dp)
        .and_then(|m| m.modified())
        .map_err(|_| format!("{} missing: cargo build -p kbng-dataplane", dp.display()))?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for src in [
        "cnf-dataplane/src",
        "telemetry/src",
        "api/src",
        "dpdk-sys/src",
    ] {
        if newest(&root.join(src)) > built {
            return Err(format!(
                "{} is older than {src}: cargo build -p kbng-dataplane",
                dp.display()
            ));
        }
    }
    Ok((ctl, dp))
}

/// Namespaces of one run; deleted (after killing what runs in them) on drop.
pub struct Lab {
    pub tag: String,
}

impl Lab {
    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.tag)
    }

    pub fn up() -> (Lab, String) {
        let lab = Lab {
            tag: format!("kot{}", std::process::id() % 100_000),
        };
        let (sub, dut, core) = (lab.ns("sub"), lab.ns("dut"), lab.ns("core"));
        // `ip netns exec` bind-mounts /etc/netns/<ns>/* over /etc, so udhcpc's script writes
        // this namespace's resolv.conf and leaves the host's alone.
        let etc = format!("/etc/netns/{sub}");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(format!("{etc}/resolv.conf"), "").unwrap();
        for ns in [&sub, &dut, &core] {
            sh(&["ip", "netns", "add", ns]);
            in_ns(ns, &["ip", "link", "set", "lo", "up"]);
            in_ns(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            in_ns(
                ns,
                &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
            );
        }
        sh(&[
            "ip", "link", "add", "s0", "netns", &sub, "address", CLIENT_MAC, "type", "veth",
            "peer", "name", "d0", "netns", &dut,
        ]);
        sh(&[
            "ip", "link", "add", "d1", "netns", &dut, "type", "veth", "peer", "name", "c0",
            "netns", &core,
        ]);
        for (ns, dev) in [(&sub, "s0"), (&dut, "d0"), (&dut, "d1"), (&core, "c0")] {
            in_ns(ns, &["ip", "link", "set", dev, "up"]);
        }
        // Checksums are otherwise left to offload on veth and arrive wrong through af_packet.
        in_ns(&sub, &["ethtool", "-K", "s0", "tx", "off"]);
        in_ns(&core, &["ethtool", "-K", "c0", "tx", "off"]);
        let d1_mac = in_ns(&dut, &["cat", "/sys/class/net/d1/address"]);
        let c0_mac = in_ns(&core, &["cat", "/sys/class/net/c0/address"]);
        in_ns(
            &core,
            &["ip", "addr", "add", &format!("{CORE_IP}/24"), "dev", "c0"],
        );
        in_ns(
            &core,
            &["ip", "route", "add", "100.64.0.0/10", "via", "192.0.2.254"],
        );
        in_ns(
            &core,
            &[
                "ip",
                "neigh",
                "replace",
                "192.0.2.254",
                "lladdr",
                d1_mac.trim(),
                "dev",
                "c0",
            ],
        );
        (lab, c0_mac.trim().to_owned())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for role in ["sub", "dut", "core"] {
            let ns = self.ns(role);
            if let Ok(pids) = run(&["ip", "netns", "pids", &ns]) {
                for pid in pids.split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{ns}"));
        }
    }
}

/// Child processes, stopped by id on drop (SIGTERM, then SIGKILL).
#[derive(Default)]
pub struct Procs(pub Vec<(&'static str, Child)>);

impl Procs {
    pub fn pid(&self, name: &str) -> u32 {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.id())
            .unwrap()
    }

    /// SIGTERM `name` and wait (bounded) for it to exit; its exit status.
    pub fn stop(&mut self, name: &str) -> Option<std::process::ExitStatus> {
        let i = self.0.iter().position(|(n, _)| *n == name)?;
        let (_, mut c) = self.0.remove(i);
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        let names: Vec<&'static str> = self.0.iter().map(|(n, _)| *n).collect();
        for n in names {
            self.stop(n);
        }
    }
}

pub fn free_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A plain HTTP/1.0 GET: (status code, body).
pub fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    let (head, body) = raw.split_once("\r\n\r\n").ok_or("no header end")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("no status")?;
    Ok((code, body.to_owned()))
}

pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s: {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `promtool check metrics` accepts `body` without a complaint.
pub fn promtool_check(who: &str, body: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics on {who}'s /metrics: {}\n{}{}\n{body}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The value of the first sample of `series` (a metric name with its `{labels}` in the
/// exposition's order) in a scrape.
pub fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}
