//! The control pod's configuration file, in exactly the format `kbng-control` reads
//! (`cnf-control/src/config.rs`, which refuses unknown fields). `tests/operator/run.sh` feeds
//! the ConfigMap the operator wrote to the real binary under `--check-config`.
//!
//! Plans go over whole: each direction's policy in the SubscriberPlan's own shape, which the
//! control checks by the same rules ([`kbng_crds::policy`]). In relay mode the relay agent
//! address defaults to the first pool's gateway, as the control does.

use kbng_crds::bng::{
    DhcpMode, GardenProtocol, PoolSpec, RadiusAuthMethod, UnknownSubscriberPolicy,
};
use kbng_crds::plan::DirectionPolicy;
use serde::Serialize;

use super::{Base, Inputs, dataplane_name};
use crate::binaries::{control, dataplane};
use crate::plan::Plan;

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlanFile {
    pub name: String,
    pub id: u32,
    pub upstream: DirectionPolicy,
    pub downstream: DirectionPolicy,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GardenRuleFile {
    pub prefix: String,
    /// IP protocol number; 0 is any.
    pub protocol: u8,
    /// 0 is any.
    pub port: u16,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WalledGardenFile {
    pub portal_url: String,
    pub allowed: Vec<GardenRuleFile>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LicenceFile {
    pub file: String,
    pub public_key_file: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DhcpFile {
    pub mode: &'static str,
}

/// The control's `pacing` (without `maxWaitMs`, the control's default).
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PacingFile {
    pub rate_per_sec: u32,
    pub burst: u32,
    pub queue: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u32>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RelayFile {
    pub servers: Vec<String>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RadiusServerFile {
    pub address: String,
    pub accounting_address: String,
    pub secret_file: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AccountingFile {
    pub interim_secs: u32,
    pub counters_read_secs: u32,
}

/// The control's `dataplaneTls`: the mounted `dataplane.grpcTls` Secret.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataplaneTlsFile {
    pub ca_file: String,
    pub cert_file: String,
    pub key_file: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DasClientFile {
    pub address: String,
    pub secret_file: String,
}

/// The control's Dynamic Authorization Server (RFC 5176).
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DasFile {
    pub listen: String,
    pub clients: Vec<DasClientFile>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RadiusFile {
    pub servers: Vec<RadiusServerFile>,
    pub nas_identifier: String,
    /// `pap` or `chap`, as the control's `aaa.radius.authMethod` reads it.
    pub auth_method: RadiusAuthMethod,
    pub accounting: AccountingFile,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub das: Option<DasFile>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AaaFile {
    pub radius: RadiusFile,
}

/// `kbng-control`'s `ConfigFile`.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ControlConfig<'a> {
    /// Each dataplane pod by its stable DNS name (StatefulSet pod behind a headless Service).
    pub dataplanes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplane_tls: Option<DataplaneTlsFile>,
    pub pools: &'a [PoolSpec],
    /// Only validated plans; a missing or invalid one is named in the BNG's status instead.
    pub plans: Vec<PlanFile>,
    pub default_plan: String,
    pub unknown_subscribers: &'static str,
    /// The mounted records of `aaa.subscribers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribers_file: Option<String>,
    /// `aaa.subscribers.maxRemovalPercent`, when set (the control's default otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribers_max_removal_percent: Option<u8>,
    pub option82_identity: bool,
    pub line_identity: bool,
    pub licence: LicenceFile,
    pub store: String,
    /// Without it, the control's default (a sync at every commit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_sync_interval_ms: Option<u32>,
    pub api_listen: String,
    pub api_token_file: String,
    pub walled_garden: WalledGardenFile,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing: Option<PacingFile>,
    /// Without it, the control's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions_per_line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<DhcpFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayFile>,
    /// RADIUS servers (and dynamic-authorization clients) in `aaa.mode: radius`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aaa: Option<AaaFile>,
}

/// `http://<pod>.<service>.<namespace>.svc:<port>` of dataplane pod `i`, `https://` with
/// TLS (the certificate's `*.<service>.<namespace>.svc` covers every pod).
pub(crate) fn dataplane_address(base: &Base, i: u32, tls: bool) -> String {
    let sts = dataplane_name(&base.bng);
    format!(
        "{}://{sts}-{i}.{sts}.{}.svc:{}",
        if tls { "https" } else { "http" },
        base.namespace,
        dataplane::GRPC_PORT
    )
}

fn plan_file(p: &Plan) -> PlanFile {
    PlanFile {
        name: p.name.clone(),
        id: p.plan_id,
        upstream: p.upstream.policy(),
        downstream: p.downstream.policy(),
    }
}

/// The plan of a known subscriber whose record names none: the BNG's `aaa.defaultPlan` when
/// it is among the valid plans, else the first valid plan. `None` without any valid plan (the
/// BNG is then Stalled on its plans).
pub fn default_plan(inputs: &Inputs<'_>) -> Option<String> {
    let wanted = inputs.bng.spec.aaa.default_plan.as_ref().map(|r| &r.name);
    inputs
        .plans
        .iter()
        .find(|p| Some(&p.name) == wanted)
        .or_else(|| inputs.plans.first())
        .map(|p| p.name.clone())
}

pub(crate) fn render<'a>(base: &Base, inputs: &'a Inputs<'a>) -> ControlConfig<'a> {
    let spec = &inputs.bng.spec;
    ControlConfig {
        dataplanes: (0..spec.dataplane.replicas)
            .map(|i| dataplane_address(base, i, spec.dataplane.grpc_tls.is_some()))
            .collect(),
        dataplane_tls: spec.dataplane.grpc_tls.as_ref().map(|_| {
            use crate::binaries::grpc_tls::{CA, CERT, KEY, path};
            DataplaneTlsFile {
                ca_file: path(CA),
                cert_file: path(CERT),
                key_file: path(KEY),
            }
        }),
        pools: &spec.pools,
        plans: inputs.plans.iter().map(plan_file).collect(),
        default_plan: default_plan(inputs).unwrap_or_default(),
        unknown_subscribers: match spec.aaa.unknown_subscribers {
            UnknownSubscriberPolicy::Captive => "captive",
            UnknownSubscriberPolicy::Reject => "reject",
        },
        subscribers_file: spec
            .aaa
            .subscribers
            .as_ref()
            .map(|s| format!("{}/{}", control::SUBSCRIBERS_DIR, s.key)),
        subscribers_max_removal_percent: spec
            .aaa
            .subscribers
            .as_ref()
            .and_then(|s| s.max_removal_percent),
        option82_identity: spec.dhcp.option82_identity,
        line_identity: spec.dhcp.line_identity,
        licence: LicenceFile {
            file: control::licence_path(),
            public_key_file: control::public_key_path(),
        },
        store: control::store_path(),
        store_sync_interval_ms: spec.dhcp.lease_sync_interval_ms,
        api_listen: format!("0.0.0.0:{}", control::ADMIN_PORT),
        api_token_file: control::api_token_path(),
        walled_garden: WalledGardenFile {
            portal_url: spec.walled_garden.portal_url.clone(),
            allowed: spec
                .walled_garden
                .allowed
                .iter()
                .map(|a| GardenRuleFile {
                    prefix: a.prefix.clone(),
                    protocol: match a.protocol {
                        GardenProtocol::Any => 0,
                        GardenProtocol::Tcp => 6,
                        GardenProtocol::Udp => 17,
                    },
                    port: a.port.unwrap_or(0),
                })
                .collect(),
        },
        pacing: spec.dhcp.pacing.as_ref().map(|p| PacingFile {
            rate_per_sec: p.rate_per_sec,
            burst: p.burst,
            queue: p.queue,
            max_wait_ms: p.max_wait_ms,
        }),
        max_sessions_per_line: spec.dhcp.max_sessions_per_line,
        dhcp: (spec.dhcp.mode == DhcpMode::Relay).then_some(DhcpFile { mode: "relay" }),
        relay: (spec.dhcp.mode == DhcpMode::Relay).then(|| RelayFile {
            servers: spec.dhcp.relay_servers.clone(),
        }),
        aaa: spec.aaa.radius.as_ref().map(|r| AaaFile {
            radius: RadiusFile {
                servers: r
                    .servers
                    .iter()
                    .map(|s| RadiusServerFile {
                        address: format!("{}:{}", s.address, s.auth_port),
                        accounting_address: format!("{}:{}", s.address, s.acct_port),
                        secret_file: radius_secret_file(),
                    })
                    .collect(),
                nas_identifier: r.nas_identifier.clone(),
                auth_method: r.auth_method,
                accounting: AccountingFile {
                    interim_secs: r.interim_interval_secs,
                    counters_read_secs: r.counters_read_interval_secs,
                },
                das: r.dynamic_authorization.as_ref().map(|d| DasFile {
                    listen: format!("0.0.0.0:{}", d.port),
                    clients: d
                        .clients
                        .iter()
                        .map(|c| DasClientFile {
                            address: c.address.clone(),
                            secret_file: radius_secret_file(),
                        })
                        .collect(),
                }),
            },
        }),
    }
}

/// Every RADIUS peer, servers and dynamic-authorization clients, shares the one Secret
/// mounted at [`control::RADIUS_SECRET_DIR`].
fn radius_secret_file() -> String {
    format!(
        "{}/{}",
        control::RADIUS_SECRET_DIR,
        control::RADIUS_SECRET_FILE
    )
}

/// FNV-1a, 64 bit: a hash that is the same in every build, for the pod template annotation
/// that restarts the control pod when its configuration file changes (it reads it at start).
pub fn fnv1a(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}
