//! Writes the CRD YAML of every kbng resource into `crds/yaml/` (or the folder given).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("yaml"));
    if let Err(err) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: cannot create {}: {err}", dir.display());
        return ExitCode::FAILURE;
    }
    for (file, crd) in kbng_crds::all_crds() {
        let path = dir.join(file);
        let written = kbng_crds::crd_yaml(&crd)
            .map_err(|e| e.to_string())
            .and_then(|yaml| std::fs::write(&path, yaml).map_err(|e| e.to_string()));
        if let Err(err) = written {
            eprintln!("crdgen: {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
