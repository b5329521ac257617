//! Command line of `kbng-dataplane`, validated once into a [`Config`]. Unknown flags stop the
//! program with a message naming the flag (clap); every semantic error is reported, not only
//! the first.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::Parser;

use crate::io::PipelineMode;

/// The kbng dataplane: a DPDK BNG pipeline programmed over gRPC.
#[derive(Debug, Clone, Parser)]
#[command(name = "kbng-dataplane", version)]
pub struct Args {
    /// Cores: the first runs the control thread (gRPC), the others are workers (at least one).
    /// Example: `0,1` or `2-5`; `auto:N` takes the control core and N workers from this
    /// process's CPU affinity (the exclusive cores a kubelet's static CPU manager granted).
    #[arg(long)]
    pub cores: String,
    /// Access port: a PCI address (`0000:3b:02.1`), a vdev spec (`net_af_packet0,iface=veth0`),
    /// or `env:VAR[:INDEX]`: the INDEXth (default 0) comma-separated PCI address in the
    /// environment variable VAR (the SR-IOV device plugin's `PCIDEVICE_*`).
    #[arg(long)]
    pub access: String,
    /// Uplink port, as `--access`.
    #[arg(long)]
    pub uplink: String,
    /// The NUMA node this dataplane must run on (the operator passes the BNG's
    /// `spec.dataplane.numaNode`): every worker core and both ports must sit on it, or the
    /// dataplane refuses to start. Devices whose node is unknown (vdevs, single-node machines)
    /// match any node. `-1`: no check. `--check-config` checks it from sysfs.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub numa_node: i32,
    /// Validate the flags (and resolve `auto:` cores and `env:` devices), print the result
    /// and exit 0, without starting EAL or any server.
    #[arg(long)]
    pub check_config: bool,
    /// EAL: run without hugepages.
    #[arg(long)]
    pub no_huge: bool,
    /// EAL: do not scan the PCI bus.
    #[arg(long)]
    pub no_pci: bool,
    /// EAL: no shared config files.
    #[arg(long)]
    pub no_shconf: bool,
    /// EAL: keep no files in hugetlbfs (needs hugepages).
    #[arg(long)]
    pub in_memory: bool,
    /// EAL: memory to reserve, MB.
    #[arg(short = 'm', long = "memory-mb")]
    pub memory_mb: Option<u32>,
    /// Descriptors per rx queue.
    #[arg(long, default_value_t = 1024)]
    pub rx_desc: u16,
    /// Descriptors per tx queue.
    #[arg(long, default_value_t = 1024)]
    pub tx_desc: u16,
    /// Mbufs in the pool (0: sized from queues and descriptors).
    #[arg(long, default_value_t = 0)]
    pub mbufs: u32,
    /// Session table capacity (per worker replica).
    #[arg(long, default_value_t = 1_000_000)]
    pub sessions: u32,
    /// Plan table capacity.
    #[arg(long, default_value_t = 4096)]
    pub plans: u16,
    /// Access MAC override (default: the access port's MAC).
    #[arg(long)]
    pub access_mac: Option<String>,
    /// Uplink MAC override (default: the uplink port's MAC).
    #[arg(long)]
    pub uplink_mac: Option<String>,
    /// MAC of the uplink next hop, fixed (no ARP for it). Without it, `--next-hop` is resolved
    /// by ARP.
    #[arg(long)]
    pub next_hop_mac: Option<String>,
    /// Our uplink address and prefix (`192.0.2.254/24`): answered by ARP on the uplink, the
    /// source of ARP requests and of ICMP errors sent to the core.
    #[arg(long)]
    pub uplink_address: Option<String>,
    /// The uplink next hop's IPv4 address (inside `--uplink-address`), resolved by ARP.
    #[arg(long)]
    pub next_hop: Option<Ipv4Addr>,
    /// Seconds a resolved next hop is trusted before it is re-asked by unicast ARP (it is
    /// forgotten after 3 unanswered requests, one a second).
    #[arg(long, default_value_t = 30)]
    pub next_hop_reachable_secs: u32,
    /// ICMP errors (Time Exceeded) per second and worker (RFC 1812 §4.3.2.8); burst a tenth
    /// of it, at least 10.
    #[arg(long, default_value_t = 1000)]
    pub icmp_error_pps: u32,
    /// A subscriber gateway address answered by proxy ARP (repeatable; gRPC ConfigureAccess
    /// replaces the set).
    #[arg(long = "gateway")]
    pub gateways: Vec<Ipv4Addr>,
    /// TPID of the outer tag pushed on double-tagged downstream frames: 0x8100 or 0x88a8.
    #[arg(long, default_value = "0x8100")]
    pub outer_tpid: String,
    /// Punted packets per second and worker (burst: the same number, at least 64).
    #[arg(long, default_value_t = 10_000)]
    pub punt_pps: u32,
    /// gRPC listen address: `unix:/path` or `host:port`.
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub grpc_listen: String,
    /// Serve gRPC over TLS with this certificate chain (PEM), with `--grpc-tls-key` and
    /// `--grpc-tls-client-ca`: only clients with a certificate that CA signed are answered.
    #[arg(long)]
    pub grpc_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of `--grpc-tls-cert`.
    #[arg(long)]
    pub grpc_tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs the certificates of the clients (control planes) allowed in.
    #[arg(long)]
    pub grpc_tls_client_ca: Option<PathBuf>,
    /// Idle back-off: a worker that found nothing to do in 32 polls in a row sleeps this many
    /// microseconds (1..=1000) before polling again. 0 (the default): pure busy-poll, as
    /// production wants. For hosts where the worker shares CPUs with the control plane.
    #[arg(long, default_value_t = 0)]
    pub idle_sleep_us: u32,
    /// Which graph the workers run.
    #[arg(long, value_enum, default_value_t = PipelineMode::Full)]
    pub mode: PipelineMode,
    /// Identity reported over gRPC (default: the host name).
    #[arg(long)]
    pub dataplane_id: Option<String>,
    /// Benchmark: pre-install this many synthetic sessions and stamp synthetic subscriber
    /// frames over received buffers (for `net_null` ports).
    #[arg(long)]
    pub bench_sessions: Option<u32>,
    /// Stop after this many seconds and print worker statistics as JSON (benchmarks).
    #[arg(long)]
    pub run_seconds: Option<u64>,
    /// On SIGTERM, the longest wait for the control's last counter reads before stopping, in
    /// milliseconds (`kbng_dataplane::stopping`); 0 stops at once. Keep it below the pod's
    /// termination grace period.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(0..=20_000))]
    pub stop_grace_ms: u64,
    /// Serve Prometheus metrics on GET /metrics at this address (host:port; on the control
    /// core). OTLP export is configured by the OTEL_* environment variables.
    #[arg(long, env = "KBNG_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The raw arguments.
    pub args: Args,
    /// Control core.
    pub control_core: u32,
    /// Worker cores.
    pub worker_cores: Vec<u32>,
    /// Parsed overrides.
    pub access_mac: Option<[u8; 6]>,
    /// Parsed overrides.
    pub uplink_mac: Option<[u8; 6]>,
    /// Next hop MAC, when fixed by flag.
    pub next_hop_mac: Option<[u8; 6]>,
    /// Uplink address, prefix and next hop, when configured.
    pub uplink: Option<crate::neighbour::UplinkAddressing>,
    /// Outer TPID.
    pub outer_tpid: u16,
    /// `--numa-node`, when a node is required.
    pub numa_node: Option<u32>,
    /// Mutual TLS on the gRPC listener, when its three flags are given: the files, and what
    /// was loaded from them at start.
    pub grpc_tls: Option<(crate::grpc_tls::TlsFiles, crate::grpc_tls::Loaded)>,
}

/// The gRPC listener's mutual TLS from its three flags (all or none), the files read and
/// checked now so that a bad one stops the binary at start, naming it.
fn grpc_tls(
    args: &Args,
    errors: &mut Vec<String>,
) -> Option<(crate::grpc_tls::TlsFiles, crate::grpc_tls::Loaded)> {
    let flags = [
        ("--grpc-tls-cert", &args.grpc_tls_cert),
        ("--grpc-tls-key", &args.grpc_tls_key),
        ("--grpc-tls-client-ca", &args.grpc_tls_client_ca),
    ];
    let given: Vec<&str> = flags
        .iter()
        .filter(|f| f.1.is_some())
        .map(|f| f.0)
        .collect();
    if given.is_empty() {
        return None;
    }
    if given.len() < flags.len() {
        let missing: Vec<&str> = flags
            .iter()
            .filter(|f| f.1.is_none())
            .map(|f| f.0)
            .collect();
        errors.push(format!(
            "{} given without {}: mutual TLS needs all three",
            given.join(", "),
            missing.join(", ")
        ));
        return None;
    }
    if args.grpc_listen.starts_with("unix:") {
        errors.push(format!(
            "{}: TLS is for a host:port --grpc-listen, not {}",
            given[0], args.grpc_listen
        ));
        return None;
    }
    let files = crate::grpc_tls::TlsFiles {
        cert: args.grpc_tls_cert.clone()?,
        key: args.grpc_tls_key.clone()?,
        client_ca: args.grpc_tls_client_ca.clone()?,
    };
    match files.load() {
        Ok(loaded) => Some((files, loaded)),
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

fn parse_cores(s: &str) -> Result<Vec<u32>, String> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (
                    a.trim()
                        .parse()
                        .map_err(|_| format!("--cores: bad core {a:?}"))?,
                    b.trim()
                        .parse()
                        .map_err(|_| format!("--cores: bad core {b:?}"))?,
                );
                if a > b || b - a > 256 {
                    return Err(format!("--cores: bad range {part:?}"));
                }
                v.extend(a..=b);
            }
            None => v.push(
                part.trim()
                    .parse()
                    .map_err(|_| format!("--cores: bad core {part:?}"))?,
            ),
        }
    }
    if v.is_empty() {
        return Err(format!("--cores: no core in {s:?}"));
    }
    Ok(v)
}

/// `auto:N`: the first N + 1 cores of this process's affinity mask.
fn affinity_cores(n: &str) -> Result<Vec<u32>, String> {
    let n: usize = n
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("--cores: auto:{n:?} needs a worker count of at least 1"))?;
    let mine: Vec<u32> = core_affinity::get_core_ids()
        .ok_or("--cores auto: cannot read this process's CPU affinity")?
        .into_iter()
        .map(|c| c.id as u32)
        .collect();
    if mine.len() < n + 1 {
        return Err(format!(
            "--cores auto:{n}: needs {} cores, the affinity mask has {} ({mine:?})",
            n + 1,
            mine.len()
        ));
    }
    if mine.len() > n + 1 {
        tracing::warn!(
            "--cores auto:{n}: the affinity mask has {} cores, more than the {} used: \
             the cores are probably not exclusive (kubelet CPU manager not static?)",
            mine.len(),
            n + 1
        );
    }
    Ok(mine[..=n].to_vec())
}

/// `env:VAR[:INDEX]`: a PCI address from the environment; anything else as given.
fn resolve_device(
    flag: &str,
    dev: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let Some(spec) = dev.strip_prefix("env:") else {
        return Ok(dev.to_owned());
    };
    let (var, index) = match spec.rsplit_once(':') {
        Some((v, i)) => (
            v,
            i.parse::<usize>()
                .map_err(|_| format!("{flag}: {dev:?}: {i:?} is not an index"))?,
        ),
        None => (spec, 0),
    };
    let value = env(var).ok_or_else(|| format!("{flag}: {dev:?}: ${var} is not set"))?;
    value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .nth(index)
        .map(str::to_owned)
        .ok_or_else(|| format!("{flag}: {dev:?}: ${var}={value:?} has no address #{index}"))
}

/// `--uplink-address` and `--next-hop`: both or neither; the next hop a host of our prefix;
/// and a next hop from one of `--next-hop` or `--next-hop-mac`.
fn uplink_addressing(
    args: &Args,
    errors: &mut Vec<String>,
) -> Option<crate::neighbour::UplinkAddressing> {
    if args.next_hop.is_none() && args.next_hop_mac.is_none() {
        errors.push("--next-hop: required (or a fixed --next-hop-mac)".into());
    }
    if !(1..=3600).contains(&args.next_hop_reachable_secs) {
        errors.push(format!(
            "--next-hop-reachable-secs: {} not in 1..=3600",
            args.next_hop_reachable_secs
        ));
    }
    if args.icmp_error_pps == 0 {
        errors.push("--icmp-error-pps: at least 1".into());
    }
    if args.punt_pps == 0 {
        errors.push("--punt-pps: at least 1".into());
    }
    if args.gateways.len() > crate::tables::access::MAX_GATEWAYS {
        errors.push(format!(
            "--gateway: {} given, at most {}",
            args.gateways.len(),
            crate::tables::access::MAX_GATEWAYS
        ));
    }
    let addr = args.uplink_address.as_deref().and_then(|s| {
        let parsed = s
            .split_once('/')
            .and_then(|(a, p)| Some((a.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)));
        match parsed {
            Some((a, p)) if (8..=31).contains(&p) => Some((u32::from(a), p)),
            _ => {
                errors.push(format!(
                    "--uplink-address: {s:?} is not an IPv4 address with a prefix length \
                     8..=31 (like 192.0.2.254/24)"
                ));
                None
            }
        }
    });
    match (addr, args.next_hop, args.uplink_address.is_some()) {
        (Some((address, prefix_len)), Some(nh), _) => {
            let nh = u32::from(nh);
            let mask = u32::MAX << (32 - prefix_len);
            let host = nh & !mask;
            if nh & mask != address & mask {
                errors.push(format!(
                    "--next-hop: {} is outside --uplink-address {}",
                    Ipv4Addr::from(nh),
                    args.uplink_address.as_deref().unwrap_or_default()
                ));
            } else if nh == address {
                errors.push("--next-hop: is our own --uplink-address".into());
            } else if prefix_len < 31 && (host == 0 || host == !mask) {
                errors.push(format!(
                    "--next-hop: {} is the network or broadcast address of its prefix",
                    Ipv4Addr::from(nh)
                ));
            }
            Some(crate::neighbour::UplinkAddressing {
                address,
                prefix_len,
                next_hop: nh,
            })
        }
        (None, Some(_), false) => {
            errors.push("--next-hop: needs --uplink-address (the source of ARP requests)".into());
            None
        }
        (Some(_), None, _) if args.next_hop_mac.is_none() => {
            errors.push("--uplink-address: needs --next-hop".into());
            None
        }
        (Some((address, prefix_len)), None, _) => Some(crate::neighbour::UplinkAddressing {
            address,
            prefix_len,
            next_hop: 0,
        }),
        _ => None,
    }
}

/// Longest idle sleep: beyond a millisecond a worker would leave its rx rings to overflow.
pub const MAX_IDLE_SLEEP_US: u32 = 1000;

fn parse_mac(flag: &str, s: &str) -> Result<[u8; 6], String> {
    s.parse::<kbng_wire::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| format!("{flag}: {s:?} is not a MAC address ({e})"))
}

impl Config {
    /// Validate, reporting every problem found.
    pub fn from_args(mut args: Args) -> Result<Config, Vec<String>> {
        let mut errors = Vec::new();
        let cores = match args.cores.strip_prefix("auto:") {
            Some(n) => affinity_cores(n),
            None => parse_cores(&args.cores),
        };
        let cores = cores.unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
        // The control core may double as a worker core (see `Config::warnings`); worker
        // cores must be distinct.
        let mut dedup = cores.get(1..).unwrap_or_default().to_vec();
        dedup.sort_unstable();
        dedup.dedup();
        if dedup.len() + 1 < cores.len() {
            errors.push("--cores: a worker core is listed twice".into());
        }
        if cores.len() < 2 && !cores.is_empty() {
            errors.push("--cores: need a control core and at least one worker core".into());
        }
        let mut mac = |flag: &str, v: &Option<String>| match v {
            Some(s) => parse_mac(flag, s).map(Some).unwrap_or_else(|e| {
                errors.push(e);
                None
            }),
            None => None,
        };
        let access_mac = mac("--access-mac", &args.access_mac);
        let uplink_mac = mac("--uplink-mac", &args.uplink_mac);
        let next_hop_mac = mac("--next-hop-mac", &args.next_hop_mac);
        let uplink = uplink_addressing(&args, &mut errors);
        let outer_tpid = match args.outer_tpid.to_ascii_lowercase().as_str() {
            "0x8100" | "8100" => 0x8100,
            "0x88a8" | "88a8" => 0x88a8,
            other => {
                errors.push(format!(
                    "--outer-tpid: {other:?} is neither 0x8100 nor 0x88a8"
                ));
                0x8100
            }
        };
        if args.sessions == 0 || args.sessions > 16_000_000 {
            errors.push(format!("--sessions: {} not in 1..=16000000", args.sessions));
        }
        let numa_node = u32::try_from(args.numa_node).ok();
        if args.numa_node < -1 {
            errors.push(format!(
                "--numa-node: {} is neither -1 (no check) nor a node number",
                args.numa_node
            ));
        }
        if args.plans < 2 {
            errors.push("--plans: at least 2".into());
        }
        if args.idle_sleep_us > MAX_IDLE_SLEEP_US {
            errors.push(format!(
                "--idle-sleep-us: {} not in 0..={MAX_IDLE_SLEEP_US} (0: busy-poll)",
                args.idle_sleep_us
            ));
        }
        for (flag, dev) in [
            ("--access", &mut args.access),
            ("--uplink", &mut args.uplink),
        ] {
            match resolve_device(flag, dev, |v| std::env::var(v).ok()) {
                Ok(d) => *dev = d,
                Err(e) => errors.push(e),
            }
        }
        if args.access == args.uplink {
            errors.push("--access and --uplink name the same device".into());
        }
        if args.in_memory && args.no_huge {
            errors.push("--in-memory cannot be combined with --no-huge (EAL)".into());
        }
        if let Some(n) = args.bench_sessions
            && n > args.sessions
        {
            errors.push(format!(
                "--bench-sessions {n} > --sessions {}",
                args.sessions
            ));
        }
        if !(args.grpc_listen.starts_with("unix:")
            || args.grpc_listen.parse::<std::net::SocketAddr>().is_ok())
        {
            errors.push(format!(
                "--grpc-listen: {:?} is neither unix:/path nor host:port",
                args.grpc_listen
            ));
        }
        let grpc_tls = grpc_tls(&args, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Config {
            grpc_tls,
            control_core: cores[0],
            worker_cores: cores[1..].to_vec(),
            access_mac,
            uplink_mac,
            next_hop_mac,
            uplink,
            outer_tpid,
            numa_node,
            args,
        })
    }

    /// Start-up warnings about the configuration itself.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.worker_cores.contains(&self.control_core) {
            w.push(format!(
                "--cores: the control core {} is also a worker core: gRPC and the punt pump \
                 take time from that worker (acceptable for benchmarks on small machines only)",
                self.control_core
            ));
        }
        w
    }

    /// The EAL arguments: worker cores (the first is EAL's main lcore, which runs worker 0),
    /// memory options and the two devices.
    pub fn eal_args(&self) -> Vec<String> {
        let a = &self.args;
        let cores: Vec<String> = self.worker_cores.iter().map(u32::to_string).collect();
        let mut v = vec![
            "-l".to_owned(),
            cores.join(","),
            "--main-lcore".to_owned(),
            cores[0].clone(),
        ];
        for (flag, on) in [
            ("--no-huge", a.no_huge),
            ("--no-pci", a.no_pci),
            ("--no-shconf", a.no_shconf),
            ("--in-memory", a.in_memory),
        ] {
            if on {
                v.push(flag.to_owned());
            }
        }
        if let Some(m) = a.memory_mb {
            v.push("-m".to_owned());
            v.push(m.to_string());
        }
        for dev in [&a.access, &a.uplink] {
            if dev.starts_with("net_") {
                v.push(format!("--vdev={dev}"));
            } else {
                v.push("-a".to_owned());
                v.push(dev.clone());
            }
        }
        v
    }

    /// The ethdev name of a device argument (a vdev's name before its options).
    pub fn port_name(dev: &str) -> &str {
        dev.split(',').next().unwrap_or(dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Result<Args, clap::Error> {
        args_on("0,1", extra)
    }

    fn args_on(cores: &str, extra: &[&str]) -> Result<Args, clap::Error> {
        let mut v = vec![
            "kbng-dataplane",
            "--cores",
            cores,
            "--access",
            "net_null0",
            "--uplink",
            "net_null1",
            "--next-hop-mac",
            "02:00:00:00:00:01",
        ];
        v.extend_from_slice(extra);
        Args::try_parse_from(v)
    }

    #[test]
    fn cores_naming_no_core_and_a_zero_punt_rate_are_refused() {
        for cores in ["", ",", " , "] {
            let e = Config::from_args(args_on(cores, &[]).unwrap()).unwrap_err();
            assert!(
                e.iter().any(|m| m.starts_with("--cores: ")),
                "{cores:?}: {e:?}"
            );
        }
        let e = Config::from_args(args(&["--punt-pps", "0"]).unwrap()).unwrap_err();
        assert_eq!(e, ["--punt-pps: at least 1"]);
    }

    #[test]
    fn unknown_flag_is_named() {
        let e = args(&["--sesions", "5"]).unwrap_err();
        assert!(e.to_string().contains("--sesions"), "{e}");
    }

    #[test]
    fn numa_node_is_optional_and_checked() {
        let c = Config::from_args(args(&[]).unwrap()).unwrap();
        assert_eq!(c.numa_node, None);
        let c = Config::from_args(args(&["--numa-node", "1"]).unwrap()).unwrap();
        assert_eq!(c.numa_node, Some(1));
        let c = Config::from_args(args(&["--numa-node", "-1"]).unwrap()).unwrap();
        assert_eq!(c.numa_node, None);
        let e = Config::from_args(args(&["--numa-node", "-2"]).unwrap()).unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("--numa-node: -2"), "{e:?}");
        assert!(args(&["--numa-node", "x"]).is_err());
    }

    #[test]
    fn idle_sleep_is_off_by_default_and_bounded() {
        let c = Config::from_args(args(&[]).unwrap()).unwrap();
        assert_eq!(c.args.idle_sleep_us, 0);
        let c = Config::from_args(args(&["--idle-sleep-us", "20"]).unwrap()).unwrap();
        assert_eq!(c.args.idle_sleep_us, 20);
        let e = Config::from_args(args(&["--idle-sleep-us", "5000"]).unwrap()).unwrap_err();
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with("--idle-sleep-us: 5000"), "{e:?}");
        let e = args(&["--idle-sleep-us", "fast"]).unwrap_err();
        assert!(e.to_string().contains("--idle-sleep-us"), "{e}");
    }

    #[test]
    fn every_error_is_reported() {
        let a = args(&[
            "--outer-tpid",
            "0x9100",
            "--access-mac",
            "zz",
            "--sessions",
            "0",
        ])
        .unwrap();
        let e = Config::from_args(a).unwrap_err();
        for flag in ["--outer-tpid: ", "--access-mac", "--sessions: "] {
            let n = e.iter().filter(|m| m.starts_with(flag)).count();
            assert_eq!(n, 1, "{flag}: {e:?}");
        }
        assert_eq!(e.len(), 3, "{e:?}");
    }

    /// The three TLS flags go together, need a TCP listener, and name an unreadable or
    /// malformed file; the binary stops on each. (A valid set is used end to end by
    /// cnf-control's `dataplane_mtls` test.)
    #[test]
    fn grpc_tls_flags_are_validated_naming_the_flag() {
        let dir = std::env::temp_dir().join(format!("kbng-dp-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not PEM").unwrap();
        let junk = junk.to_str().unwrap();
        let absent = dir.join("absent.pem");
        let absent = absent.to_str().unwrap();
        let next_hop = ["--next-hop-mac", "02:00:00:00:00:01"];
        let err = |extra: &[&str]| {
            let mut v = next_hop.to_vec();
            v.extend_from_slice(extra);
            uplink_args(&v).unwrap_err().join("; ")
        };
        assert!(uplink_args(&next_hop).unwrap().grpc_tls.is_none());
        let e = err(&["--grpc-tls-cert", junk, "--grpc-tls-key", junk]);
        assert!(
            e.contains("--grpc-tls-cert, --grpc-tls-key given without --grpc-tls-client-ca"),
            "{e}"
        );
        let all = [
            "--grpc-tls-cert",
            junk,
            "--grpc-tls-key",
            junk,
            "--grpc-tls-client-ca",
        ];
        let e = err(&[&all[..], &[junk, "--grpc-listen", "unix:/run/dp.sock"]].concat());
        assert!(e.contains("TLS is for a host:port --grpc-listen"), "{e}");
        let e = err(&[&all[..], &[absent]].concat());
        assert!(
            e.starts_with("--grpc-tls-client-ca ") && e.contains("absent.pem"),
            "{e}"
        );
        let e = err(&[&all[..], &[junk]].concat());
        assert_eq!(e, "--grpc-tls-cert: no certificate in the file");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn uplink_args(extra: &[&str]) -> Result<Config, Vec<String>> {
        let mut v = vec![
            "kbng-dataplane",
            "--cores",
            "0,1",
            "--access",
            "net_null0",
            "--uplink",
            "net_null1",
        ];
        v.extend_from_slice(extra);
        Config::from_args(Args::try_parse_from(v).map_err(|e| vec![e.to_string()])?)
    }

    #[test]
    fn uplink_addressing_is_validated_naming_the_flag() {
        let c = uplink_args(&[
            "--uplink-address",
            "192.0.2.254/24",
            "--next-hop",
            "192.0.2.1",
        ])
        .unwrap();
        let u = c.uplink.unwrap();
        assert_eq!((u.address, u.prefix_len), (0xc000_02fe, 24));
        assert_eq!(u.next_hop, 0xc000_0201);
        assert_eq!(c.next_hop_mac, None);
        for (extra, flag) in [
            (&["--uplink-address", "192.0.2.254"][..], "--uplink-address"),
            (
                &["--uplink-address", "192.0.2.254/33"][..],
                "--uplink-address",
            ),
            (&["--next-hop", "192.0.2.1"][..], "--next-hop"),
            (&["--uplink-address", "192.0.2.254/24"][..], "--next-hop"),
            (&[][..], "--next-hop"),
            (
                &[
                    "--uplink-address",
                    "192.0.2.254/24",
                    "--next-hop",
                    "198.51.100.1",
                ][..],
                "--next-hop",
            ),
            (
                &[
                    "--uplink-address",
                    "192.0.2.254/24",
                    "--next-hop",
                    "192.0.2.255",
                ][..],
                "--next-hop",
            ),
            (
                &[
                    "--uplink-address",
                    "192.0.2.254/24",
                    "--next-hop",
                    "192.0.2.254",
                ][..],
                "--next-hop",
            ),
            (&["--next-hop", "192.0.2.300"][..], "--next-hop"),
            (
                &[
                    "--next-hop-mac",
                    "02:00:00:00:00:01",
                    "--icmp-error-pps",
                    "0",
                ][..],
                "--icmp-error-pps",
            ),
            (
                &[
                    "--next-hop-mac",
                    "02:00:00:00:00:01",
                    "--next-hop-reachable-secs",
                    "0",
                ][..],
                "--next-hop-reachable-secs",
            ),
        ] {
            let e = uplink_args(extra).unwrap_err();
            assert!(e.iter().any(|m| m.contains(flag)), "{extra:?}: {e:?}");
        }
        // A fixed MAC needs no next-hop address.
        let c = uplink_args(&["--next-hop-mac", "02:00:00:00:00:01"]).unwrap();
        assert_eq!(c.next_hop_mac, Some([2, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn devices_from_the_device_plugin_env() {
        let env = |v: &str| {
            (v == "PCIDEVICE_INTEL_COM_POOL").then(|| "0000:3b:02.1,0000:3b:02.2".to_owned())
        };
        let r = |dev: &str| resolve_device("--access", dev, env);
        assert_eq!(r("env:PCIDEVICE_INTEL_COM_POOL").unwrap(), "0000:3b:02.1");
        assert_eq!(r("env:PCIDEVICE_INTEL_COM_POOL:1").unwrap(), "0000:3b:02.2");
        assert_eq!(r("net_null0").unwrap(), "net_null0");
        let e = r("env:PCIDEVICE_NOPE").unwrap_err();
        assert!(
            e.contains("--access") && e.contains("$PCIDEVICE_NOPE is not set"),
            "{e}"
        );
        let e = r("env:PCIDEVICE_INTEL_COM_POOL:2").unwrap_err();
        assert!(e.contains("no address #2"), "{e}");
        let e = r("env:PCIDEVICE_INTEL_COM_POOL:x").unwrap_err();
        assert!(e.contains("not an index"), "{e}");
    }

    #[test]
    fn auto_cores_come_from_the_affinity_mask() {
        let mine = core_affinity::get_core_ids().unwrap();
        let c = Config::from_args(
            args(&[])
                .map(|mut a| {
                    a.cores = "auto:1".into();
                    a
                })
                .unwrap(),
        )
        .unwrap();
        assert_eq!(c.control_core, mine[0].id as u32);
        assert_eq!(c.worker_cores, vec![mine[1].id as u32]);
        let e = Config::from_args(
            args(&[])
                .map(|mut a| {
                    a.cores = format!("auto:{}", mine.len());
                    a
                })
                .unwrap(),
        )
        .unwrap_err();
        assert!(e[0].contains("affinity mask has"), "{e:?}");
    }

    #[test]
    fn eal_args_from_config() {
        let c = Config::from_args(args(&["--no-huge", "-m", "512"]).unwrap()).unwrap();
        assert_eq!(c.control_core, 0);
        assert_eq!(c.worker_cores, vec![1]);
        let e = c.eal_args();
        assert!(e.contains(&"--vdev=net_null0".to_owned()));
        assert!(e.contains(&"--no-huge".to_owned()));
        assert_eq!(
            Config::port_name("net_af_packet0,iface=d0"),
            "net_af_packet0"
        );
    }
}
