//! The collectives with several ranks: `crates/collective/tests/ranks.rs` under the `mpich`
//! wheel's `mpiexec` (installed into `.venv` with the pinned test packages), with 2 ranks
//! and with 4. Each run has a time limit, so a rank that never arrives fails the run
//! rather than hanging it. Rank 0's output is counted; the other ranks' goes to
//! `target/collectives/`, printed when the run fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::summary::Tally;

/// The rank counts every run tests.
pub(crate) const RANKS: [u32; 2] = [2, 4];
/// Seconds one `mpiexec` run may take.
const LIMIT_S: u32 = 600;

/// The wheel's launcher and standard-ABI library in `.venv`, or why they are missing.
fn mpich() -> Result<(PathBuf, PathBuf), String> {
    let venv = std::path::absolute(crate::python::VENV).map_err(|e| e.to_string())?;
    let (mpiexec, library) = (venv.join("bin/mpiexec"), venv.join("lib/libmpi_abi.so.1"));
    if mpiexec.is_file() && library.is_file() {
        Ok((mpiexec, library))
    } else {
        Err(format!(
            "no {} and {} (the `mpich` wheel of tests/python/requirements.txt)",
            mpiexec.display(),
            library.display()
        ))
    }
}

/// Runs the multi-rank tests with every count of [`RANKS`]; whether all passed.
pub(crate) fn run(tally: &mut Tally) -> bool {
    let (mpiexec, library) = match mpich() {
        Ok(found) => found,
        Err(e) => {
            tally.note_failure("the collectives' multi-rank tests", vec![e]);
            return false;
        }
    };
    let exe = match crate::rocm_sid::test_binary(&["test", "-p", "gpuport-collective", "--test", "ranks"], "ranks") {
        Ok(exe) => exe,
        Err(e) => {
            tally.note_failure("the collectives' multi-rank tests", vec![e]);
            return false;
        }
    };
    let logs = crate::doubles::target_dir().join("collectives");
    let _ = std::fs::create_dir_all(&logs);
    let mut ok = true;
    for ranks in RANKS {
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=10", &LIMIT_S.to_string()]).arg(&mpiexec).args(["-n", &ranks.to_string()]);
        // Every rank runs the tests one at a time, so all call the same collectives in the
        // same order; ranks other than 0 write to a file of their own.
        cmd.args(["sh", "-c", QUIET_OTHER_RANKS, "sh"]).arg(std::path::absolute(&logs).unwrap_or(logs.clone()));
        cmd.arg(&exe).args(["--include-ignored", "--test-threads=1"]);
        cmd.env("GPUPORT_MPI_LIBRARY", &library).env_remove("GPUPORT_BACKENDS");
        let passed = crate::run_tests(cmd, tally);
        if !passed {
            print_other_ranks(&logs, ranks);
        }
        ok &= passed;
    }
    ok
}

/// `sh -c` body: `$1` the log folder, the rest the command; rank 0 writes to stdout.
const QUIET_OTHER_RANKS: &str = r#"logs=$1; shift
if [ "${PMI_RANK:-0}" = 0 ]; then exec "$@"; else exec "$@" >"$logs/rank-$PMI_RANK-of-$PMI_SIZE.log" 2>&1; fi"#;

fn print_other_ranks(logs: &Path, ranks: u32) {
    for rank in 1..ranks {
        let path = logs.join(format!("rank-{rank}-of-{ranks}.log"));
        if let Ok(text) = std::fs::read_to_string(&path) {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("xtask: rank {rank} of {ranks} ({}):", path.display());
            for line in tail.iter().rev() {
                eprintln!("  {line}");
            }
        }
    }
}
