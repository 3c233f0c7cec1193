//! Loading behaviour that needs no GPU: a missing library, a library that is not libcuda,
//! and the default search. None of it may panic.

use std::path::PathBuf;

use gpuport_core::{Backend, BackendKind, Error, LoadOptions};
use gpuport_cuda::{self as loader, required_symbols, CudaBackend};

fn load(path: &str) -> gpuport_core::Result<CudaBackend> {
    CudaBackend::load(&LoadOptions { library_path: Some(PathBuf::from(path)) })
}

#[test]
fn a_missing_file_is_library_not_found_with_the_reason() {
    match load("/nonexistent/libcuda.so.1") {
        Err(Error::LibraryNotFound { backend: BackendKind::Cuda, tried, env_var }) => {
            assert_eq!(env_var, loader::LIBRARY_ENV);
            assert_eq!(tried.len(), 1);
            assert_eq!(tried[0].name, "/nonexistent/libcuda.so.1");
            assert!(tried[0].error.contains("No such file"), "{}", tried[0].error);
        }
        Err(other) => panic!("expected LibraryNotFound, got {other}"),
        Ok(_) => panic!("loaded a file that does not exist"),
    }
}

#[test]
fn a_library_that_is_not_libcuda_is_missing_symbol() {
    match load("libm.so.6") {
        Err(Error::MissingSymbol { backend: BackendKind::Cuda, symbol, library, driver_version }) => {
            assert_eq!(symbol, "cuInit");
            assert_eq!(library, "libm.so.6");
            assert_eq!(driver_version, None);
        }
        Err(other) => panic!("expected MissingSymbol, got {other}"),
        Ok(_) => panic!("libm loaded as a CUDA driver"),
    }
}

#[test]
fn the_default_search_tries_the_versioned_name_first() {
    assert_eq!(loader::DEFAULT_NAMES, &["libcuda.so.1", "libcuda.so"]);
    match CudaBackend::load(&LoadOptions::default()) {
        // A machine with an NVIDIA driver: the backend must report itself.
        Ok(b) => assert!(b.version().starts_with("CUDA driver ")),
        Err(Error::LibraryNotFound { tried, .. }) => {
            let names: Vec<&str> = tried.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, loader::DEFAULT_NAMES);
        }
        // A driver without a device is a reason, not a crash.
        Err(e) => assert!(e.is_unavailable(), "unexpected error: {e}"),
    }
}

#[test]
fn the_required_table_is_the_documented_one() {
    for name in
        ["cuMemAlloc", "cuStreamCreateWithPriority", "cuEventElapsedTime", "cuLaunchKernel", "cuPointerGetAttributes"]
    {
        assert!(required_symbols().contains(&name), "{name} is not required");
    }
    assert!(!required_symbols().contains(&"cuMemAllocAsync"), "stream-ordered allocation is optional");
    assert_eq!(loader::format_version(12040), "12.4");
    assert_eq!(loader::format_version(11080), "11.8");
}
