//! `cargo xtask sanitize miri|thread|address|bugs|ci`: the tests that exercise gpuport's unsafe
//! and threaded code, under Miri (undefined behaviour, provenance, data races between
//! Miri's threads) or ThreadSanitizer (data races on real threads, the CUDA and ROCm
//! backends' included, on their driver doubles) or AddressSanitizer (the Python module's
//! foreign edges), with the nightly components fetched where they are missing. `bugs`
//! builds deliberate bugs and requires each checker to report its own; `ci` is the part of
//! all this that CI runs on every change.
//!
//! What runs is the code as shipped: the only differences under Miri are the stand-ins
//! written at the spot where code calls what Miri cannot execute (`sysinfo(2)` for the
//! host's memory size, CPUID for the CPU's name, `dlopen` of the vendor runtimes, which
//! discovery then reports unavailable with that reason) and cases that shrink their sizes.

use std::path::PathBuf;
use std::process::Command;

use crate::doubles::{Double, DOUBLES};
use crate::{run, rustup_cargo};

mod address;
mod bugs;
mod miri;
mod thread;

pub use address::address;
pub use bugs::bugs;
pub use miri::miri;
pub use thread::thread;

/// The nightly toolchain the checkers run on.
const NIGHTLY: &str = "+nightly";

/// One crate's tests under a checker: the package, the test targets, and the environment
/// the run needs.
#[derive(Clone, Copy)]
struct Run {
    package: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// Whether Miri can check this run with strict provenance: every pointer the tests
    /// dereference was derived from an allocation, never made from an integer. DLPack's
    /// tests can (a producer hands over a pointer, and the import keeps it); the CUDA
    /// Array Interface's cannot (its address is an integer by the protocol's definition),
    /// nor can runs that reach host memory through a backend that knows it only by address.
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

/// The queue kit's tests, checked with strict provenance (see [`Run::strict_provenance`]).
const QUEUE_STRICT: [Run; 2] = [
    Run { package: "gpuport-queue", args: &["--lib"], env: &[], strict_provenance: true },
    Run { package: "gpuport-queue", args: &["--tests"], env: &[], strict_provenance: true },
];

/// The interchange crates' unit and integration tests.
/// The plugin ABI's Rust side, both ways: the loader's tests drive the ext device through
/// the C table `gpuport-plugin-export` exports, and feed the loader spoiled tables.
const PLUGIN_ABI: Run = Run { package: "gpuport-loaded", args: &["--lib"], env: &[], strict_provenance: false };

/// The vendor kit's streams against a fake runtime: host callbacks' slots taken on one
/// thread and given back on another (a list linked through the slots, passed between
/// threads), and the reporter a free slot keeps reused by the next stream's callback.
const VENDOR_STREAMS: Run =
    Run { package: "gpuport-vendor-kit", args: &["--test", "vendor_stream"], env: &[], strict_provenance: true };

/// The host-callback slots' own tests: a thread's kept slots returned to the depot at its
/// exit, a refused slot's closure handed back, a second run and a NULL user running nothing.
const CALLBACK_SLOTS: Run =
    Run { package: "gpuport-vendor-kit", args: &["--lib", "callback_slots::"], env: &[], strict_provenance: true };

const INTERCHANGE: [Run; 2] = [
    Run { package: "gpuport-dlpack", args: ALL, env: &[], strict_provenance: true },
    Run { package: "gpuport-cai", args: ALL, env: &[], strict_provenance: false },
];

/// The software devices' threads: the queue kit and the host and ext backends.
const SOFTWARE_DEVICES: [Run; 3] = [
    Run { package: "gpuport-queue", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-host", args: ALL, env: &[], strict_provenance: false },
    Run { package: "gpuport-ext", args: ALL, env: &[], strict_provenance: false },
];

/// The nightly components a checker needs: `miri`, and `rust-src` for the standard
/// library's sources (Miri and ThreadSanitizer's `-Zbuild-std` rebuild it).
const MIRI: &str = "miri";
const RUST_SRC: &str = "rust-src";

/// Whether the nightly toolchain has `component` (or, for `None`, is installed at all).
fn nightly_has(component: Option<&str>) -> bool {
    match component {
        None => rustup_cargo(NIGHTLY).arg("--version").output().is_ok_and(|o| o.status.success()),
        Some(MIRI) => rustup_cargo(NIGHTLY).args(["miri", "--version"]).output().is_ok_and(|o| o.status.success()),
        Some(_) => {
            let sysroot =
                Command::new("rustc").args([NIGHTLY, "--print", "sysroot"]).env_remove("RUSTUP_TOOLCHAIN").output();
            sysroot.is_ok_and(|o| {
                o.status.success()
                    && PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
                        .join("lib/rustlib/src/rust/library")
                        .is_dir()
            })
        }
    }
}

/// Installs the nightly toolchain with `components` where it or one of them is missing.
fn ensure_nightly(components: &[&str]) -> Result<(), String> {
    if nightly_has(None) && components.iter().all(|c| nightly_has(Some(c))) {
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

/// `cargo xtask sanitize ci`: what CI runs on every change — Miri over the queue kit and
/// the interchange crates, ThreadSanitizer over the software devices and the conformance
/// suite on them and on the CUDA and ROCm 6 doubles, and the deliberate bugs.
pub fn ci() -> Result<(), String> {
    let mut failed = Vec::new();
    miri::miri_runs(miri::MIRI_CI_RUNS, &mut failed)?;
    let doubles: Vec<&Double> = DOUBLES.iter().filter(|d| d.name != "rocm5").collect();
    thread::thread_runs(thread::THREAD_CI_RUNS, &doubles, &mut failed)?;
    // The collectives' ordering tests (the calling thread and the stream's worker sharing a
    // call): the whole multi-rank matrix takes minutes under the sanitizer.
    thread::thread_collectives(&host_triple()?, Some("collective"), &mut failed);
    failed.extend(bugs::bug_failures(&[bugs::Checker::Miri, bugs::Checker::Thread])?);
    finish("the sanitizers' CI run", failed)
}

fn finish(checker: &str, failed: Vec<String>) -> Result<(), String> {
    if failed.is_empty() {
        eprintln!("xtask: {checker}: every run passed");
        Ok(())
    } else {
        Err(format!("{checker}: {} run(s) failed:\n  {}", failed.len(), failed.join("\n  ")))
    }
}
