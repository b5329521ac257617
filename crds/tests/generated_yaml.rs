//! The checked-in CRD YAML must be exactly what the Rust types generate, and must carry what
//! `kubectl` and the API server rely on: a structural schema, CEL rules, the status
//! subresource, printer columns, short names and the `kbng` category.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};

fn yaml_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/yaml"))
}

#[test]
fn checked_in_yaml_is_current() {
    for (file, crd) in kbng_crds::all_crds() {
        let fresh = kbng_crds::crd_yaml(&crd).unwrap();
        let on_disk = std::fs::read_to_string(yaml_dir().join(file)).unwrap_or_default();
        assert!(
            fresh == on_disk,
            "crds/yaml/{file} is stale: run `cargo run -p kbng-crds --bin crdgen`"
        );
    }
}

fn load(file: &str) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(yaml_dir().join(file)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// Calls `f` with every schema node and its path (`.spec.pools[].cidr`), depth first.
fn visit(path: &str, schema: &JSONSchemaProps, f: &mut impl FnMut(&str, &JSONSchemaProps)) {
    f(path, schema);
    for (name, child) in schema.properties.iter().flatten() {
        visit(&format!("{path}.{name}"), child, f);
    }
    if let Some(items) = &schema.items {
        let json = serde_json::to_value(items).unwrap();
        if let Ok(inner) = serde_json::from_value::<JSONSchemaProps>(json) {
            visit(&format!("{path}[]"), &inner, f);
        }
    }
}

/// Every CEL rule anywhere in a schema.
fn cel_rules(schema: &JSONSchemaProps) -> Vec<String> {
    let mut rules = Vec::new();
    visit("", schema, &mut |_, node| {
        for rule in node.x_kubernetes_validations.iter().flatten() {
            rules.push(rule.rule.clone());
        }
    });
    rules
}

fn check(file: &str, kind: &str, short: &str, columns: &[&str], rules_must_include: &[&str]) {
    let crd = load(file);
    assert_eq!(crd.spec.group, "kbng.dev");
    assert_eq!(crd.spec.names.kind, kind);
    assert_eq!(crd.spec.scope, "Namespaced");
    assert!(
        crd.spec
            .names
            .categories
            .iter()
            .flatten()
            .any(|c| c == "kbng"),
        "{kind} is in the kbng category"
    );
    assert!(
        crd.spec
            .names
            .short_names
            .iter()
            .flatten()
            .any(|s| s == short),
        "{kind} has short name {short}"
    );
    assert_eq!(crd.spec.versions.len(), 1);
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(v.served && v.storage);
    assert!(
        v.subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some(),
        "{kind} has the status subresource"
    );
    let names: Vec<&str> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    for col in columns {
        assert!(names.contains(col), "{kind} prints column {col}: {names:?}");
    }
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("a structural schema");
    let props = schema.properties.as_ref().unwrap();
    assert!(props.contains_key("spec") && props.contains_key("status"));
    let rules = cel_rules(schema);
    for want in rules_must_include {
        assert!(
            rules.iter().any(|r| r.contains(want)),
            "{kind} has a CEL rule containing {want:?}; rules: {rules:#?}"
        );
    }
}

#[test]
fn bng_crd_has_schema_rules_status_and_columns() {
    check(
        "bngs.kbng.dev.yaml",
        "BNG",
        "bng",
        &["Ready", "Active", "Captive", "Cap"],
        &[
            "self.first <= self.last",
            "containsIP(self.gateway)",
            "self.mode == 'radius'",
            "self.vlanMode == 'qinq'",
        ],
    );
}

#[test]
fn plan_crd_has_schema_rules_status_and_columns() {
    check(
        "subscriberplans.kbng.dev.yaml",
        "SubscriberPlan",
        "plan",
        &["Up CIR", "Down CIR", "Sessions"],
        &["self.pirBps >= self.cirBps", "has(self.dscp)"],
    );
}

#[test]
fn licence_crd_has_schema_rules_status_and_columns() {
    check(
        "licences.kbng.dev.yaml",
        "Licence",
        "lic",
        &["Valid", "Source", "Max Sessions", "Days Left"],
        &["self.spec.notAfter > self.spec.notBefore"],
    );
}

#[test]
fn vlan_ids_are_bounded_in_the_schema() {
    let text = std::fs::read_to_string(yaml_dir().join("bngs.kbng.dev.yaml")).unwrap();
    assert!(text.contains("maximum: 4094.0"));
}

/// Every string with a pattern also needs a maximum length: the API server estimates the cost
/// of CEL rules such as `cidr(self.cidr)` from it and refuses a CRD whose estimate is unbounded,
/// a refusal no unit test sees without this check.
#[test]
fn patterned_strings_have_a_max_length() {
    for (file, crd) in kbng_crds::all_crds() {
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .unwrap();
        let mut missing = Vec::new();
        let mut patterned_seen = 0;
        visit("", schema, &mut |path, node| {
            let patterned = node.type_.as_deref() == Some("string") && node.pattern.is_some();
            patterned_seen += usize::from(patterned);
            if patterned && node.max_length.is_none() {
                missing.push(path.to_string());
            }
        });
        if file.starts_with("bngs.") {
            // The walk reaches the BNG's address, CIDR and name patterns, inside lists too.
            assert!(
                patterned_seen >= 10,
                "walk found only {patterned_seen} patterned strings"
            );
        }
        assert!(
            missing.is_empty(),
            "{file}: strings without maxLength: {missing:?}"
        );
    }
}
