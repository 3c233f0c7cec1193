//! The driver doubles: `cargo xtask doubles` builds the CUDA driver double and the HIP
//! runtime double (as ROCm 6.4 and as ROCm 5.2) from `tests/driver-doubles/` into
//! `target/driver-doubles/`, under the names the vendors' libraries have; `cargo xtask
//! test --backend cuda|rocm --double` runs the CUDA or ROCm backend's tests on them
//! (`--backend all` runs all three), with the validation layer's report file checked:
//! one report fails the run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, run, run_tests, Tally};

/// One double: which backend it serves, the variable that loads it, and where it goes.
#[derive(Clone, Copy)]
pub(crate) struct Double {
    /// A name for reports (`cuda`, `rocm6`, `rocm5`).
    pub name: &'static str,
    /// The gpuport backend it stands in for.
    pub backend: &'static str,
    /// The crate, and the features it is built with.
    package: &'static str,
    features: &'static [&'static str],
    /// The library's file name (as the vendor's).
    file: &'static str,
    /// The variable gpuport loads it through.
    env: &'static str,
}

/// Every double.
pub(crate) const DOUBLES: &[Double] = &[
    Double {
        name: "cuda",
        backend: "cuda",
        package: "gpuport-cuda-double",
        features: &[],
        file: "libcuda.so.1",
        env: "GPUPORT_CUDA_LIBRARY",
    },
    Double {
        name: "rocm6",
        backend: "rocm",
        package: "gpuport-hip-double",
        features: &[],
        file: "libamdhip64.so.6",
        env: "GPUPORT_HIP_LIBRARY",
    },
    Double {
        name: "rocm5",
        backend: "rocm",
        package: "gpuport-hip-double",
        features: &["rocm5"],
        file: "libamdhip64.so.5",
        env: "GPUPORT_HIP_LIBRARY",
    },
];

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"))
}

/// Where a double's library is put.
pub(crate) fn library(d: &Double) -> PathBuf {
    target_dir().join("driver-doubles").join(d.name).join(d.file)
}

/// Builds every double into `target/driver-doubles/NAME/`.
pub(crate) fn build() -> Result<(), String> {
    for d in DOUBLES {
        let mut cmd = cargo();
        cmd.args(["build", "-q", "-p", d.package]);
        if !d.features.is_empty() {
            cmd.args(["--features", &d.features.join(",")]);
        }
        if !run(cmd) {
            return Err(format!("building the {} double failed", d.name));
        }
        let built = target_dir().join("debug").join(format!("lib{}.so", d.package.replace('-', "_")));
        let dest = library(d);
        std::fs::create_dir_all(dest.parent().unwrap_or(Path::new(".")))
            .and_then(|_| std::fs::copy(&built, &dest))
            .map_err(|e| format!("copying {} to {}: {e}", built.display(), dest.display()))?;
        eprintln!("xtask: {} double at {}", d.name, dest.display());
    }
    Ok(())
}

/// The environment of a run on double `d`: its library — and the other vendor's double
/// too (the CUDA double beside the HIP ones, ROCm 6 beside CUDA), so that paths between
/// the two backends run — its report file, and the backend under test.
fn double_env(d: &Double, report: &Path) -> Vec<(&'static str, OsString)> {
    let absolute = |d: &Double| std::path::absolute(library(d)).unwrap_or_else(|_| library(d)).into_os_string();
    let other = if d.backend == "cuda" { &DOUBLES[1] } else { &DOUBLES[0] };
    vec![
        (other.env, absolute(other)),
        (d.env, absolute(d)),
        ("GPUPORT_DOUBLE_REPORT", report.as_os_str().to_owned()),
        ("GPUPORT_CONFORMANCE_BACKENDS", d.backend.into()),
    ]
}

/// A command with the double loaded (see [`double_env`]).
fn with_double(mut cmd: Command, d: &Double, report: &Path) -> Command {
    cmd.envs(double_env(d, report));
    cmd.env_remove("GPUPORT_BACKENDS");
    cmd
}

/// The tests that need a device of `backend` (`cuda`, `rocm`), ignored by default: its
/// own device tests (`backends/*/tests/gpu.rs`) and the interchange tests on its arrays.
/// A named run includes exactly these — never the other vendor's, nor the checks that
/// need a real library without a device.
pub(crate) fn device_tests(backend: &str) -> Vec<(String, Command)> {
    let own = if backend == "cuda" { "gpuport-cuda" } else { "gpuport-rocm" };
    let mut device = cargo();
    device.args(["test", "-p", own, "--test", "gpu", "--", "--include-ignored"]);
    let mut interchange = cargo();
    interchange.args(["test", "-p", "gpuport-dlpack", "-p", "gpuport-cai", "--test", "vendor_devices"]);
    interchange.args(["--", "--include-ignored"]);
    vec![(format!("{backend} device tests"), device), (format!("DLPack and CAI on {backend} arrays"), interchange)]
}

/// Runs a backend's tests on its double: the whole conformance suite (two devices,
/// kernels included), the backend's own device tests, the mutation check's driver
/// mutants and the fault-injection tests. Fails
/// on a failed test and on any validation report.
pub(crate) fn test_on(d: &Double, tally: &mut Tally, python: bool) -> bool {
    // Absolute: test binaries run in their own crate's folder.
    let report = target_dir().join("driver-doubles").join(format!("{}-report.txt", d.name));
    let report = std::path::absolute(&report).unwrap_or(report);
    let _ = std::fs::remove_file(&report);
    println!("\nxtask: the {} backend on the {} double ({})", d.backend, d.name, library(d).display());
    let mut conformance = cargo();
    conformance.args(["test", "-p", "gpuport-conformance", "--test", "conformance"]);
    let mut ok = run_tests(with_double(conformance, d, &report), tally);
    for (_, cmd) in device_tests(d.backend) {
        ok &= run_tests(with_double(cmd, d, &report), tally);
    }
    // A double built with features (ROCm 5.2) checks its own version's answers; the
    // default builds' tests run with the workspace.
    if !d.features.is_empty() {
        let mut own = cargo();
        own.args(["test", "-p", d.package, "--features", &d.features.join(","), "--test", "versions"]);
        ok &= run_tests(own, tally);
    }
    // The mutation check's driver mutants: the suite on this backend over the double given
    // one flaw at a time must fail in the case that checks the broken rule. The flaws live
    // in the simulation both ROCm versions share, so ROCm 6 alone runs them.
    if d.features.is_empty() {
        let mut mutants = cargo();
        mutants.args(["test", "-p", "gpuport-mutants", "--test", "mutation_check", "--", "--ignored"]);
        mutants.arg(format!("driver/{}/", d.backend));
        ok &= run_tests(with_double(mutants, d, &report), tally);
    }
    // One process per injected fault (tests/faults).
    let mut faults = cargo();
    faults.args(["test", "-p", "gpuport-faults", "--test", "faults"]);
    ok &= run_tests(with_double(faults, d, &report), tally);
    // The Python module's own tests on this backend's arrays (the wheel is installed by
    // the caller). The interpreter does not free what it holds at exit, so the double's
    // exit check is off for it; every other check stays on.
    let mut env = double_env(d, &report);
    env.push(("GPUPORT_DOUBLE_LEAK_CHECK", "0".into()));
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let files: &[&str] = if d.backend == "cuda" {
        &["tests/python/test_vendor_devices.py", "tests/python/test_gpu.py"]
    } else {
        &["tests/python/test_vendor_devices.py"]
    };
    if !python {
        println!("xtask: the Python tests on the {} double left out (--no-python)", d.name);
    } else if let Err(e) = crate::python::pytest(files, &env) {
        eprintln!("xtask: {e}");
        tally.note_python(false);
        ok = false;
    } else {
        tally.note_python(true);
    }
    match std::fs::read_to_string(&report) {
        Ok(text) if !text.trim().is_empty() => {
            let n = text.lines().count();
            eprintln!("xtask: the {} double reported {n} violation(s):\n{text}", d.name);
            tally.failed += 1;
            false
        }
        _ => {
            println!("xtask: the {} double reported no violation", d.name);
            ok
        }
    }
}
