//! The command lines of `kbng-control` and `kbng-dataplane` as the operator starts them.
//!
//! Every flag, port, path and environment variable name the operator hands the two binaries
//! is in this file and nowhere else. They are the binaries' real flags (`cnf-control/src/main.rs`,
//! `cnf-dataplane/src/config.rs`): `tests/operator/run.sh` runs both real binaries with the
//! arguments of the workloads the operator created, under `--check-config`, so drift fails.

use kbng_crds::bng::DataplaneSpec;

/// What both binaries share: Prometheus `/metrics` and the standard OpenTelemetry variables
/// (read by `kbng-telemetry`: `OTEL_*`, and `K8S_*` from the downward API).
pub mod telemetry {
    /// Both binaries serve `GET /metrics` here (`--metrics-listen`); the port is named
    /// [`METRICS_PORT_NAME`] so a ServiceMonitor or PodMonitor can select it by name.
    pub const METRICS_PORT: i32 = 9090;
    pub const METRICS_PORT_NAME: &str = "metrics";
    pub const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
    pub const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
    pub const ENV_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
    pub const ENV_K8S_POD_NAME: &str = "K8S_POD_NAME";
    pub const ENV_K8S_POD_UID: &str = "K8S_POD_UID";
    pub const ENV_K8S_NAMESPACE_NAME: &str = "K8S_NAMESPACE_NAME";
    pub const ENV_K8S_NODE_NAME: &str = "K8S_NODE_NAME";

    pub fn metrics_args() -> [String; 2] {
        ["--metrics-listen".into(), format!("0.0.0.0:{METRICS_PORT}")]
    }
}

/// Mutual TLS between the control and the dataplanes: the BNG's `dataplane.grpcTls` Secret,
/// mounted read-only in both pods (the dataplane's `--grpc-tls-*` flags, the control's
/// `dataplaneTls`).
pub mod grpc_tls {
    pub const DIR: &str = "/etc/kbng-grpc-tls";
    pub const CERT: &str = "tls.crt";
    pub const KEY: &str = "tls.key";
    pub const CA: &str = "ca.crt";

    pub fn path(file: &str) -> String {
        format!("{DIR}/{file}")
    }
}

/// Where the control pod finds its configuration and keeps its session store.
pub mod control {
    pub const BINARY: &str = "kbng-control";
    pub const CONTAINER: &str = "control";
    pub const CONFIG_DIR: &str = "/etc/kbng";
    /// The configuration file (`cnf-control/src/config.rs`, JSON is read as YAML).
    pub const CONFIG_KEY: &str = "control.json";
    /// The BNG's signed Licence (the whole resource, as JSON) and the public key it must
    /// verify against (base64, the operator's own): the control verifies the licence itself
    /// and re-reads both every second, so a licence change needs no restart. The licence key
    /// is absent when the BNG references no Licence or it does not exist; the control then
    /// runs on the free baseline and says which file it missed.
    pub const LICENCE_KEY: &str = "licence.json";
    pub const PUBLIC_KEY_KEY: &str = "licence-public.key";
    /// Where the RADIUS shared secret (the BNG's `aaa.radius.secretRef`) is mounted.
    pub const RADIUS_SECRET_DIR: &str = "/etc/kbng-radius";
    pub const RADIUS_SECRET_FILE: &str = "secret";
    /// Where the ConfigMap of subscriber records (the BNG's `aaa.subscribers`) is mounted.
    pub const SUBSCRIBERS_DIR: &str = "/etc/kbng-subscribers";
    pub const STORE_DIR: &str = "/var/lib/kbng";
    pub const STORE_FILE: &str = "sessions.redb";
    /// The control pod's HTTP API (`/v1/status`, `/v1/sessions/drain`, ...).
    pub const ADMIN_PORT: i32 = 8080;
    /// A cheap request that goes through the control's engine task: a readiness probe that
    /// passes only when the engine answers, without the session walk `/v1/status` does, and
    /// without the API's bearer token (the kubelet holds no secret).
    pub const READY_PATH: &str = "/v1/ready";
    /// Where the admin API's bearer token (the operator's `<bng>-control-api` Secret) is
    /// mounted; every other API request must carry it.
    pub const API_TOKEN_DIR: &str = "/etc/kbng-api";
    pub const API_TOKEN_KEY: &str = "token";

    pub fn command() -> Vec<String> {
        vec![BINARY.to_string()]
    }

    pub fn config_path() -> String {
        format!("{CONFIG_DIR}/{CONFIG_KEY}")
    }

    pub fn licence_path() -> String {
        format!("{CONFIG_DIR}/{LICENCE_KEY}")
    }

    pub fn public_key_path() -> String {
        format!("{CONFIG_DIR}/{PUBLIC_KEY_KEY}")
    }

    pub fn store_path() -> String {
        format!("{STORE_DIR}/{STORE_FILE}")
    }

    pub fn api_token_path() -> String {
        format!("{API_TOKEN_DIR}/{API_TOKEN_KEY}")
    }

    /// The Secret holding a BNG's admin API token.
    pub fn api_token_secret(bng: &str) -> String {
        format!("{bng}-control-api")
    }

    /// Everything else (store, API address, dataplanes) is in the configuration file.
    pub fn args() -> Vec<String> {
        let mut args = vec!["--config".into(), config_path()];
        args.extend(super::telemetry::metrics_args());
        args
    }
}

/// How a dataplane pod is told its cores, hugepages and devices.
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

    pub fn command() -> Vec<String> {
        vec![BINARY.to_string()]
    }

    /// `--access`/`--uplink` as `env:VAR[:INDEX]`: the device plugin sets `PCIDEVICE_*` when
    /// the container starts, so the dataplane reads it itself. When both VFs come from one
    /// pool the variable lists two addresses: access takes the first, uplink the second.
    pub fn devices(spec: &DataplaneSpec) -> (String, String) {
        let access = pci_env_var(&spec.sriov.access_resource);
        let uplink = pci_env_var(&spec.sriov.uplink_resource);
        if access == uplink {
            (format!("env:{access}:0"), format!("env:{uplink}:1"))
        } else {
            (format!("env:{access}"), format!("env:{uplink}"))
        }
    }

    /// The dataplane's flags. Cores are `auto:N`: the kubelet's static CPU manager picks the
    /// exclusive cores when the container starts, and the dataplane takes its control core and
    /// N workers from its own affinity mask. `--in-memory` keeps no files in hugetlbfs or the
    /// runtime directory (read-only root filesystem, nothing to clean up after a crash).
    /// `uplink` is the BNG's `spec.uplink` address and next hop, resolved by ARP.
    pub fn args(spec: &DataplaneSpec, uplink_address: &str, next_hop: &str) -> Vec<String> {
        let (access, uplink) = devices(spec);
        let mut args: Vec<String> = vec![
            "--cores".into(),
            format!("auto:{}", spec.worker_cores),
            "--access".into(),
            access,
            "--uplink".into(),
            uplink,
            "--in-memory".into(),
            "--memory-mb".into(),
            hugepages_mib(spec).to_string(),
            "--rx-desc".into(),
            spec.queues.rx_descriptors.to_string(),
            "--tx-desc".into(),
            spec.queues.tx_descriptors.to_string(),
            "--sessions".into(),
            spec.session_capacity.to_string(),
            "--grpc-listen".into(),
            format!("0.0.0.0:{GRPC_PORT}"),
            "--dataplane-id".into(),
            format!("$({ENV_POD_NAME})"),
            "--uplink-address".into(),
            uplink_address.to_string(),
            "--next-hop".into(),
            next_hop.to_string(),
        ];
        // The dataplane refuses to start when a worker core or a port sits on another node
        // (`--check-config` checks it too); without a node it checks nothing.
        if let Some(node) = spec.numa_node {
            args.extend(["--numa-node".into(), node.to_string()]);
        }
        if spec.grpc_tls.is_some() {
            use super::grpc_tls::{CA, CERT, KEY, path};
            args.extend([
                "--grpc-tls-cert".into(),
                path(CERT),
                "--grpc-tls-key".into(),
                path(KEY),
                "--grpc-tls-client-ca".into(),
                path(CA),
            ]);
        }
        args.extend(super::telemetry::metrics_args());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::dataplane::*;
    use crate::build::tests::sample_bng;

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

    #[test]
    fn the_numa_node_is_passed_when_the_bng_names_one() {
        let mut spec = sample_bng().spec.dataplane;
        let flag = |spec: &kbng_crds::bng::DataplaneSpec| {
            let a = args(spec, "192.0.2.2/30", "192.0.2.1");
            a.iter()
                .position(|x| x == "--numa-node")
                .map(|i| a[i + 1].clone())
        };
        spec.numa_node = None;
        assert_eq!(flag(&spec), None);
        spec.numa_node = Some(1);
        assert_eq!(flag(&spec).as_deref(), Some("1"));
    }

    #[test]
    fn one_pool_for_both_vfs_splits_its_addresses() {
        let mut spec = sample_bng().spec.dataplane;
        assert_eq!(
            devices(&spec),
            (
                "env:PCIDEVICE_INTEL_COM_SRIOV_ACCESS".to_string(),
                "env:PCIDEVICE_INTEL_COM_SRIOV_UPLINK".to_string()
            )
        );
        spec.sriov.uplink_resource = spec.sriov.access_resource.clone();
        let (a, u) = devices(&spec);
        assert_eq!(a, "env:PCIDEVICE_INTEL_COM_SRIOV_ACCESS:0");
        assert_eq!(u, "env:PCIDEVICE_INTEL_COM_SRIOV_ACCESS:1");
    }
}
