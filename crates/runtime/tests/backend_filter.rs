//! `GPUPORT_BACKENDS` is applied before any library is opened: a backend left out is never
//! loaded. Its own test binary (one process, one test), because which libraries a process
//! has mapped is process-wide.

use gpuport_runtime::{BackendStatus, DiscoverOptions, Error, Runtime};

/// The vendor runtime libraries this process has mapped, from `/proc/self/maps`.
fn mapped_vendor_libraries() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| path.contains("libcuda.so") || path.contains("libamdhip64"))
        .map(str::to_owned)
        .collect();
    libs.dedup();
    libs
}

#[test]
fn left_out_backends_are_never_opened() {
    if !std::path::Path::new("/proc/self/maps").exists() {
        eprintln!("no /proc/self/maps here: nothing to check");
        return;
    }
    let only_host =
        Runtime::discover_with(&DiscoverOptions { backends: Some(vec!["host".into()]), ..Default::default() });
    assert!(only_host.report_for("host").is_some_and(|r| r.is_available()));
    assert!(only_host.report_for("cuda").is_none() && only_host.report_for("rocm").is_none());
    assert_eq!(mapped_vendor_libraries(), Vec::<String>::new(), "a left-out backend's library was opened");
    assert!(!gpuport_runtime::cuda::load_attempted(), "the CUDA loader ran although cuda was left out");
    assert!(!gpuport_runtime::rocm::load_attempted(), "the HIP loader ran although rocm was left out");

    // The same checks see loading when it happens: discovering every backend runs both
    // loaders (CI installs Debian's HIP runtime, which loads and answers "no device").
    let all = Runtime::discover_with(&DiscoverOptions::default());
    assert!(gpuport_runtime::cuda::load_attempted() && gpuport_runtime::rocm::load_attempted());
    let reached_runtime = |name: &str| {
        !matches!(
            all.report_for(name).map(|r| &r.status),
            Some(BackendStatus::Unavailable(Error::LibraryNotFound { .. }))
        )
    };
    if std::env::var_os("GPUPORT_REQUIRE_HIP_RUNTIME").is_some() {
        assert!(reached_runtime("rocm"), "CI's HIP runtime was not found: {:?}", all.report_for("rocm"));
    }
}
