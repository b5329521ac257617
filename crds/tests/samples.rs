//! The sample resources shipped in `deploy/samples/` parse into the Rust types, and the Rust
//! side refuses a typo'd field just as the API server's strict field validation does.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;

use kbng_crds::{Bng, Licence, SubscriberPlan};

fn sample(name: &str) -> String {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/samples")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn samples_parse() {
    let bng: Bng = serde_yaml_ng::from_str(&sample("bng.yaml")).unwrap();
    assert_eq!(bng.spec.pools.len(), 1);
    for doc in sample("plans.yaml").split("\n---\n") {
        let plan: SubscriberPlan = serde_yaml_ng::from_str(doc).unwrap();
        assert!(plan.spec.downstream.cir_bps > 0);
    }
    let _: Licence = serde_yaml_ng::from_str(&sample("licence.yaml")).unwrap();
}

#[test]
fn typo_in_a_field_name_is_refused() {
    let typo = sample("bng.yaml").replace("leaseSecs", "leaseSec");
    let err = serde_yaml_ng::from_str::<Bng>(&typo).unwrap_err();
    assert!(err.to_string().contains("leaseSec"), "{err}");
}

#[test]
fn typo_in_an_enum_value_is_refused() {
    let typo = sample("bng.yaml").replace("vlanMode: qinq", "vlanMode: qnq");
    assert!(serde_yaml_ng::from_str::<Bng>(&typo).is_err());
}

#[test]
fn sample_licence_verifies_with_the_lab_key_only() {
    use k8s_openapi::jiff::Timestamp;
    use kbng_crds::grant;

    let licence: Licence = serde_yaml_ng::from_str(&sample("licence.yaml")).unwrap();
    let lab = grant::public_key_from_base64(&sample("lab-licence-public.key")).unwrap();
    let at: Timestamp = "2026-06-01T00:00:00Z".parse().unwrap();
    let verdict = grant::evaluate(&licence.spec, &lab, at);
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.max_sessions, 1000);

    let other = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
    assert!(!grant::evaluate(&licence.spec, &other, at).valid);
}
