//! gpuport's NCCL and RCCL loader against the real libraries, on a machine without a GPU:
//! found where users have them, the version read, every call gpuport resolves present
//! (for an NCCL older than the last call's version, every call that version has).
//! Ignored by default: `cargo xtask test` runs the NCCL check with
//! `GPUPORT_NCCL_LIBRARY` naming the PyPI wheel's `libnccl.so.2` (installed in the Python
//! test environment), and `cargo xtask rocm-sid-check --runtime 7` runs the RCCL check
//! inside the root that holds Debian's `librccl1`, where RCCL is found by its soname.

use gpuport_collective::{engines, EngineReport, NCCL_LIBRARY_ENV};

fn report(name: &str) -> EngineReport {
    engines().into_iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} is not listed"))
}

/// The version and the path in a found engine's status (`NAME X.Y.Z at PATH`).
fn found(report: &EngineReport) -> ((u32, u32, u32), String) {
    let status = report.status.clone().unwrap_or_else(|why| panic!("{} was not found: {why}", report.name));
    let rest = status.strip_prefix(&format!("{} ", report.name)).unwrap_or_else(|| panic!("not named: {status}"));
    let (version, path) = rest.split_once(" at ").unwrap_or_else(|| panic!("no version: {status}"));
    let numbers: Vec<u32> = version.split('.').map(|n| n.parse().expect("a version number")).collect();
    ((numbers[0], numbers[1], numbers[2]), path.to_owned())
}

/// Each feature `report` lacks names the NCCL version that has it (`from NCCL X.Y.Z;`),
/// which must be later than `version`: a library lacks only what its version lacks.
fn lacks_only_what_its_version_lacks(report: &EngineReport, version: (u32, u32, u32)) {
    for lack in &report.lacks {
        let from = lack.split_once("from NCCL ").and_then(|(_, r)| r.split_once(';')).map(|(v, _)| v);
        let from: Vec<u32> = from
            .unwrap_or_else(|| panic!("no version in {lack:?}"))
            .split('.')
            .map(|n| n.parse().expect("a version number"))
            .collect();
        assert!((from[0], from[1], from[2]) > version, "NCCL {version:?} lacks {lack}, which that version has");
    }
}

#[test]
#[ignore = "needs NCCL: GPUPORT_NCCL_LIBRARY naming libnccl.so.2 (cargo xtask test sets it to the wheel's)"]
fn nccl_is_found_read_and_lacks_only_what_its_version_lacks() {
    let chosen = std::env::var(NCCL_LIBRARY_ENV).expect("GPUPORT_NCCL_LIBRARY names the library to check");
    let nccl = report("NCCL");
    let (version, path) = found(&nccl);
    assert_eq!(path, chosen);
    println!("NCCL {version:?} at {path}; lacks {:?}", nccl.lacks);
    // The pinned wheel (2.32) has every call gpuport resolves; an older NCCL (a GPU
    // machine's PyTorch may bring one) lacks only the features of later versions.
    lacks_only_what_its_version_lacks(&nccl, version);
}

#[test]
#[ignore = "needs RCCL where ROCm installs it (run inside the HIP 7 root by cargo xtask rocm-sid-check)"]
fn rccl_is_found_read_and_has_every_call() {
    let rccl = report("RCCL");
    let (version, path) = found(&rccl);
    assert_eq!(path, "librccl.so.1", "found by its soname");
    println!("RCCL for NCCL's API {version:?} at {path}");
    assert!(version >= (2, 18, 0), "RCCL for NCCL's API {version:?}");
    assert_eq!(rccl.lacks, Vec::<String>::new(), "RCCL {version:?} lacks calls gpuport resolves");
}
