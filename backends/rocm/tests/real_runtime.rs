//! A real HIP runtime on a machine without an AMD GPU, checked for the paths gpuport takes
//! with it. CI runs this against Debian's `libamdhip64-5` (ROCm 5.2) on the build machine
//! and, through `cargo xtask rocm-sid-check`, against Debian sid's `libamdhip64-6`
//! (ROCm 6.4) inside a sid root: `GPUPORT_REAL_HIP` names the library,
//! `GPUPORT_REAL_HIP_MAJOR` its major version.
//! `cargo test -p gpuport-rocm --test real_runtime -- --ignored`.

use std::path::PathBuf;

use gpuport_core::{Backend, Error, LoadOptions};
use gpuport_rocm::{inspect_library, RocmBackend};

fn library() -> PathBuf {
    PathBuf::from(std::env::var_os("GPUPORT_REAL_HIP").expect("GPUPORT_REAL_HIP names a real libamdhip64"))
}

fn major() -> u32 {
    std::env::var("GPUPORT_REAL_HIP_MAJOR").expect("GPUPORT_REAL_HIP_MAJOR: 5 or 6").trim().parse().expect("a number")
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn the_runtime_resolves_and_takes_its_versions_paths() {
    let report = inspect_library(Some(&library())).expect("the runtime opens and every required symbol resolves");
    println!("{report:#?}");
    assert_eq!(report.runtime_version as u32 / 10_000_000, major(), "not the runtime version expected");
    assert_eq!(report.required, gpuport_rocm::required_symbols().len());
    // Every version gpuport loads has it: device imports are checked against their
    // allocation on ROCm too.
    assert!(report.address_range, "hipMemGetAddressRange does not resolve");
    if major() >= 6 {
        // ROCm 6.2 and later: versioned lookup, the R0600 properties layout, the 6.x
        // hipMemoryType numbering, hipLaunchHostFunc.
        assert_eq!(report.lookup, "hipGetProcAddress");
        // Without a device, ROCm 6.4's hipGetProcAddress answers hipErrorNoDevice for
        // every name (seen in the sid root), so here the symbols come from dlsym: the
        // versioned lookup itself is checked only where a GPU is (the GPU bundle).
        assert_eq!(report.memory_type_numbering, 6);
        assert_eq!(report.device_properties, Some("hipGetDevicePropertiesR0600"));
        assert!(report.launch_host_func, "ROCm 6 has hipLaunchHostFunc");
        assert!(report.stream_ordered_alloc, "ROCm 6 has hipMallocAsync");
    } else {
        assert_eq!(report.lookup, "dlsym");
        assert_eq!(report.memory_type_numbering, 5);
        assert_eq!(report.device_properties, Some("hipGetDeviceProperties"));
    }
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn without_a_gpu_the_runtime_says_no_device_and_its_version() {
    let err = RocmBackend::load(&LoadOptions { library_path: Some(library()) }).err().expect("no AMD GPU here");
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, Error::NoDevice { .. }), "{text}");
    assert!(text.contains(&format!("runtime {}.", major())), "{text}");
}
