//! ThreadSanitizer: data races on real threads — the software devices' workers, the CUDA
//! and ROCm backends against their driver doubles' callback threads, and the NCCL and RCCL
//! communicators' watchdog against them.

use std::path::PathBuf;
use std::process::Command;

use super::{
    ensure_nightly, finish, host_triple, Run, ALL, CONFORMANCE, INTERCHANGE, NIGHTLY, RUST_SRC, SOFTWARE_DEVICES,
};
use crate::doubles::{Double, Place, DOUBLES};
use crate::{run, rustup_cargo};

/// What ThreadSanitizer runs: every test crate that runs threads (and, after these, the
/// conformance suite on the CUDA and ROCm backends through every driver double).
const THREAD_RUNS: &[Run] = &[
    Run { package: "gpuport-runtime", args: ALL, env: &[], strict_provenance: false },
    // The plugin loader against the ext device behind the C table, in this process.
    Run { package: "gpuport-loaded", args: ALL, env: &[], strict_provenance: false },
    SOFTWARE_DEVICES[0],
    SOFTWARE_DEVICES[1],
    SOFTWARE_DEVICES[2],
    INTERCHANGE[0],
    INTERCHANGE[1],
    CONFORMANCE,
    // The ext device loaded as a plugin: the loader, the vendor kit and the exported port
    // on the ext device's threads, through the whole suite.
    Run { package: "gpuport-ext-plugin", args: ALL, env: &[], strict_provenance: false },
];

/// What CI runs under ThreadSanitizer on every change: the software devices and the
/// conformance suite on them (and, after these, on CUDA and on ROCm 6 through their
/// doubles; ROCm 5.2 shares ROCm 6's simulation and threads).
pub(super) const THREAD_CI_RUNS: &[Run] = &[SOFTWARE_DEVICES[0], SOFTWARE_DEVICES[1], SOFTWARE_DEVICES[2], CONFORMANCE];

/// Where ThreadSanitizer's builds go: a target folder of their own, so instrumented and
/// plain builds never mix.
const TSAN_TARGET: &str = "target/tsan";

/// ThreadSanitizer's compiler flags. The driver doubles are shared libraries loaded at run
/// time: their instrumented code calls the ThreadSanitizer runtime, which is linked into
/// the test executable, so the executable exports the runtime's entry points.
const TSAN_RUSTFLAGS: &str = "-Zsanitizer=thread -Clink-arg=-Wl,--export-dynamic-symbol=__tsan_*";

/// A nightly `cargo` with ThreadSanitizer's build settings: the standard library rebuilt
/// instrumented (`-Zbuild-std`), as ThreadSanitizer needs every access seen. Give it a
/// subcommand (`test`, `build`), then `tsan_args`.
fn tsan_cargo() -> Command {
    let mut cmd = rustup_cargo(NIGHTLY);
    cmd.env("CARGO_TARGET_DIR", TSAN_TARGET)
        .env("RUSTFLAGS", TSAN_RUSTFLAGS)
        .env("RUSTDOCFLAGS", TSAN_RUSTFLAGS)
        // A report fails the run at once; the threads that outlive `main` on purpose
        // (stream pool, release thread) are not reports.
        .env("TSAN_OPTIONS", "halt_on_error=1 second_deadlock_stack=1")
        .env_remove("GPUPORT_BACKENDS");
    cmd
}

/// The arguments every ThreadSanitizer build takes after its subcommand.
fn tsan_args(triple: &str) -> [&str; 4] {
    ["-q", "-Zbuild-std", "--target", triple]
}

/// `cargo test` for `step` under ThreadSanitizer, with `features` enabled.
pub(super) fn tsan_command(triple: &str, step: &Run, features: &[&str]) -> Command {
    let mut cmd = tsan_cargo();
    cmd.arg("test").args(tsan_args(triple)).args(["-p", step.package]).args(step.args);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    cmd.envs(step.env.iter().copied());
    cmd
}

/// Where the instrumented doubles are built and put.
fn tsan_doubles(triple: &str) -> Place {
    Place::new(PathBuf::from(TSAN_TARGET).join(triple).join("debug"), PathBuf::from(TSAN_TARGET).join("doubles"))
}

/// The conformance suite on each of `doubles`' backends, the doubles built instrumented: a
/// race between a backend's stream glue and the driver's callback threads shows here.
fn thread_on_doubles(triple: &str, doubles: &[&Double], failed: &mut Vec<String>) {
    let place = tsan_doubles(triple);
    // All built first: a run loads the other vendor's double beside its own.
    for d in doubles {
        let mut build = tsan_cargo();
        build.env_remove("TSAN_OPTIONS");
        if let Err(e) = place.build(d, build, &tsan_args(triple)[1..]) {
            failed.push(e);
            return;
        }
    }
    for d in doubles {
        place.clear_report(d);
        let mut cmd = tsan_command(triple, &CONFORMANCE, &[]);
        cmd.envs(place.env(d));
        if !run(cmd) || !place.no_violation(d) {
            failed.push(format!("the conformance suite on the {} double", d.name));
        }
        // The NCCL and RCCL communicators on the double's engine: the watchdog thread, the
        // waiters, the ranks' own threads and the stream workers over one collective.
        place.clear_report(d);
        let mut nccl = tsan_cargo();
        nccl.arg("test").args(tsan_args(triple)).args(["-p", "gpuport-collective"]);
        for test in NCCL_TESTS {
            nccl.args(["--test", test]);
        }
        nccl.args(["--", "--ignored"]).envs(place.env(d));
        if !run(nccl) || !place.no_violation(d) {
            failed.push(format!("ThreadSanitizer: the NCCL communicators on the {} double", d.name));
        }
    }
}

/// The communicators' tests on a double's NCCL or RCCL (one process: the ranks are its
/// devices, driven by one thread or by one thread each).
const NCCL_TESTS: [&str; 4] = ["nccl_on_double", "nccl_watchdog_on_double", "nccl_ranks_on_double", "nccl_one_rank"];

/// The collectives' multi-rank tests under ThreadSanitizer, two ranks under the `mpich`
/// wheel's `mpiexec`: a collective's call shared by the calling thread (started at once, or
/// tested while it waits) and the stream's worker (carrying it on). `filter` picks tests
/// (all when `None`); the consistency check's test runs in every case.
pub(super) fn thread_collectives(triple: &str, filter: Option<&str>, failed: &mut Vec<String>) {
    // The launcher and the library come with the pinned test packages.
    let found = crate::python::ensure_venv().and_then(|()| crate::collectives::mpich());
    let (mpiexec, library) = match found {
        Ok(found) => found,
        Err(e) => {
            failed.push(format!("ThreadSanitizer: the collectives: {e}"));
            return;
        }
    };
    let mut build = tsan_cargo();
    build.env_remove("TSAN_OPTIONS");
    build.arg("test").args(tsan_args(triple)).args([
        "-p",
        "gpuport-collective",
        "--tests",
        "--no-run",
        "--message-format=json",
    ]);
    let built = build.stderr(std::process::Stdio::inherit()).output();
    let artifacts = match built {
        Ok(out) if out.status.success() => crate::gpu_bundle::artifacts(&String::from_utf8_lossy(&out.stdout)),
        _ => {
            failed.push("ThreadSanitizer: building the collectives' tests".into());
            return;
        }
    };
    for (target, check, filter) in [("ranks", false, filter), ("check", true, None)] {
        let Some(exe) = artifacts.iter().find(|a| a.target == target).map(|a| a.executable.clone()) else {
            failed.push(format!("ThreadSanitizer: cargo gave no {target} test"));
            continue;
        };
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=10", "1800"]).arg(&mpiexec).args(["-n", "2"]).arg(exe);
        cmd.args(["--include-ignored", "--test-threads=1"]).args(filter);
        cmd.env("GPUPORT_MPI_LIBRARY", &library).env("GPUPORT_COLLECTIVE_CHECK", if check { "1" } else { "0" });
        cmd.env("TSAN_OPTIONS", "halt_on_error=1 second_deadlock_stack=1").env_remove("GPUPORT_BACKENDS");
        if !run(cmd) {
            failed.push(format!("ThreadSanitizer: the collectives' {target} test under mpiexec -n 2"));
        }
    }
}

/// Runs `steps`, then the conformance suite on `doubles`, under ThreadSanitizer.
pub(super) fn thread_runs(steps: &[Run], doubles: &[&Double], failed: &mut Vec<String>) -> Result<(), String> {
    ensure_nightly(&[RUST_SRC])?;
    let triple = host_triple()?;
    for step in steps {
        if !run(tsan_command(&triple, step, &[])) {
            failed.push(format!("ThreadSanitizer: {} {}", step.package, step.args.join(" ")));
        }
    }
    thread_on_doubles(&triple, doubles, failed);
    Ok(())
}

/// `cargo xtask sanitize thread`: every threaded test crate, then the conformance suite on
/// CUDA, ROCm 6 and ROCm 5.2 through their doubles, then the collectives with two ranks.
pub fn thread() -> Result<(), String> {
    let mut failed = Vec::new();
    thread_runs(THREAD_RUNS, &DOUBLES.iter().collect::<Vec<_>>(), &mut failed)?;
    thread_collectives(&host_triple()?, None, &mut failed);
    finish("ThreadSanitizer", failed)
}
