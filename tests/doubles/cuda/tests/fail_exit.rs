//! `GPUPORT_DOUBLE_FAIL_EXIT`: a process that made a report ends with the status asked
//! for, whatever its own would have been; one that made none, or did not ask, keeps its
//! own. The process under test is this test binary run again with one ignored test.

use std::process::Command;

use gpuport_cuda_double::status::CUDA_SUCCESS;
use gpuport_cuda_double::*;
use gpuport_double_sim::config::{FAIL_EXIT_ENV, MUTANT_ENV};

/// Set in the child: which settings it starts the driver with.
const ROLE_ENV: &str = "FAIL_EXIT_TEST_ROLE";

#[test]
#[ignore = "the process the other test starts"]
fn child_starts_the_driver() {
    let Ok(role) = std::env::var(ROLE_ENV) else { return };
    // Before the double reads its settings (at its first `cuInit`); no other thread runs.
    if role.contains("report") {
        // An unknown flaw's name is reported when the driver starts.
        std::env::set_var(MUTANT_ENV, "no-such-flaw");
    }
    if role.contains("ask") {
        std::env::set_var(FAIL_EXIT_ENV, "86");
    }
    // SAFETY: `cuInit` takes flags only.
    assert_eq!(unsafe { cuInit(0) }, CUDA_SUCCESS);
}

fn status_of(role: &str) -> Option<i32> {
    let exe = std::env::current_exe().expect("this test's binary");
    let out = Command::new(exe)
        .args(["--exact", "child_starts_the_driver", "--ignored", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .env_remove(FAIL_EXIT_ENV)
        .env_remove(MUTANT_ENV)
        .output()
        .expect("the child starts");
    out.status.code()
}

#[test]
fn a_process_that_made_a_report_ends_with_the_status_asked_for() {
    assert_eq!(status_of("ask report"), Some(86), "a report, and the status asked for");
    assert_eq!(status_of("report"), Some(0), "a report, no status asked for: the process's own");
    assert_eq!(status_of("ask"), Some(0), "no report: the process's own status");
}
