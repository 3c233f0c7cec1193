//! Miri: undefined behaviour, provenance and data races between Miri's own threads.

use std::process::Command;

use super::{
    ensure_nightly, finish, Run, ALL, CALLBACK_SLOTS, CONFORMANCE, INTERCHANGE, MIRI, NIGHTLY, PLUGIN_ABI,
    QUEUE_STRICT, RUST_SRC, VENDOR_STREAMS,
};
use crate::{run, rustup_cargo};

/// What Miri runs: the queue kit, the interchange crates' tests, the vendor kit's streams,
/// the plugin ABI, the host and ext backends, and the conformance suite on `host` and `ext`.
const MIRI_RUNS: &[Run] = &[
    QUEUE_STRICT[0],
    QUEUE_STRICT[1],
    INTERCHANGE[0],
    INTERCHANGE[1],
    VENDOR_STREAMS,
    CALLBACK_SLOTS,
    PLUGIN_ABI,
    Run { package: "gpuport-host", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-ext", args: ALL, env: &[], strict_provenance: false },
    CONFORMANCE,
];

/// What CI runs under Miri on every change: the queue kit, the vendor kit's streams (the
/// host-callback slots are raw pointers passed between threads) and the interchange crates
/// (minutes). The plugin ABI, the host and ext backends and the conformance suite are left
/// to `sanitize miri` (the last three take Miri most of an hour on two cores), which runs
/// them before a change to those crates lands; CI's ThreadSanitizer runs drive the vendor
/// kit's streams through the driver doubles as well.
pub(super) const MIRI_CI_RUNS: &[Run] =
    &[QUEUE_STRICT[0], QUEUE_STRICT[1], VENDOR_STREAMS, CALLBACK_SLOTS, INTERCHANGE[0], INTERCHANGE[1]];

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

/// `cargo +nightly miri test` for `step`, with `features` enabled.
pub(super) fn miri_command(step: &Run, features: &[&str]) -> Command {
    let mut cmd = rustup_cargo(NIGHTLY);
    cmd.args(["miri", "test", "-q", "-p", step.package]).args(step.args);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let flags =
        if step.strict_provenance { format!("{MIRI_FLAGS} -Zmiri-strict-provenance") } else { MIRI_FLAGS.into() };
    cmd.env("MIRIFLAGS", flags).env_remove("GPUPORT_BACKENDS");
    cmd.envs(step.env.iter().copied());
    cmd
}

/// Runs `steps` under Miri.
pub(super) fn miri_runs(steps: &[Run], failed: &mut Vec<String>) -> Result<(), String> {
    ensure_nightly(&[MIRI, RUST_SRC])?;
    for step in steps {
        if !run(miri_command(step, &[])) {
            failed.push(format!("Miri: {} {}", step.package, step.args.join(" ")));
        }
    }
    Ok(())
}

/// `cargo xtask sanitize miri`.
pub fn miri() -> Result<(), String> {
    let mut failed = Vec::new();
    miri_runs(MIRI_RUNS, &mut failed)?;
    finish("Miri", failed)
}
