//! The checked-in generated code must be what the proto files generate today.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};

#[test]
fn generated_code_is_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("kbng-api-gen-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let protos: Vec<PathBuf> = kbng_api::PROTO_FILES
        .iter()
        .map(|p| root.join("proto").join(p))
        .collect();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .out_dir(&out)
        .compile_protos(&protos, &[root.join("proto")])
        .expect("protoc (package protobuf-compiler) compiles the contract");

    let name = "kbng.dataplane.v1.rs";
    let fresh = std::fs::read_to_string(out.join(name)).unwrap();
    let checked_in_path = root.join("src/gen").join(name);
    let _ = std::fs::remove_dir_all(&out);
    if std::env::var_os("KBNG_REGEN").is_some() {
        std::fs::write(&checked_in_path, &fresh).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&checked_in_path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "src/gen/{name} is stale: run `KBNG_REGEN=1 cargo test -p kbng-api --test generated`"
    );
}
