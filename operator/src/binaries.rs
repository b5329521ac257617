//! The command lines of `kbng-control` and `kbng-dataplane` as the operator starts them.
//!
//! Every flag, port, path and environment variable name the operator hands the two binaries
//! is in this file and nowhere else, so aligning with their CLIs is a one-file change.

use kbng_crds::bng::DataplaneSpec;

/// Where the control pod finds its configuration and keeps its session store.
pub mod control {
    pub const BINARY: &str = "kbng-control";
    pub const CONTAINER: &str = "control";
    pub const CONFIG_DIR: &str = "/etc/kbng";
    pub const CONFIG_KEY: &str = "control.json";
    pub const STORE_DIR: &str = "/var/lib/kbng";
    /// The control pod's admin endpoint (health, drain, metrics).
    pub const ADMIN_PORT: i32 = 8080;

    pub fn command() -> Vec<String> {
        vec![BINARY.to_string()]
    }

    pub fn args() -> Vec<String> {
        [
            "--config",
            &format!("{CONFIG_DIR}/{CONFIG_KEY}"),
            "--store-dir",
            STORE_DIR,
            "--admin-listen",
            &format!("0.0.0.0:{ADMIN_PORT}"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// How a dataplane pod is told its cores, NUMA node, hugepages and devices.
pub mod dataplane {
    use super::*;

    pub const BINARY: &str = "kbng-dataplane";
    pub const CONTAINER: &str = "dataplane";
    /// The gRPC server the control pod programs the dataplane through (`kbng.dataplane.v1`).
    pub const GRPC_PORT: i32 = 50051;
    pub const HUGEPAGES_DIR: &str = "/dev/hugepages";
    /// DPDK's runtime directory; writable although the root filesystem is read-only.
    pub const RUNTIME_DIR: &str = "/var/run/dpdk";
    pub const ENV_POD_NAME: &str = "POD_NAME";
    /// Worker lcores to start (the main lcore comes on top).
    pub const ENV_WORKER_CORES: &str = "KBNG_WORKER_CORES";
    /// The NUMA node cores, hugepages and VFs must share; empty when the spec leaves it to
    /// the kubelet's topology manager (the dataplane then reads it from the VF's sysfs node).
    pub const ENV_NUMA_NODE: &str = "KBNG_NUMA_NODE";
    /// Names of the variables the SR-IOV device plugin sets to the allocated VFs' PCI
    /// addresses. Kubernetes cannot expand those into `args` (they are added by the kubelet
    /// at start, not declared in the pod), so the dataplane reads them itself.
    pub const ENV_ACCESS_PCI_VAR: &str = "KBNG_ACCESS_PCI_ENV";
    pub const ENV_UPLINK_PCI_VAR: &str = "KBNG_UPLINK_PCI_ENV";

    /// The variable the SR-IOV network device plugin exports for a resource:
    /// `intel.com/sriov_access` -> `PCIDEVICE_INTEL_COM_SRIOV_ACCESS`.
    pub fn pci_env_var(resource: &str) -> String {
        let mut out = String::from("PCIDEVICE_");
        out.extend(resource.chars().map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            'A'..='Z' | '0'..='9' => c,
            _ => '_',
        }));
        out
    }

    /// Hugepage memory per pod in MiB.
    pub fn hugepages_mib(spec: &DataplaneSpec) -> u64 {
        u64::from(spec.hugepages.count) * spec.hugepages.size.bytes() / (1 << 20)
    }

    /// The EAL arguments. The core list is deliberately not here: the kubelet's static CPU
    /// manager picks the exclusive cores when the container starts, so `--lcores-from-cpuset`
    /// tells the dataplane to build `-l` from its own affinity mask (first core = main lcore).
    /// With a NUMA node given, all hugepage memory is reserved on that socket only, so a
    /// mempool can never land on the far node.
    pub fn eal_args(spec: &DataplaneSpec) -> String {
        let mut eal = vec![
            format!("--huge-dir={HUGEPAGES_DIR}"),
            format!("--file-prefix=$({ENV_POD_NAME})"),
        ];
        if let Some(node) = spec.numa_node {
            let mut per_socket = vec!["0".to_string(); node as usize + 1];
            per_socket[node as usize] = hugepages_mib(spec).to_string();
            eal.push(format!("--socket-mem={}", per_socket.join(",")));
            eal.push(format!("--socket-limit={}", per_socket.join(",")));
        }
        eal.join(" ")
    }

    pub fn command() -> Vec<String> {
        vec![BINARY.to_string()]
    }

    pub fn args(spec: &DataplaneSpec) -> Vec<String> {
        vec![
            "--grpc-listen".into(),
            format!("0.0.0.0:{GRPC_PORT}"),
            "--eal-args".into(),
            eal_args(spec),
            "--lcores-from-cpuset".into(),
            "--workers".into(),
            spec.worker_cores.to_string(),
            "--rx-descriptors".into(),
            spec.queues.rx_descriptors.to_string(),
            "--tx-descriptors".into(),
            spec.queues.tx_descriptors.to_string(),
            "--session-capacity".into(),
            spec.session_capacity.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::dataplane::*;

    #[test]
    fn pci_env_var_follows_the_device_plugin() {
        assert_eq!(
            pci_env_var("intel.com/sriov_access"),
            "PCIDEVICE_INTEL_COM_SRIOV_ACCESS"
        );
        assert_eq!(
            pci_env_var("mellanox.com/cx6-up.link"),
            "PCIDEVICE_MELLANOX_COM_CX6_UP_LINK"
        );
    }
}
