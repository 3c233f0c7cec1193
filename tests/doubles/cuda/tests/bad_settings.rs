//! Settings the double cannot use are reported when the driver starts, not ignored in
//! silence: a fault specification that does not parse and a flaw name it does not know
//! would otherwise leave a run testing less than it claims. One test: the settings are
//! read once per process.

use gpuport_cuda_double::status::CUDA_SUCCESS;
use gpuport_cuda_double::*;
use gpuport_double_sim::config::{FAULTS_ENV, MUTANT_ENV};
use gpuport_double_sim::report;

#[test]
fn unusable_settings_are_reported_at_init() {
    // Set before the double reads its settings (at its first `cuInit`), with no other
    // thread in this process reading the environment.
    std::env::set_var(FAULTS_ENV, "cuMemAlloc_v2:zero=OUT_OF_MEMORY");
    std::env::set_var(MUTANT_ENV, "no-such-flaw");
    let before = report::count();
    // SAFETY: `cuInit` takes flags only.
    assert_eq!(unsafe { cuInit(0) }, CUDA_SUCCESS, "the driver starts despite the bad settings");
    assert_eq!(report::count() - before, 2, "one report for each unusable setting");
    let mut count = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cuDeviceGetCount(&mut count) }, CUDA_SUCCESS);
    assert_eq!(count, 2, "the machine runs unflawed, with its default devices");
}
