//! `cargo xtask sanitize miri|thread`: the tests that exercise gpuport's unsafe and
//! threaded code, under Miri (undefined behaviour, provenance, data races between Miri's
//! threads) or ThreadSanitizer (data races on real threads), with the nightly components
//! fetched where they are missing.
//!
//! What runs is the code as shipped: the only differences under Miri are the stand-ins
//! written at the spot where code calls what Miri cannot execute (`sysinfo(2)` for the
//! host's memory size, CPUID for the CPU's name, `dlopen` of the vendor runtimes, which
//! discovery then reports unavailable with that reason) and cases that shrink their sizes.

use std::process::Command;

use crate::{run, rustup_cargo};

/// The nightly toolchain the checkers run on.
const NIGHTLY: &str = "+nightly";

/// One crate's tests under a checker: the package, the test targets, and the environment
/// the run needs.
struct Run {
    package: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// Whether Miri can check this run with strict provenance: every pointer the tests
    /// dereference was derived from an allocation, never made from an integer. Runs that
    /// import through DLPack or the CUDA Array Interface cannot: an address handed across
    /// those protocols is an integer by the protocol's definition.
    strict_provenance: bool,
}

/// A crate's unit and integration tests (doc tests are examples, not checked code paths).
const ALL: &[&str] = &["--lib", "--tests"];

/// The conformance harness on the two software backends.
const CONFORMANCE: Run = Run {
    package: "gpuport-conformance",
    args: &["--test", "conformance"],
    env: &[("GPUPORT_CONFORMANCE_BACKENDS", "host,ext")],
    strict_provenance: false,
};

/// What Miri runs: the interchange crates' tests, the queue kit, the host and ext
/// backends, and the conformance suite on `host` and `ext`.
const MIRI_RUNS: &[Run] = &[
    Run { package: "gpuport-queue", args: &["--lib"], env: &[], strict_provenance: true },
    Run { package: "gpuport-queue", args: &["--tests"], env: &[], strict_provenance: true },
    Run { package: "gpuport-dlpack", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-cai", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-host", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-ext", args: ALL, env: &[], strict_provenance: false },
    CONFORMANCE,
];

/// What ThreadSanitizer runs: every test crate that runs threads.
const THREAD_RUNS: &[Run] = &[
    Run { package: "gpuport", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-queue", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-host", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-ext", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-dlpack", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-cai", args: ALL, env: &[], strict_provenance: false },
    CONFORMANCE,
];

/// Miri's flags for every run:
/// - `-Zmiri-disable-isolation`: tests read the environment's clock and files the way the
///   code does outside Miri;
/// - `-Zmiri-ignore-leaks`: the stream pool's workers and the release thread are
///   process-wide threads that outlive `main` on purpose (they park, and exit after being
///   idle); Miri counts a thread still alive at exit, and what it holds, as a leak. Nothing
///   else is tolerated;
/// - `-Zmiri-num-cpus=4`: Miri reports one CPU unless told otherwise, and the queue kit
///   then never splits a large copy across threads nor spins before sleeping — paths every
///   real machine takes.
const MIRI_FLAGS: &str = "-Zmiri-disable-isolation -Zmiri-ignore-leaks -Zmiri-num-cpus=4";

/// Installs the nightly toolchain's `components` where `probe` (a `cargo +nightly`
/// subcommand) does not run.
fn ensure_nightly(probe: &[&str], components: &[&str]) -> Result<(), String> {
    let mut check = rustup_cargo(NIGHTLY);
    check.args(probe);
    if check.output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    let mut install = Command::new("rustup");
    install.args(["toolchain", "install", "nightly", "--profile", "minimal"]);
    for c in components {
        install.args(["--component", c]);
    }
    if run(install) {
        Ok(())
    } else {
        Err("rustup could not install the nightly components".into())
    }
}

/// The host's target triple (ThreadSanitizer's `-Zbuild-std` needs it named).
fn host_triple() -> Result<String, String> {
    let out = Command::new("rustc")
        .args([NIGHTLY, "-vV"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .map_err(|e| format!("could not run rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| "rustc -vV named no host".into())
}

/// `cargo xtask sanitize miri`.
pub fn miri() -> Result<(), String> {
    ensure_nightly(&["miri", "--version"], &["miri", "rust-src"])?;
    let mut failed = Vec::new();
    for step in MIRI_RUNS {
        let mut cmd = rustup_cargo(NIGHTLY);
        cmd.args(["miri", "test", "-q", "-p", step.package]).args(step.args);
        let flags =
            if step.strict_provenance { format!("{MIRI_FLAGS} -Zmiri-strict-provenance") } else { MIRI_FLAGS.into() };
        cmd.env("MIRIFLAGS", flags).env_remove("GPUPORT_BACKENDS");
        cmd.envs(step.env.iter().copied());
        if !run(cmd) {
            failed.push(format!("{} {}", step.package, step.args.join(" ")));
        }
    }
    finish("Miri", failed)
}

/// `cargo xtask sanitize thread`: the standard library is rebuilt instrumented
/// (`-Zbuild-std`), as ThreadSanitizer needs every access seen.
pub fn thread() -> Result<(), String> {
    ensure_nightly(&["--version"], &["rust-src"])?;
    let triple = host_triple()?;
    let mut failed = Vec::new();
    for step in THREAD_RUNS {
        let mut cmd = rustup_cargo(NIGHTLY);
        cmd.args(["test", "-q", "-Zbuild-std", "--target", &triple, "-p", step.package]).args(step.args);
        // A target folder of its own: instrumented and plain builds never mix.
        cmd.env("CARGO_TARGET_DIR", "target/tsan")
            .env("RUSTFLAGS", "-Zsanitizer=thread")
            .env("RUSTDOCFLAGS", "-Zsanitizer=thread")
            // A report fails the run at once; the threads that outlive `main` on purpose
            // (stream pool, release thread) are not reports.
            .env("TSAN_OPTIONS", "halt_on_error=1 second_deadlock_stack=1")
            .env_remove("GPUPORT_BACKENDS");
        cmd.envs(step.env.iter().copied());
        if !run(cmd) {
            failed.push(format!("{} {}", step.package, step.args.join(" ")));
        }
    }
    finish("ThreadSanitizer", failed)
}

fn finish(checker: &str, failed: Vec<String>) -> Result<(), String> {
    if failed.is_empty() {
        eprintln!("xtask: {checker}: every run passed");
        Ok(())
    } else {
        Err(format!("{checker}: {} run(s) failed:\n  {}", failed.len(), failed.join("\n  ")))
    }
}
