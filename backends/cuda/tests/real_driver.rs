//! NVIDIA's real driver library on a machine without a GPU. `.ci/run` unpacks Debian's
//! `libcuda1` (non-free, 535 series — CUDA 12.2) into a cache folder, without installing
//! it, and runs these with `GPUPORT_REAL_LIBCUDA` naming its `libcuda.so.1` and
//! `GPUPORT_REAL_LIBCUDA_VERSION` the driver version the package carries (12020):
//! `cargo test -p gpuport-cuda --test real_driver -- --ignored`.

use std::path::PathBuf;

use gpuport_core::{Backend, Error, LoadOptions};
use gpuport_cuda::{inspect_library, CudaBackend};

fn library() -> PathBuf {
    PathBuf::from(std::env::var_os("GPUPORT_REAL_LIBCUDA").expect("GPUPORT_REAL_LIBCUDA names the real libcuda.so.1"))
}

fn expected_version() -> i32 {
    let v = std::env::var("GPUPORT_REAL_LIBCUDA_VERSION").expect("GPUPORT_REAL_LIBCUDA_VERSION, e.g. 12020");
    v.trim().parse().expect("a driver version number")
}

#[test]
#[ignore = "needs GPUPORT_REAL_LIBCUDA (set by .ci/run)"]
fn every_required_symbol_resolves_through_cu_get_proc_address() {
    let report = inspect_library(Some(&library())).expect("the real driver opens and every symbol resolves");
    println!("{report:?}");
    assert_eq!(report.driver_version, expected_version(), "the driver version is not the package's");
    assert_eq!(report.lookup, "cuGetProcAddress_v2", "a 12.x driver has cuGetProcAddress_v2");
    assert!(report.not_through_lookup.is_empty(), "found only by dlsym: {:?}", report.not_through_lookup);
    assert_eq!(report.required, gpuport_cuda::required_symbols().len());
}

#[test]
#[ignore = "needs GPUPORT_REAL_LIBCUDA (set by .ci/run)"]
fn without_a_gpu_the_driver_says_no_device_and_its_version() {
    let err = CudaBackend::load(&LoadOptions { library_path: Some(library()) }).err().expect("no GPU here");
    let text = err.to_string();
    assert!(matches!(err, Error::NoDevice { .. }), "{text}");
    assert!(text.contains("CUDA_ERROR_NO_DEVICE"), "{text}");
    let version = gpuport_cuda::format_version(expected_version());
    assert!(text.contains(&format!("driver {version}")), "{text}");
}
