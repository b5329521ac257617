//! `--numa-node N`: the NUMA node the operator placed this dataplane on (under the kubelet's
//! single-numa-node topology policy its exclusive cores, hugepages and VFs all come from that
//! node). The dataplane refuses to start when a worker core or a port sits on another node,
//! because every packet would then cross the interconnect; `-1` (the default) checks nothing
//! and only warns on a mismatch between workers and ports.
//!
//! A resource whose node is unknown matches any node: DPDK reports `SOCKET_ID_ANY` for virtual
//! devices (`net_null`, `net_af_packet`, ...), and sysfs reads `numa_node` -1 for PCI devices
//! of single-node machines; neither can be on the wrong node.
//!
//! Checked twice: by `--check-config` from sysfs (no EAL), and at start-up from EAL's own view
//! (`rte_lcore_to_socket_id`, `rte_eth_dev_socket_id`).

use std::path::Path;

use crate::config::Config;

/// A resource ("worker core 3", "port 0000:3b:02.1") and its NUMA node (`None`: unknown).
pub type Placed = (String, Option<u32>);

/// Every resource not on node `want`, as errors naming the flag; nothing when `want` is
/// `None` (`--numa-node -1`).
pub fn check(want: Option<u32>, placed: &[Placed]) -> Result<(), Vec<String>> {
    let Some(want) = want else {
        return Ok(());
    };
    let errors: Vec<String> = placed
        .iter()
        .filter_map(|(what, node)| match node {
            Some(n) if *n != want => Some(format!(
                "--numa-node {want}: {what} is on NUMA node {n}; refusing to start (fix the \
                 core list or the device, or pass --numa-node -1 to skip the check)"
            )),
            _ => None,
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// DPDK's answer for a socket: `SOCKET_ID_ANY` (-1, read as `u32::MAX`) is unknown.
pub fn dpdk_node(socket: Option<u32>) -> Option<u32> {
    socket.filter(|&s| s != u32::MAX)
}

/// The NUMA node of CPU `cpu` from sysfs (`<sys>/devices/system/cpu/cpuN/nodeM`).
pub fn cpu_node(sys: &Path, cpu: u32) -> Option<u32> {
    std::fs::read_dir(sys.join(format!("devices/system/cpu/cpu{cpu}")))
        .ok()?
        .flatten()
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
}

/// The NUMA node of a device argument: a PCI address's `numa_node` in sysfs (-1: unknown); a
/// vdev (`net_*`) has none.
pub fn device_node(sys: &Path, dev: &str) -> Option<u32> {
    if dev.starts_with("net_") {
        return None;
    }
    let addr = Config::port_name(dev);
    let text = std::fs::read_to_string(sys.join(format!("bus/pci/devices/{addr}/numa_node")));
    let n: i64 = text.ok()?.trim().parse().ok()?;
    u32::try_from(n).ok()
}

/// What `--check-config` checks: the worker cores and both devices as sysfs places them.
pub fn sysfs_placement(cfg: &Config, sys: &Path) -> Vec<Placed> {
    let cores = cfg
        .worker_cores
        .iter()
        .map(|&c| (format!("worker core {c}"), cpu_node(sys, c)));
    let ports = [&cfg.args.access, &cfg.args.uplink]
        .into_iter()
        .map(|d| (format!("port {d}"), device_node(sys, d)));
    cores.chain(ports).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_known_other_node_is_refused() {
        let placed = vec![
            ("worker core 1".to_owned(), Some(0)),
            ("port net_null0".to_owned(), None),
            ("port 0000:3b:02.1".to_owned(), Some(1)),
        ];
        assert_eq!(check(None, &placed), Ok(()));
        let e = check(Some(0), &placed).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("--numa-node 0: port 0000:3b:02.1 is on NUMA node 1"));
        let e = check(Some(1), &placed).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("worker core 1 is on NUMA node 0"));
        assert_eq!(check(Some(1), &placed[1..]), Ok(()));
        assert_eq!(dpdk_node(Some(u32::MAX)), None);
        assert_eq!(dpdk_node(Some(1)), Some(1));
    }

    #[test]
    fn sysfs_nodes_of_cpus_and_pci_devices() {
        let sys = std::env::temp_dir().join(format!("kbng-numa-test-{}", std::process::id()));
        let mk = |p: &str| std::fs::create_dir_all(sys.join(p)).unwrap();
        mk("devices/system/cpu/cpu2/node1");
        mk("devices/system/cpu/cpu0/node0");
        mk("bus/pci/devices/0000:3b:02.1");
        mk("bus/pci/devices/0000:3b:02.2");
        std::fs::write(sys.join("bus/pci/devices/0000:3b:02.1/numa_node"), "1\n").unwrap();
        std::fs::write(sys.join("bus/pci/devices/0000:3b:02.2/numa_node"), "-1\n").unwrap();
        assert_eq!(cpu_node(&sys, 2), Some(1));
        assert_eq!(cpu_node(&sys, 0), Some(0));
        assert_eq!(cpu_node(&sys, 7), None);
        assert_eq!(device_node(&sys, "0000:3b:02.1"), Some(1));
        assert_eq!(device_node(&sys, "0000:3b:02.2"), None);
        assert_eq!(device_node(&sys, "net_af_packet0,iface=veth0"), None);
        std::fs::remove_dir_all(&sys).unwrap();
    }
}
