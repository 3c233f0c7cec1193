//! gpuport's NCCL and RCCL loader on the collectives double (the driver doubles export
//! NCCL's API, and RCCL's, under `libnccl.so.2` and `librccl.so.1`): each found where its
//! variable names it, its version read, every call gpuport resolves present. Ignored by
//! default: `cargo xtask test --backend cuda|rocm --double` names both doubles' engines.

use gpuport_collective::{engines, NCCL_LIBRARY_ENV, RCCL_LIBRARY_ENV};

#[test]
#[ignore = "needs the doubles' engines: GPUPORT_NCCL_LIBRARY and GPUPORT_RCCL_LIBRARY (cargo xtask test --double)"]
fn the_doubles_engines_are_found_read_and_complete() {
    let listed = engines();
    for (name, var) in [("NCCL", NCCL_LIBRARY_ENV), ("RCCL", RCCL_LIBRARY_ENV)] {
        let path = std::env::var(var).unwrap_or_else(|_| panic!("{var} names the double's {name}"));
        let report = listed.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} is not listed"));
        let status = report.status.clone().expect("found on the double");
        assert_eq!(status, format!("{name} 2.32.3 at {path}"));
        assert_eq!(report.lacks, Vec::<String>::new(), "{name} on the double");
    }
}
