//! Build script: finds the system DPDK with pkg-config, compiles the C shim for DPDK's
//! static-inline fast path and generates bindings for an allowlisted part of the API.
//!
//! Only the shared libraries this crate calls are linked (`rte_eal`, `rte_ethdev`, `rte_mbuf`,
//! `rte_mempool`, `rte_meter`); they pull in their own dependencies. Poll-mode drivers such as
//! `net_null` are not linked: EAL loads them as plugins from the package's pmds directory.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const MIN_VERSION: &str = "22.11";
const LIBS: &[&str] = &[
    "rte_eal",
    "rte_ethdev",
    "rte_mbuf",
    "rte_mempool",
    "rte_meter",
];

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");

    let lib = match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .cargo_metadata(false)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => panic!(
            "\n\ndpdk-sys: pkg-config cannot find libdpdk >= {MIN_VERSION}.\n\
             Install the DPDK development package, on Debian/Ubuntu: \
             `apt-get install libdpdk-dev pkg-config clang libclang-dev`.\n\
             pkg-config said: {e}\n\n"
        ),
    };

    // The pkg-config crate exposes include paths and defines but drops other compile flags
    // (`-include rte_config.h`, `-march=...`) that DPDK's headers rely on, so ask for them whole.
    let cflags = pkg_config_cflags();

    let mut build = cc::Build::new();
    build
        .file("shim/shim.c")
        .include("shim")
        .warnings(true)
        .opt_level(3);
    for flag in &cflags {
        build.flag(flag);
    }
    build.compile("kbng_dpdk_shim");

    for path in &lib.link_paths {
        println!("cargo:rustc-link-search=native={}", path.display());
    }
    for name in LIBS {
        println!("cargo:rustc-link-lib=dylib={name}");
    }

    let bindings = bindgen::Builder::default()
        .header("shim/shim.h")
        .clang_args(&cflags)
        .clang_arg("-Ishim")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_function("kbng_.*")
        .allowlist_function("rte_eal_.*")
        .allowlist_function("rte_eth_.*")
        .allowlist_function("rte_pktmbuf_.*")
        .allowlist_function("rte_mempool_.*")
        .allowlist_function("rte_mbuf.*")
        .allowlist_function("rte_meter_.*")
        .allowlist_function("rte_lcore_.*")
        .allowlist_function("rte_get_main_lcore")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_get_tsc_hz")
        .allowlist_function("rte_dev_.*")
        .allowlist_function("rte_bus_name")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_thread_register")
        .allowlist_function("rte_thread_unregister")
        .allowlist_var("RTE_ETH_.*")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RTE_MAX_LCORE")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MBUF_DEFAULT_.*")
        .allowlist_var("RTE_ETHER_ADDR_LEN")
        .allowlist_var("SOCKET_ID_ANY")
        .allowlist_var("LCORE_ID_ANY")
        .allowlist_type("rte_color")
        .allowlist_type("kbng_rss_fields")
        // Inline functions have no symbol; the shim wraps the ones we need.
        .generate_inline_functions(false)
        // DPDK's doxygen comments turn into broken doctests; the headers are the reference.
        .generate_comments(false)
        .derive_default(true)
        .layout_tests(true)
        .prepend_enum_name(false)
        .generate()
        .expect("bindgen failed on shim/shim.h with libdpdk's cflags");

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs to OUT_DIR");
}

/// `pkg-config --cflags libdpdk`, split on whitespace (DPDK's flags contain no quoted spaces).
fn pkg_config_cflags() -> Vec<String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_owned());
    let output = Command::new(&pkg_config)
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("dpdk-sys: running {pkg_config}: {e}"));
    assert!(
        output.status.success(),
        "dpdk-sys: `{pkg_config} --cflags libdpdk` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("pkg-config prints ASCII")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}
