use super::*;
use crate::config::SessionStore;
use crate::plan::Plan;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kbng_crds::SubscriberPlan;
use kbng_crds::bng::HugepageSize;

pub(crate) fn sample_bng() -> Bng {
    let mut bng: Bng =
        serde_yaml_ng::from_str(include_str!("../../../deploy/samples/bng.yaml")).unwrap();
    bng.metadata.uid = Some("0b1c2d3e-0000-4000-8000-000000000001".into());
    bng.metadata.generation = Some(3);
    bng
}

pub(crate) fn sample_plans() -> Vec<Plan> {
    let text = include_str!("../../../deploy/samples/plans.yaml");
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| {
            let p: SubscriberPlan = serde::Deserialize::deserialize(doc).unwrap();
            Plan::validate(&p.name_any(), &p.spec).unwrap()
        })
        .collect()
}

pub(crate) fn sample_licence() -> kbng_crds::Licence {
    let mut l: kbng_crds::Licence =
        serde_yaml_ng::from_str(include_str!("../../../deploy/samples/licence.yaml")).unwrap();
    l.metadata.uid = Some("0b1c2d3e-0000-4000-8000-0000000000aa".into());
    l.metadata.resource_version = Some("42".into());
    l
}

fn owned(bng: &Bng, config: &WorkloadConfig) -> Owned {
    let (plans, licence) = (sample_plans(), sample_licence());
    build(&Inputs {
        bng,
        plans: &plans,
        licence: Some(&licence),
        config,
    })
    .unwrap()
}

fn q(s: &str) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(s.into())
}

#[test]
fn dataplane_is_guaranteed_with_hugepages_vfs_and_integer_cpus() {
    let owned = owned(&sample_bng(), &WorkloadConfig::default());
    let pod = owned.dataplane.spec.unwrap().template.spec.unwrap();
    let res = pod.containers[0].resources.clone().unwrap();
    let want = BTreeMap::from([
        ("cpu".to_string(), q("3")),
        ("memory".to_string(), q("1024Mi")),
        ("hugepages-1Gi".to_string(), q("2Gi")),
        ("intel.com/sriov_access".to_string(), q("1")),
        ("intel.com/sriov_uplink".to_string(), q("1")),
    ]);
    assert_eq!(res.requests.as_ref(), Some(&want));
    assert_eq!(res.limits.as_ref(), Some(&want), "requests == limits");
    let huge = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "hugepages")
        .unwrap();
    assert_eq!(huge.empty_dir.unwrap().medium.as_deref(), Some("HugePages"));
    assert_eq!(
        pod.node_selector.unwrap()["feature.node.kubernetes.io/network-sriov.capable"],
        "true"
    );
    assert_eq!(pod.automount_service_account_token, Some(false));
}

#[test]
fn two_mi_pages_and_a_shared_vf_pool() {
    let mut bng = sample_bng();
    bng.spec.dataplane.hugepages.size = HugepageSize::TwoMi;
    bng.spec.dataplane.hugepages.count = 512;
    bng.spec.dataplane.sriov.uplink_resource = bng.spec.dataplane.sriov.access_resource.clone();
    let res = dataplane::resources(&bng.spec.dataplane);
    assert_eq!(res["hugepages-2Mi"], q("1024Mi"));
    assert_eq!(res["intel.com/sriov_access"], q("2"));
    assert!(!res.contains_key("hugepages-1Gi"));
}

#[test]
fn dataplane_capabilities_multus_and_numa() {
    let mut bng = sample_bng();
    bng.spec.dataplane.numa_node = Some(1);
    let owned = owned(&bng, &WorkloadConfig::default());
    let tmpl = owned.dataplane.spec.unwrap().template;
    let ann = tmpl.metadata.unwrap().annotations.unwrap();
    let nets: serde_json::Value = serde_json::from_str(&ann[dataplane::MULTUS_ANNOTATION]).unwrap();
    assert_eq!(
        nets,
        serde_json::json!([
            {"name": "sriov-access", "interface": "access0"},
            {"name": "sriov-uplink", "interface": "uplink0"}
        ])
    );
    let c = &tmpl.spec.unwrap().containers[0];
    let sc = c.security_context.clone().unwrap();
    let caps = sc.capabilities.unwrap();
    assert_eq!(
        caps.add.unwrap(),
        ["IPC_LOCK", "NET_RAW", "SYS_NICE"].map(String::from)
    );
    assert_eq!(caps.drop.unwrap(), ["ALL"]);
    assert_eq!(sc.privileged, Some(false));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    let env: Vec<_> = c.env.clone().unwrap().into_iter().map(|e| e.name).collect();
    // Its identity (for --dataplane-id) and, from build::telemetry, the OTEL_* set.
    assert_eq!(env[0], "POD_NAME");
    assert!(env.iter().any(|e| e == "OTEL_RESOURCE_ATTRIBUTES"));
    let args = c.args.clone().unwrap();
    let flag = |f: &str| args[args.iter().position(|a| a == f).unwrap() + 1].clone();
    assert_eq!(flag("--cores"), "auto:2");
    assert_eq!(flag("--access"), "env:PCIDEVICE_INTEL_COM_SRIOV_ACCESS");
    assert_eq!(flag("--uplink"), "env:PCIDEVICE_INTEL_COM_SRIOV_UPLINK");
    assert_eq!(flag("--memory-mb"), "2048");
    assert_eq!(flag("--dataplane-id"), "$(POD_NAME)");
    assert_eq!(flag("--uplink-address"), "192.0.2.2/30");
    assert_eq!(flag("--next-hop"), "192.0.2.1");
    assert!(args.contains(&"--in-memory".to_string()));
    let probe = c.readiness_probe.clone().unwrap().tcp_socket.unwrap();
    assert_eq!(probe.port, IntOrString::Int(50051));
    assert_eq!(c.command.clone().unwrap(), ["kbng-dataplane"]);
}

#[test]
fn every_object_is_owned_labelled_and_namespaced() {
    let o = owned(&sample_bng(), &WorkloadConfig::default());
    let metas = [
        &o.service_account.metadata,
        &o.role.metadata,
        &o.role_binding.metadata,
        &o.config_map.metadata,
        &o.service.metadata,
        &o.control.metadata,
        &o.dataplane.metadata,
        &o.dataplane_service.metadata,
    ];
    for m in metas {
        let owner = &m.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.kind, "BNG");
        assert_eq!(owner.name, "lab");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(m.namespace.as_deref(), Some("kbng"));
        assert_eq!(m.labels.as_ref().unwrap()[BNG_LABEL], "lab");
    }
    assert_eq!(o.control.metadata.name.as_deref(), Some("lab-control"));
    assert_eq!(o.dataplane.metadata.name.as_deref(), Some("lab-dataplane"));
}

#[test]
fn control_config_is_kbng_controls_format() {
    let o = owned(&sample_bng(), &WorkloadConfig::default());
    let data = o.config_map.data.clone().unwrap();
    let v: serde_json::Value = serde_json::from_str(&data["control.json"]).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "apiListen",
            "apiTokenFile",
            "dataplanes",
            "defaultPlan",
            "licence",
            "lineIdentity",
            "maxSessionsPerLine",
            "option82Identity",
            "pacing",
            "plans",
            "pools",
            "store",
            "unknownSubscribers",
            "walledGarden"
        ]
    );
    assert_eq!(
        v["dataplanes"],
        serde_json::json!(["http://lab-dataplane-0.lab-dataplane.kbng.svc:50051"])
    );
    assert_eq!(v["plans"][0]["name"], "basic-50m");
    // The whole plan reaches the control, each direction as the SubscriberPlan says it.
    let premium = &v["plans"][1];
    assert_eq!(premium["upstream"]["mode"], "trTCM");
    assert_eq!(premium["upstream"]["cirBps"], 200_000_000u64);
    assert_eq!(premium["upstream"]["pirBps"], 400_000_000u64);
    assert_eq!(premium["downstream"]["cirBps"], 1_000_000_000u64);
    assert_eq!(premium["downstream"]["pbsBytes"], 25_000_000u64);
    assert_eq!(premium["downstream"]["actions"]["yellow"]["dscp"], 8);
    assert_eq!(v["defaultPlan"], "basic-50m");
    assert_eq!(
        v["licence"],
        serde_json::json!({
            "file": "/etc/kbng/licence.json",
            "publicKeyFile": "/etc/kbng/licence-public.key"
        })
    );
    assert_eq!(v["store"], "/var/lib/kbng/sessions.redb");
    assert_eq!(v["walledGarden"]["allowed"][0]["protocol"], 17);
    assert_eq!(v["pools"][0]["cidr"], "100.64.0.0/16");
    assert_eq!(v["pacing"]["ratePerSec"], 2000);
    assert_eq!(v["pacing"]["maxWaitMs"], 4000);
    assert_eq!(v["maxSessionsPerLine"], 8);
    // The control reads the file at start: a change rolls its pod, a licence alone does not.
    let hash = |o: &Owned| {
        o.control
            .spec
            .clone()
            .unwrap()
            .template
            .metadata
            .unwrap()
            .annotations
            .unwrap()["kbng.dev/config-hash"]
            .clone()
    };
    let mut bng = sample_bng();
    bng.spec.walled_garden.portal_url = "http://elsewhere.example/".into();
    assert_ne!(hash(&o), hash(&owned(&bng, &WorkloadConfig::default())));
    let (bng, plans, config) = (sample_bng(), sample_plans(), WorkloadConfig::default());
    let mut licence = sample_licence();
    licence.spec.max_sessions = 5;
    for licence in [Some(&licence), None] {
        let other = build(&Inputs {
            bng: &bng,
            plans: &plans,
            licence,
            config: &config,
        })
        .unwrap();
        assert_eq!(hash(&o), hash(&other));
    }
}

#[test]
fn control_role_is_least_privilege() {
    let mut bng = sample_bng();
    let o = owned(&bng, &WorkloadConfig::default());
    let rules = o.role.rules.unwrap();
    for r in &rules {
        for verb in &r.verbs {
            assert!(
                ["get", "list", "watch", "patch", "create"].contains(&verb.as_str()),
                "{verb}"
            );
        }
        assert!(!r.resources.as_ref().unwrap().contains(&"secrets".into()));
    }
    assert!(
        !rules.iter().any(|r| r.verbs.contains(&"patch".to_string())
            && r.resources.as_ref().unwrap().contains(&"pods".to_string())),
        "the drain goes through the control's API: no pod is written"
    );
    // With RADIUS, exactly the referenced secret becomes readable.
    bng.spec.aaa.radius = Some(kbng_crds::bng::RadiusSpec {
        servers: vec![],
        secret_ref: kbng_crds::common::SecretKeyRef {
            name: "radius".into(),
            key: "secret".into(),
        },
        nas_identifier: "lab".into(),
        interim_interval_secs: 300,
        counters_read_interval_secs: 30,
        auth_method: kbng_crds::bng::RadiusAuthMethod::Pap,
        dynamic_authorization: None,
    });
    let rules = owned(&bng, &WorkloadConfig::default()).role.rules.unwrap();
    let secrets = rules
        .iter()
        .find(|r| r.resources.as_ref().unwrap().contains(&"secrets".into()))
        .unwrap();
    assert_eq!(secrets.resource_names.as_ref().unwrap(), &["radius"]);
}

#[test]
fn session_store_volume_follows_config() {
    let o = owned(&sample_bng(), &WorkloadConfig::default());
    let sts = o.control.spec.unwrap();
    let claims = sts.volume_claim_templates.unwrap();
    assert_eq!(claims[0].metadata.name.as_deref(), Some("session-store"));
    let cfg = WorkloadConfig {
        session_store: SessionStore::EmptyDir,
        ..WorkloadConfig::default()
    };
    let sts = owned(&sample_bng(), &cfg).control.spec.unwrap();
    assert!(sts.volume_claim_templates.is_none());
    let vols = sts.template.spec.unwrap().volumes.unwrap();
    assert!(
        vols.iter()
            .any(|v| v.name == "session-store" && v.empty_dir.is_some())
    );
}

#[test]
fn a_bng_without_uid_is_refused() {
    let mut bng = sample_bng();
    bng.metadata.uid = None;
    let plans = sample_plans();
    let err = build(&Inputs {
        bng: &bng,
        plans: &plans,
        licence: None,
        config: &WorkloadConfig::default(),
    })
    .unwrap_err();
    assert_eq!(err, BuildError::MissingMeta("uid"));
}

#[test]
fn relay_mode_names_the_servers_and_lets_the_control_bind_port_67() {
    let mut bng = sample_bng();
    let o = owned(&bng, &WorkloadConfig::default());
    let v: serde_json::Value =
        serde_json::from_str(&o.config_map.data.unwrap()["control.json"]).unwrap();
    assert!(
        v.get("dhcp").is_none() && v.get("relay").is_none(),
        "server mode: {v}"
    );
    let pod = o.control.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.security_context.unwrap().sysctls, None);

    bng.spec.dhcp.mode = kbng_crds::bng::DhcpMode::Relay;
    bng.spec.dhcp.relay_servers = vec!["192.0.2.67".into()];
    let o = owned(&bng, &WorkloadConfig::default());
    let v: serde_json::Value =
        serde_json::from_str(&o.config_map.data.unwrap()["control.json"]).unwrap();
    assert_eq!(v["dhcp"], serde_json::json!({"mode": "relay"}));
    assert_eq!(v["relay"], serde_json::json!({"servers": ["192.0.2.67"]}));
    let sysctls = o
        .control
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .security_context
        .unwrap()
        .sysctls;
    assert_eq!(sysctls.unwrap()[0].value, "67");
}

#[test]
fn radius_servers_and_their_mounted_secret() {
    let mut bng = sample_bng();
    bng.spec.aaa.mode = kbng_crds::bng::AaaMode::Radius;
    bng.spec.aaa.radius = Some(kbng_crds::bng::RadiusSpec {
        servers: vec![kbng_crds::bng::RadiusServer {
            address: "192.0.2.10".into(),
            auth_port: 1812,
            acct_port: 1813,
        }],
        secret_ref: kbng_crds::common::SecretKeyRef {
            name: "radius".into(),
            key: "shared".into(),
        },
        nas_identifier: "lab".into(),
        interim_interval_secs: 600,
        counters_read_interval_secs: 20,
        auth_method: kbng_crds::bng::RadiusAuthMethod::Pap,
        dynamic_authorization: None,
    });
    let o = owned(&bng, &WorkloadConfig::default());
    let v: serde_json::Value =
        serde_json::from_str(&o.config_map.data.unwrap()["control.json"]).unwrap();
    assert_eq!(
        v["aaa"],
        serde_json::json!({"radius": {
            "servers": [{"address": "192.0.2.10:1812", "accountingAddress": "192.0.2.10:1813",
                         "secretFile": "/etc/kbng-radius/secret"}],
            "nasIdentifier": "lab", "authMethod": "pap", "accounting": {"interimSecs": 600, "countersReadSecs": 20}}})
    );
    let pod = o.control.spec.unwrap().template.spec.unwrap();
    let vol = pod
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "radius-secret")
        .unwrap();
    let secret = vol.secret.unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("radius"));
    assert_eq!(secret.items.unwrap()[0].key, "shared");
    let mount = pod.containers[0].volume_mounts.clone().unwrap();
    assert!(mount.iter().any(|m| m.mount_path == "/etc/kbng-radius"));
}

/// `aaa.subscribers` mounts its ConfigMap's key read-only where `subscribersFile` names it;
/// without it the control has neither.
#[test]
fn a_subscribers_configmap_is_mounted_where_the_control_reads_it() {
    let mut bng = sample_bng();
    let mounted = |o: &Owned| {
        let pod = o.control.spec.clone().unwrap().template.spec.unwrap();
        let vol = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "subscribers")
            .and_then(|v| v.config_map.clone())
            .map(|c| (c.name, c.items.unwrap_or_default()[0].path.clone()));
        let mount = pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "subscribers")
            .map(|m| (m.mount_path.clone(), m.read_only));
        (vol, mount)
    };
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(mounted(&o), (None, None));
    assert_eq!(control_json(&bng).get("subscribersFile"), None);

    bng.spec.aaa.subscribers = Some(kbng_crds::bng::SubscribersSource {
        config_map: "lab-subscribers".into(),
        key: "records.csv".into(),
        max_removal_percent: Some(25),
    });
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(
        mounted(&o),
        (
            Some(("lab-subscribers".into(), "records.csv".into())),
            Some(("/etc/kbng-subscribers".into(), Some(true)))
        )
    );
    assert_eq!(
        control_json(&bng)["subscribersFile"],
        "/etc/kbng-subscribers/records.csv"
    );
    assert_eq!(control_json(&bng)["subscribersMaxRemovalPercent"], 25);
    if let Some(s) = bng.spec.aaa.subscribers.as_mut() {
        s.max_removal_percent = None;
    }
    assert_eq!(
        control_json(&bng).get("subscribersMaxRemovalPercent"),
        None,
        "the control's default"
    );
}

/// `bng` authorised by one RADIUS server, taking CoA and Disconnect as `das` says.
fn radius_with_das(bng: &mut Bng, das: serde_json::Value) {
    bng.spec.aaa.mode = kbng_crds::bng::AaaMode::Radius;
    bng.spec.aaa.radius = Some(
        serde_json::from_value(serde_json::json!({
            "servers": [{"address": "192.0.2.10"}],
            "secretRef": {"name": "radius", "key": "shared"},
            "nasIdentifier": "lab",
            "dynamicAuthorization": das
        }))
        .unwrap(),
    );
}

/// `aaa.radius.dynamicAuthorization` becomes the control's DAS listener (clients signing
/// with the mounted RADIUS secret), a named UDP container port and a port of the headless
/// Service; without it there is neither.
#[test]
fn dynamic_authorization_listener_port_and_clients() {
    let mut bng = sample_bng();
    radius_with_das(
        &mut bng,
        serde_json::json!({"clients": [{"address": "192.0.2.10"}, {"address": "192.0.2.11"}]}),
    );
    let udp = |o: &Owned| {
        let pod = o.control.spec.clone().unwrap().template.spec.unwrap();
        let ports = pod.containers[0].ports.clone().unwrap();
        let svc = o.service.spec.clone().unwrap().ports.unwrap();
        let named = |n: Option<&String>, p: &Option<String>| {
            n.map(String::as_str) == Some("radius-das") && p.as_deref() == Some("UDP")
        };
        (
            ports
                .iter()
                .filter(|p| named(p.name.as_ref(), &p.protocol))
                .map(|p| p.container_port)
                .collect::<Vec<_>>(),
            svc.iter()
                .filter(|p| named(p.name.as_ref(), &p.protocol))
                .map(|p| p.port)
                .collect::<Vec<_>>(),
        )
    };
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(udp(&o), (vec![3799], vec![3799]));
    let secret = "/etc/kbng-radius/secret";
    assert_eq!(
        control_json(&bng)["aaa"]["radius"]["das"],
        serde_json::json!({"listen": "0.0.0.0:3799", "clients": [
            {"address": "192.0.2.10", "secretFile": secret},
            {"address": "192.0.2.11", "secretFile": secret}]})
    );
    bng.spec.aaa.radius.as_mut().unwrap().dynamic_authorization = None;
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(udp(&o), (vec![], vec![]));
    assert_eq!(control_json(&bng)["aaa"]["radius"].get("das"), None);
}

/// The control's configuration file the operator writes for `bng`, parsed.
fn control_json(bng: &Bng) -> serde_json::Value {
    let o = owned(bng, &WorkloadConfig::default());
    serde_json::from_str(&o.config_map.data.unwrap()["control.json"]).unwrap()
}

/// The control configuration's `key` for the sample BNG with `dhcp` as its DHCP section.
fn dhcp_rendered(dhcp: serde_json::Value, key: &str) -> Option<serde_json::Value> {
    let mut bng = sample_bng();
    bng.spec.dhcp = serde_json::from_value(dhcp).unwrap();
    control_json(&bng).get(key).cloned()
}

/// `dhcp.pacing` reaches the control's `pacing` (queue defaulted); without it the control
/// keeps its own defaults (no `pacing` key).
#[test]
fn dhcp_pacing_reaches_the_control_config() {
    let rendered = |dhcp| dhcp_rendered(dhcp, "pacing");
    assert_eq!(
        rendered(serde_json::json!({"mode": "server",
            "pacing": {"ratePerSec": 5000, "burst": 500}})),
        Some(serde_json::json!({"ratePerSec": 5000, "burst": 500, "queue": 20000}))
    );
    assert_eq!(
        rendered(serde_json::json!({"mode": "server",
            "pacing": {"ratePerSec": 5000, "burst": 500, "queue": 100, "maxWaitMs": 1500}})),
        Some(
            serde_json::json!({"ratePerSec": 5000, "burst": 500, "queue": 100, "maxWaitMs": 1500})
        )
    );
    assert_eq!(rendered(serde_json::json!({"mode": "server"})), None);
    let err = serde_json::from_value::<kbng_crds::bng::DhcpSpec>(
        serde_json::json!({"mode": "server", "pacing": {"ratePerSec": 1, "burst": 1, "maxWait": 3}}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("maxWait"), "{err}");
}

/// `dhcp.maxSessionsPerLine` reaches the control's `maxSessionsPerLine`; without it the
/// control keeps its default (no key).
#[test]
fn max_sessions_per_line_reaches_the_control_config() {
    let rendered = |dhcp| dhcp_rendered(dhcp, "maxSessionsPerLine");
    assert_eq!(
        rendered(serde_json::json!({"mode": "server", "maxSessionsPerLine": 4000})),
        Some(serde_json::json!(4000))
    );
    assert_eq!(rendered(serde_json::json!({"mode": "server"})), None);
}

/// `dhcp.leaseSyncIntervalMs` reaches the control's `storeSyncIntervalMs`; without it the
/// control keeps syncing at every commit (no key).
#[test]
fn lease_sync_interval_reaches_the_control_config() {
    let rendered = |dhcp| dhcp_rendered(dhcp, "storeSyncIntervalMs");
    assert_eq!(
        rendered(serde_json::json!({"mode": "server", "leaseSyncIntervalMs": 200})),
        Some(serde_json::json!(200))
    );
    assert_eq!(rendered(serde_json::json!({"mode": "server"})), None);
}

/// `aaa.radius.authMethod` reaches the control's `aaa.radius.authMethod`; a BNG written before
/// the field existed (none in its spec) reads as PAP, the CRD's default.
#[test]
fn radius_auth_method_reaches_the_control_config() {
    let rendered = |spec: serde_json::Value| {
        let mut bng = sample_bng();
        bng.spec.aaa = serde_json::from_value(spec).unwrap();
        control_json(&bng)["aaa"]["radius"]["authMethod"].clone()
    };
    let aaa = |method: Option<&str>| {
        let mut radius = serde_json::json!({"servers": [{"address": "192.0.2.10"}],
            "secretRef": {"name": "radius", "key": "shared"}, "nasIdentifier": "lab"});
        if let Some(m) = method {
            radius["authMethod"] = m.into();
        }
        serde_json::json!({"mode": "radius", "unknownSubscribers": "captive", "radius": radius})
    };
    assert_eq!(rendered(aaa(Some("chap"))), "chap");
    assert_eq!(rendered(aaa(Some("pap"))), "pap");
    assert_eq!(rendered(aaa(None)), "pap");
    let err = serde_json::from_value::<kbng_crds::bng::AaaSpec>(aaa(Some("mschap"))).unwrap_err();
    assert!(err.to_string().contains("mschap"), "{err}");
}

/// The control verifies the licence itself: the ConfigMap carries the Licence as issued
/// and the operator's public key, and what the control would read from them verifies.
#[test]
fn control_gets_the_signed_licence_and_the_public_key() {
    let key = include_str!("../../../deploy/samples/lab-licence-public.key").trim();
    let config = WorkloadConfig {
        licence_public_key: key.to_string(),
        ..WorkloadConfig::default()
    };
    let data = owned(&sample_bng(), &config).config_map.data.unwrap();
    assert_eq!(data[crate::binaries::control::PUBLIC_KEY_KEY], key);
    // Read as kbng-control reads it (YAML, a whole Licence resource).
    let read: kbng_crds::Licence =
        serde_yaml_ng::from_str(&data[crate::binaries::control::LICENCE_KEY]).unwrap();
    assert_eq!(read.spec, sample_licence().spec);
    assert_eq!(read.name_any(), "lab-licence");
    assert_eq!(read.metadata.uid, None, "no cluster bookkeeping");
    assert_eq!(read.metadata.resource_version, None);
    let verdict = kbng_crds::grant::evaluate(
        &read.spec,
        &kbng_crds::grant::public_key_from_base64(&data[crate::binaries::control::PUBLIC_KEY_KEY])
            .unwrap(),
        "2027-01-01T00:00:00Z".parse().unwrap(),
    );
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.max_sessions, 1000);
    // A BNG without a Licence: no licence file, so the control runs on the free baseline.
    let (bng, plans) = (sample_bng(), sample_plans());
    let none = build(&Inputs {
        bng: &bng,
        plans: &plans,
        licence: None,
        config: &config,
    })
    .unwrap();
    let data = none.config_map.data.unwrap();
    assert!(!data.contains_key(crate::binaries::control::LICENCE_KEY));
    assert_eq!(data[crate::binaries::control::PUBLIC_KEY_KEY], key);
}

#[test]
fn control_memory_follows_the_session_capacity() {
    let mem = |capacity: u64| {
        let mut bng = sample_bng();
        bng.spec.dataplane.session_capacity = capacity;
        let pod = owned(&bng, &WorkloadConfig::default())
            .control
            .spec
            .unwrap()
            .template
            .spec
            .unwrap();
        let res = pod.containers[0].resources.clone().unwrap();
        (
            res.requests.unwrap()["memory"].0.clone(),
            res.limits.unwrap()["memory"].0.clone(),
        )
    };
    // Small BNGs keep the floors.
    assert_eq!(mem(100_000), ("512Mi".into(), "1024Mi".into()));
    // A million sessions: 256 MiB + 768 B and + 1,152 B per session, rounded up.
    assert_eq!(mem(1_000_000), ("989Mi".into(), "1355Mi".into()));
    // The schema's maximum does not overflow.
    assert_eq!(mem(16_000_000), ("11975Mi".into(), "17835Mi".into()));
}

#[test]
fn session_store_claim_follows_the_capacity() {
    let claim = |capacity: u64, floor: &str| {
        let mut bng = sample_bng();
        bng.spec.dataplane.session_capacity = capacity;
        let cfg = WorkloadConfig {
            session_store: SessionStore::Pvc {
                size: floor.into(),
                storage_class: None,
            },
            ..WorkloadConfig::default()
        };
        let claims = owned(&bng, &cfg)
            .control
            .spec
            .unwrap()
            .volume_claim_templates
            .unwrap();
        let requests = claims[0].spec.clone().unwrap().resources.unwrap().requests;
        requests.unwrap()["storage"].0.clone()
    };
    // The configured size while it suffices; above that 1 KiB per session + 256 MiB in GiB.
    assert_eq!(claim(100_000, "1Gi"), "1Gi");
    assert_eq!(claim(1_000_000, "1Gi"), "2Gi");
    assert_eq!(claim(16_000_000, "1Gi"), "16Gi");
    assert_eq!(claim(1_000_000, "20Gi"), "20Gi");
    assert_eq!(claim(1_000_000, "1500M"), "1500M");
}

#[test]
fn an_existing_claim_template_is_kept() {
    let mut small = sample_bng();
    small.spec.dataplane.session_capacity = 100_000;
    let existing = owned(&small, &WorkloadConfig::default()).control;
    let mut big = sample_bng();
    big.spec.dataplane.session_capacity = 4_000_000;
    let mut built = owned(&big, &WorkloadConfig::default()).control;
    let templates = |s: &StatefulSet| s.spec.clone().unwrap().volume_claim_templates;
    assert_ne!(templates(&built), templates(&existing));
    crate::build::control::keep_claim_templates(&mut built, Some(&existing));
    assert_eq!(templates(&built), templates(&existing));
    // The rest of the change still goes through: the pod's memory follows the new capacity.
    let limit = |s: &StatefulSet| {
        let pod = s.spec.clone().unwrap().template.spec.unwrap();
        pod.containers[0].resources.clone().unwrap().limits.unwrap()["memory"]
            .0
            .clone()
    };
    assert_ne!(limit(&built), limit(&existing));
    // A first apply has nothing to keep.
    let before = templates(&built);
    crate::build::control::keep_claim_templates(&mut built, None);
    assert_eq!(templates(&built), before);
    // An emptyDir build does not take claims over from a StatefulSet that had them.
    let cfg = WorkloadConfig {
        session_store: SessionStore::EmptyDir,
        ..WorkloadConfig::default()
    };
    let mut empty = owned(&big, &cfg).control;
    crate::build::control::keep_claim_templates(&mut empty, Some(&existing));
    assert_eq!(templates(&empty), None);
}

/// Each policy's ingress as (sources, ports) text: `pods:k=v,...`, `ns:*+pods:...` or a CIDR
/// per source (`any` for every source), `PROTO/port` per port.
fn ingress(p: &k8s_openapi::api::networking::v1::NetworkPolicy) -> Vec<(Vec<String>, Vec<String>)> {
    let sel = |s: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>| {
        s.as_ref().map(|s| {
            let labels = s.match_labels.clone().unwrap_or_default();
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    };
    let spec = p.spec.clone().unwrap();
    assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
    spec.ingress
        .unwrap()
        .iter()
        .map(|r| {
            let from = r.from.as_ref().map_or(vec!["any".to_string()], |f| {
                f.iter()
                    .map(
                        |peer| match (&peer.ip_block, sel(&peer.namespace_selector)) {
                            (Some(b), _) => b.cidr.clone(),
                            (None, Some(ns)) => {
                                format!(
                                    "ns:{}+pods:{}",
                                    if ns.is_empty() { "*" } else { &ns },
                                    sel(&peer.pod_selector).unwrap()
                                )
                            }
                            (None, None) => format!("pods:{}", sel(&peer.pod_selector).unwrap()),
                        },
                    )
                    .collect()
            });
            let ports = r
                .ports
                .as_ref()
                .unwrap()
                .iter()
                .map(|p| {
                    format!(
                        "{}/{:?}",
                        p.protocol.clone().unwrap(),
                        p.port.clone().unwrap()
                    )
                })
                .collect();
            (from, ports)
        })
        .collect()
}

/// The dataplane's gRPC port admits only its own BNG's control pods; the control's admin API
/// only labelled API clients; CoA and relayed DHCP only their configured peers; `/metrics`
/// everyone. Each policy selects exactly its component's pods.
#[test]
fn network_policies_admit_only_the_peers_that_need_each_port() {
    let mut bng = sample_bng();
    let o = owned(&bng, &WorkloadConfig::default());
    let name = bng.name_any();
    let control_pods = format!(
        "pods:app.kubernetes.io/component=control,app.kubernetes.io/instance={name},app.kubernetes.io/name=kbng"
    );
    let metrics = (vec!["any".to_string()], vec!["TCP/Int(9090)".to_string()]);
    assert_eq!(
        ingress(&o.dataplane_policy),
        vec![
            (
                vec![control_pods.clone()],
                vec!["TCP/Int(50051)".to_string()]
            ),
            metrics.clone()
        ]
    );
    let admin = (
        vec!["ns:*+pods:kbng.dev/api-client=true".to_string()],
        vec!["TCP/Int(8080)".to_string()],
    );
    assert_eq!(
        ingress(&o.control_policy),
        vec![admin.clone(), metrics.clone()]
    );
    let selects = |p: &k8s_openapi::api::networking::v1::NetworkPolicy| {
        p.spec
            .clone()
            .unwrap()
            .pod_selector
            .unwrap()
            .match_labels
            .unwrap()
    };
    for (policy, workload) in [
        (&o.dataplane_policy, &o.dataplane),
        (&o.control_policy, &o.control),
    ] {
        let pods = workload
            .spec
            .clone()
            .unwrap()
            .selector
            .match_labels
            .unwrap();
        assert_eq!(selects(policy), pods);
    }

    bng.spec.dhcp = serde_json::from_value(
        serde_json::json!({"mode": "relay", "relayServers": ["192.0.2.67", "192.0.2.68"]}),
    )
    .unwrap();
    radius_with_das(
        &mut bng,
        serde_json::json!({"port": 4000, "clients": [{"address": "192.0.2.11"}]}),
    );
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(
        ingress(&o.control_policy),
        vec![
            admin,
            metrics,
            (
                vec!["192.0.2.11/32".to_string()],
                vec!["UDP/Int(4000)".to_string()]
            ),
            (
                vec!["192.0.2.67/32".to_string(), "192.0.2.68/32".to_string()],
                vec!["UDP/Int(67)".to_string()]
            ),
        ]
    );
}

/// Volume `name` of `pod`: where its first container mounts it (read-only or not), and the
/// Secret it holds.
fn secret_volume(
    pod: &k8s_openapi::api::core::v1::PodSpec,
    name: &str,
) -> (Option<(String, Option<bool>)>, Option<String>) {
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == name)
        .map(|m| (m.mount_path.clone(), m.read_only));
    let secret = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == name)
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone());
    (mount, secret)
}

/// `dataplane.grpcTls` mounts its Secret in both pods, gives the dataplane its three TLS
/// flags and the control `dataplaneTls` with `https://` addresses; without it, none of that.
#[test]
fn grpc_tls_secret_reaches_both_ends() {
    let mut bng = sample_bng();
    let mounts = |o: &Owned| {
        [&o.control, &o.dataplane]
            .map(|s| secret_volume(&s.spec.clone().unwrap().template.spec.unwrap(), "grpc-tls"))
    };
    let tls_args = |o: &Owned| {
        let args = o
            .dataplane
            .spec
            .clone()
            .unwrap()
            .template
            .spec
            .unwrap()
            .containers[0]
            .args
            .clone()
            .unwrap();
        args.iter()
            .position(|a| a == "--grpc-tls-cert")
            .map(|i| args[i..i + 6].to_vec())
    };
    let o = owned(&bng, &WorkloadConfig::default());
    assert_eq!(mounts(&o), [(None, None), (None, None)]);
    assert_eq!(tls_args(&o), None);
    let plain = control_json(&bng);
    assert!(
        plain["dataplanes"][0]
            .as_str()
            .unwrap()
            .starts_with("http://")
    );
    assert_eq!(plain.get("dataplaneTls"), None);

    bng.spec.dataplane.grpc_tls = Some(kbng_crds::bng::GrpcTlsSpec {
        secret_name: "bng-grpc".into(),
    });
    let o = owned(&bng, &WorkloadConfig::default());
    let mounted = (
        Some(("/etc/kbng-grpc-tls".to_string(), Some(true))),
        Some("bng-grpc".to_string()),
    );
    assert_eq!(mounts(&o), [mounted.clone(), mounted]);
    assert_eq!(
        tls_args(&o).unwrap(),
        [
            "--grpc-tls-cert",
            "/etc/kbng-grpc-tls/tls.crt",
            "--grpc-tls-key",
            "/etc/kbng-grpc-tls/tls.key",
            "--grpc-tls-client-ca",
            "/etc/kbng-grpc-tls/ca.crt"
        ]
    );
    let v = control_json(&bng);
    assert!(
        v["dataplanes"][0].as_str().unwrap().starts_with("https://"),
        "{v}"
    );
    assert_eq!(
        v["dataplaneTls"],
        serde_json::json!({"caFile": "/etc/kbng-grpc-tls/ca.crt",
            "certFile": "/etc/kbng-grpc-tls/tls.crt", "keyFile": "/etc/kbng-grpc-tls/tls.key"})
    );
}

/// The control reads its API token from the operator's Secret, mounted read-only; its
/// readiness probe asks the one path that needs no token.
#[test]
fn control_api_token_is_mounted_and_the_probe_needs_none() {
    let o = owned(&sample_bng(), &WorkloadConfig::default());
    let pod = o.control.spec.unwrap().template.spec.unwrap();
    assert_eq!(
        secret_volume(&pod, "api-token"),
        (
            Some(("/etc/kbng-api".to_string(), Some(true))),
            Some("lab-control-api".to_string())
        )
    );
    let c = &pod.containers[0];
    let probe = c
        .readiness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(probe.path.as_deref(), Some("/v1/ready"));
    assert_eq!(
        control_json(&sample_bng())["apiTokenFile"],
        "/etc/kbng-api/token"
    );
}
