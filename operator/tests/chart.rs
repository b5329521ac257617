//! The chart ships exactly the generated CRDs, and its lab values fit the lab samples.
//! No cluster needed; `tests/operator/run.sh` installs the chart against a real API server.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn yaml_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn chart_crds_are_the_generated_crds() {
    let generated = root().join("crds/yaml");
    let chart = root().join("charts/kbng/crds");
    assert_eq!(
        yaml_files(&generated),
        yaml_files(&chart),
        "run charts/kbng/sync-crds.sh"
    );
    for name in yaml_files(&generated) {
        let a = std::fs::read(generated.join(&name)).unwrap();
        let b = std::fs::read(chart.join(&name)).unwrap();
        assert!(
            a == b,
            "charts/kbng/crds/{name} differs from crds/yaml/{name}: run charts/kbng/sync-crds.sh"
        );
    }
}

#[test]
fn values_schema_is_json_and_lab_key_matches_the_lab_licence() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("charts/kbng/values.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(schema["additionalProperties"], false);
    let lab: serde_json::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join("charts/kbng/ci/lab-values.yaml")).unwrap(),
    )
    .unwrap();
    let key =
        std::fs::read_to_string(root().join("deploy/samples/lab-licence-public.key")).unwrap();
    assert_eq!(lab["licence"]["publicKey"].as_str().unwrap(), key.trim());
    kbng_crds::grant::public_key_from_base64(key.trim()).unwrap();
}
