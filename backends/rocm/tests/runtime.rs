//! Loading the real HIP runtime without an AMD GPU. Debian's `libamdhip64-5` is a real
//! HIP runtime: it loads, reports its version and answers `hipErrorNoDevice`. `.ci/run`
//! installs it and sets `GPUPORT_REQUIRE_HIP_RUNTIME=1`, which makes its absence a failure;
//! elsewhere a machine without it must report `LibraryNotFound` with the names tried.

use std::path::PathBuf;

use gpuport_core::{Backend, BackendKind, Error, LoadOptions};
use gpuport_rocm::{self as loader, required_symbols, RocmBackend};

fn load(path: &str) -> gpuport_core::Result<RocmBackend> {
    RocmBackend::load(&LoadOptions { library_path: Some(PathBuf::from(path)) })
}

fn runtime_required() -> bool {
    std::env::var("GPUPORT_REQUIRE_HIP_RUNTIME").is_ok_and(|v| v == "1")
}

#[test]
fn the_real_runtime_loads_resolves_every_symbol_and_reports_no_device() {
    match RocmBackend::load(&LoadOptions::default()) {
        // `NoDevice` is only reached after the library opened, hipInit and the version
        // getters were found and every required symbol resolved.
        Err(Error::NoDevice { backend: BackendKind::Rocm, detail }) => {
            assert!(detail.contains("hipErrorNoDevice"), "{detail}");
            assert!(detail.contains("runtime "), "the runtime version is reported: {detail}");
        }
        Err(Error::LibraryNotFound { tried, .. }) if !runtime_required() => {
            let names: Vec<&str> = tried.iter().map(|t| t.name.as_str()).collect();
            // The sonames first; then whatever ROCm folders this machine has.
            assert!(names.starts_with(loader::DEFAULT_NAMES), "{names:?}");
        }
        // A machine with an AMD GPU.
        Ok(b) => assert!(b.version().starts_with("HIP runtime ")),
        Err(e) => panic!("unexpected result loading the HIP runtime: {e}"),
    }
}

#[test]
fn discovery_says_why_rocm_is_unavailable() {
    let Err(err) = RocmBackend::load(&LoadOptions::default()) else { return };
    let text = err.to_string();
    assert!(text.starts_with("rocm: "), "{text}");
    if runtime_required() {
        assert!(text.starts_with("rocm: no device (hipErrorNoDevice"), "{text}");
    }
}

#[test]
fn a_missing_file_is_library_not_found() {
    match load("/nonexistent/libamdhip64.so") {
        Err(Error::LibraryNotFound { backend: BackendKind::Rocm, tried, env_var }) => {
            assert_eq!(env_var, loader::LIBRARY_ENV);
            assert_eq!(tried.len(), 1);
            assert!(tried[0].error.contains("No such file"), "{}", tried[0].error);
        }
        other => panic!("expected LibraryNotFound, got {:?}", other.err()),
    }
}

#[test]
fn a_library_that_is_not_hip_is_missing_symbol() {
    match load("libm.so.6") {
        Err(Error::MissingSymbol { backend: BackendKind::Rocm, symbol, library, .. }) => {
            assert_eq!(symbol, "hipInit");
            assert_eq!(library, "libm.so.6");
        }
        other => panic!("expected MissingSymbol, got {:?}", other.err()),
    }
}

#[test]
fn names_and_versions() {
    assert_eq!(
        loader::DEFAULT_NAMES,
        &["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so.8", "libamdhip64.so"]
    );
    assert_eq!(loader::format_version(50221153), "5.2.21153");
    assert_eq!(loader::format_version(60342134), "6.3.42134");
    assert!(required_symbols().contains(&"hipModuleLaunchKernel"));
    assert!(!required_symbols().contains(&"hipLaunchHostFunc"), "optional: ROCm 5.2 lacks it");
    assert!(!required_symbols().contains(&"hipMallocAsync"), "optional");
}

#[test]
fn nothing_gpuport_resolves_changed_meaning_in_hip_7() {
    // hipGetLastError follows CUDA's rule from HIP 7 (the last failure, not the last
    // call's status): gpuport reads each call's own status and never asks. The hipCtx*
    // API is deprecated, and the compiler left the runtime.
    for name in required_symbols() {
        assert!(
            !matches!(*name, "hipGetLastError" | "hipPeekAtLastError")
                && !name.starts_with("hipCtx")
                && !name.starts_with("hiprtc"),
            "{name}"
        );
    }
}
