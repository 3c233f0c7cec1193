//! The collectives with several ranks, under the `mpich` wheel's `mpiexec` (installed into
//! `.venv` with the pinned test packages): `crates/collective/tests/ranks.rs` with 2 ranks
//! and with 4, `tests/check.rs` the same with the consistency check on, and
//! `tests/rank_exits.rs`, whose rank 1 exits, with 2 — that job must be ended by gpuport's
//! watchdog through the launcher (the watchdog's message, and MPI_Abort's code as the job's
//! status), well within the time limit.
//! Each run has a time limit, so a rank that never arrives fails the run rather than
//! hanging it. With the driver doubles, `tests/ranks.rs` runs again with 2 ranks on each
//! (`on_double`, from the doubles' step), their devices' arrays among the host's and ext's,
//! and `tests/nccl_processes.rs` with 2 and 4: NCCL or RCCL with one rank per process.
//! The NCCL loader is checked against the real `libnccl.so.2` of the pinned wheel (no GPU
//! needed: found, version read, every call present). Rank 0's output is counted; the other ranks' goes to `target/collectives/`, printed when
//! the run fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::summary::Tally;

/// The rank counts every run tests.
pub(crate) const RANKS: [u32; 2] = [2, 4];
/// Seconds one `mpiexec` run may take.
const LIMIT_S: u32 = 600;

/// The wheel's launcher and standard-ABI library in `.venv`, or why they are missing.
pub(crate) fn mpich() -> Result<(PathBuf, PathBuf), String> {
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
    let build =
        |target: &str| crate::rocm_sid::test_binary(&["test", "-p", "gpuport-collective", "--test", target], target);
    let (ranks_exe, check_exe, exits_exe) = match (build("ranks"), build("check"), build("rank_exits")) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (a, b, c) => {
            let errors = [a.err(), b.err(), c.err()].into_iter().flatten().collect();
            tally.note_failure("the collectives' multi-rank tests", errors);
            return false;
        }
    };
    let logs = logs_dir();
    let launch = |exe: &Path, ranks: u32, check: bool| launch(&mpiexec, &library, &logs, exe, ranks, check);
    let mut ok = true;
    for (exe, check) in [(&ranks_exe, false), (&check_exe, true)] {
        for ranks in RANKS {
            let passed = crate::run_tests(launch(exe, ranks, check), tally);
            if !passed {
                print_other_ranks(&logs, ranks);
            }
            ok &= passed;
        }
    }
    ok &= a_rank_that_exits_ends_the_job(launch(&exits_exe, 2, false), tally);
    ok &= nccl_from_the_wheel(tally);
    ok & the_example_verifies_on_every_rank(&mpiexec, &library, tally)
}

/// Where the `nvidia-nccl-cu13` wheel of tests/python/requirements.txt puts NCCL in `.venv`.
const NCCL_IN_WHEEL: &str = "nvidia/nccl/lib/libnccl.so.2";

/// NCCL from the pinned wheel, without a GPU: found, its version read, every call gpuport
/// resolves present (`crates/collective/tests/real_engines.rs`).
fn nccl_from_the_wheel(tally: &mut Tally) -> bool {
    let Some(nccl) = crate::python::site_packages_file(NCCL_IN_WHEEL) else {
        tally.note_failure(
            "the NCCL loader against the real library",
            vec![format!("no {NCCL_IN_WHEEL} in .venv (the nvidia-nccl-cu13 wheel of tests/python/requirements.txt)")],
        );
        return false;
    };
    let mut cmd = crate::cargo();
    cmd.args(["test", "-p", "gpuport-collective", "--test", "real_engines", "--"]);
    cmd.args(["--ignored", "--exact", NCCL_CHECK, "--nocapture"]);
    cmd.env(NCCL_LIBRARY_ENV, nccl);
    let before = tally.passed;
    if !crate::run_tests(cmd, tally) {
        return false;
    }
    // A filter that matches no test would pass: the check must have run.
    if tally.passed != before + 1 {
        tally.note_failure("the NCCL loader against the real library", vec![format!("{NCCL_CHECK} did not run")]);
        return false;
    }
    true
}

/// The check, in `crates/collective/tests/real_engines.rs`.
const NCCL_CHECK: &str = "nccl_is_found_read_and_lacks_only_what_its_version_lacks";

/// The variable that names NCCL to gpuport.
const NCCL_LIBRARY_ENV: &str = "GPUPORT_NCCL_LIBRARY";

/// Where ranks other than 0 write their output.
fn logs_dir() -> PathBuf {
    let logs = std::path::absolute(crate::doubles::target_dir().join("collectives")).unwrap_or_default();
    let _ = std::fs::create_dir_all(&logs);
    logs
}

/// `exe` (a test binary) under `mpiexec -n ranks`, with a time limit, the consistency check
/// on or off. Every rank runs the tests one at a time, so all call the same collectives in
/// the same order; ranks other than 0 write to a file of their own in `logs`.
fn launch(mpiexec: &Path, library: &Path, logs: &Path, exe: &Path, ranks: u32, check: bool) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", &LIMIT_S.to_string()]).arg(mpiexec).args(["-n", &ranks.to_string()]);
    cmd.args(["sh", "-c", QUIET_OTHER_RANKS, "sh"]).arg(logs);
    cmd.arg(exe).args(["--include-ignored", "--test-threads=1"]);
    cmd.env("GPUPORT_MPI_LIBRARY", library).env("GPUPORT_COLLECTIVE_CHECK", if check { "1" } else { "0" });
    cmd.env_remove("GPUPORT_BACKENDS");
    cmd
}

/// `tests/ranks.rs` with 2 ranks with a driver double's device among the arrays' (`env`
/// loads the double): device memory staged through pinned memory, as on a GPU. Then
/// `tests/nccl_processes.rs` with every count of [`RANKS`]: the double's NCCL or RCCL with
/// one rank per process, the processes' doubles meeting through shared memory.
pub(crate) fn on_double(name: &str, env: &[(&str, std::ffi::OsString)], tally: &mut Tally) -> bool {
    let what = format!("the collectives across processes on the {name} double");
    let build =
        |target: &str| crate::rocm_sid::test_binary(&["test", "-p", "gpuport-collective", "--test", target], target);
    let built = mpich().and_then(|found| Ok((found, build("ranks")?, build("nccl_processes")?)));
    let ((mpiexec, library), ranks_exe, nccl_exe) = match built {
        Ok(found) => found,
        Err(e) => {
            tally.note_failure(what, vec![e]);
            return false;
        }
    };
    let logs = logs_dir();
    let mut ok = true;
    for (exe, ranks) in std::iter::once((&ranks_exe, 2)).chain(RANKS.map(|n| (&nccl_exe, n))) {
        let mut cmd = launch(&mpiexec, &library, &logs, exe, ranks, false);
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_os_str())));
        let passed = crate::run_tests(cmd, tally);
        if !passed {
            print_other_ranks(&logs, ranks);
        }
        ok &= passed;
    }
    ok
}

/// `examples/allreduce.rs` under `mpiexec -n 4`: one verified line from each rank.
fn the_example_verifies_on_every_rank(mpiexec: &Path, library: &Path, tally: &mut Tally) -> bool {
    let what = "examples/allreduce.rs under mpiexec -n 4";
    let mut build = crate::cargo();
    build.args(["build", "-q", "-p", "gpuport", "--example", "allreduce"]);
    if !crate::run(build) {
        tally.note_failure(what, vec!["the example did not build".into()]);
        return false;
    }
    let exe = crate::doubles::target_dir().join("debug/examples/allreduce");
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=10", &LIMIT_S.to_string()]).arg(mpiexec).args(["-n", "4"]).arg(&exe);
    cmd.env("GPUPORT_MPI_LIBRARY", library).env_remove("GPUPORT_BACKENDS").env_remove("GPUPORT_DEVICE");
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.output();
    let text = out.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let verified = (0..4)
        .filter(|r| text.lines().any(|l| l.starts_with(&format!("rank {r} of 4: ")) && l.contains("verified")))
        .count();
    if out.as_ref().is_ok_and(|o| o.status.success()) && verified == 4 {
        print!("{text}");
        true
    } else {
        let mut lines = vec![format!("{verified} of 4 ranks printed a verified line")];
        lines.extend(text.lines().map(str::to_owned));
        tally.note_failure(what, lines);
        false
    }
}

/// Seconds the watchdog waits in the rank-exit run (far below the run's limit).
const EXIT_WATCHDOG_S: u32 = 5;

/// Runs `cmd` (the rank-exit test under `mpiexec`) and requires it to end with a failure,
/// before the time limit, with the watchdog's message and `MPI_Abort`'s code as its status.
fn a_rank_that_exits_ends_the_job(mut cmd: Command, tally: &mut Tally) -> bool {
    let what = "a rank that exits ends the job (gpuport's watchdog, then mpiexec)";
    cmd.env("GPUPORT_COLLECTIVE_TIMEOUT", EXIT_WATCHDOG_S.to_string());
    eprintln!("xtask: running {cmd:?}");
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => {
            tally.note_failure(what, vec![format!("could not start mpiexec: {e}")]);
            return false;
        }
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let code = out.status.code();
    let problems: Vec<String> = [
        (code == Some(0)).then(|| "the job succeeded".to_owned()),
        matches!(code, Some(124 | 137) | None).then(|| format!("the job hung until the time limit ({code:?})")),
        (!text.contains("did not complete within")).then(|| "no message from gpuport's watchdog".to_owned()),
        // MPI_Abort's code, which the launcher passes on as the job's status. (Its message,
        // printed by the aborting rank as it is killed, is not always forwarded: not checked.)
        (code != Some(1)).then(|| format!("the launcher did not end the job with MPI_Abort's code 1 ({code:?})")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if problems.is_empty() {
        println!("xtask: {what}: ended by the watchdog within {EXIT_WATCHDOG_S} s, as it must");
        true
    } else {
        let mut lines = problems;
        lines.extend(text.lines().rev().take(8).map(str::to_owned));
        tally.note_failure(what, lines);
        false
    }
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
