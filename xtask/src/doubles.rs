//! The driver doubles: `cargo xtask doubles` builds the CUDA driver double and the HIP
//! runtime double (as ROCm 6.4, as HIP 7.2 and as ROCm 5.2) from `tests/doubles/` into
//! `target/doubles/`, under the names the vendors' libraries have; `cargo xtask
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
    /// A name for reports (`cuda`, `rocm6`, `rocm7`, `rocm5`).
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
    /// The collectives engine's file name the same library also answers to (it exports
    /// NCCL's API: `libnccl.so.2` beside the CUDA double, `librccl.so.1` beside the HIP
    /// ones), a link to it: the dynamic loader opens a file once, so the engine and the
    /// driver share one simulated machine.
    engine_file: &'static str,
    /// The variable gpuport loads that engine through.
    engine_env: &'static str,
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
        engine_file: "libnccl.so.2",
        engine_env: "GPUPORT_NCCL_LIBRARY",
    },
    Double {
        name: "rocm6",
        backend: "rocm",
        package: "gpuport-hip-double",
        features: &[],
        file: "libamdhip64.so.6",
        env: "GPUPORT_HIP_LIBRARY",
        engine_file: "librccl.so.1",
        engine_env: "GPUPORT_RCCL_LIBRARY",
    },
    Double {
        name: "rocm7",
        backend: "rocm",
        package: "gpuport-hip-double",
        features: &["rocm7"],
        file: "libamdhip64.so.7",
        env: "GPUPORT_HIP_LIBRARY",
        engine_file: "librccl.so.1",
        engine_env: "GPUPORT_RCCL_LIBRARY",
    },
    Double {
        name: "rocm5",
        backend: "rocm",
        package: "gpuport-hip-double",
        features: &["rocm5"],
        file: "libamdhip64.so.5",
        env: "GPUPORT_HIP_LIBRARY",
        engine_file: "librccl.so.1",
        engine_env: "GPUPORT_RCCL_LIBRARY",
    },
];

pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"))
}

/// Where a build of the doubles lives: the folder cargo leaves the libraries in, and the
/// folder they are copied to under their vendors' names (`ROOT/NAME/FILE`) with the
/// validation layer's report files beside them. The plain build and ThreadSanitizer's
/// instrumented one each have their own.
pub(crate) struct Place {
    built: PathBuf,
    root: PathBuf,
}

impl Place {
    /// The plain debug build: `target/debug` into `target/doubles`.
    pub(crate) fn plain() -> Place {
        Place { built: target_dir().join("debug"), root: target_dir().join("doubles") }
    }

    /// A build whose libraries cargo leaves in `built`, copied into `root`.
    pub(crate) fn new(built: PathBuf, root: PathBuf) -> Place {
        Place { built, root }
    }

    /// Where double `d`'s library is put (absolute: test binaries run in their own crate's
    /// folder).
    pub(crate) fn library(&self, d: &Double) -> PathBuf {
        absolute(self.root.join(d.name).join(d.file))
    }

    /// Where double `d`'s collectives engine link is put.
    fn engine(&self, d: &Double) -> PathBuf {
        absolute(self.root.join(d.name).join(d.engine_file))
    }

    /// The validation layer's report file for runs on double `d`.
    fn report(&self, d: &Double) -> PathBuf {
        absolute(self.root.join(format!("{}-report.txt", d.name)))
    }

    /// Builds double `d` with `cargo` (a `cargo` command with the toolchain and environment
    /// of this place's build; `build -q -p PACKAGE`, then `args`, are added) and copies it
    /// into place.
    pub(crate) fn build(&self, d: &Double, mut cargo: Command, args: &[&str]) -> Result<(), String> {
        cargo.args(["build", "-q", "-p", d.package]).args(args);
        if !d.features.is_empty() {
            cargo.args(["--features", &d.features.join(",")]);
        }
        if !run(cargo) {
            return Err(format!("building the {} double failed", d.name));
        }
        let built = self.built.join(format!("lib{}.so", d.package.replace('-', "_")));
        let dest = self.library(d);
        std::fs::create_dir_all(dest.parent().unwrap_or(Path::new(".")))
            .and_then(|_| std::fs::copy(&built, &dest))
            .map_err(|e| format!("copying {} to {}: {e}", built.display(), dest.display()))?;
        let engine = dest.with_file_name(d.engine_file);
        let _ = std::fs::remove_file(&engine);
        std::os::unix::fs::symlink(d.file, &engine)
            .map_err(|e| format!("linking {} to {}: {e}", engine.display(), d.file))?;
        eprintln!("xtask: {} double at {} (also {})", d.name, dest.display(), engine.display());
        Ok(())
    }

    /// The environment of a run on double `d`: its library — and the other vendor's double
    /// too (the CUDA double beside the HIP ones, ROCm 6 beside CUDA), so that paths between
    /// the two backends run — both doubles' collectives engines (NCCL, RCCL), its report
    /// file, and the backend under test. The report file
    /// is emptied: what it holds afterwards is this run's.
    pub(crate) fn env(&self, d: &Double) -> Vec<(&'static str, OsString)> {
        let other = if d.backend == "cuda" { &DOUBLES[1] } else { &DOUBLES[0] };
        let mut env = vec![
            (other.env, self.library(other).into_os_string()),
            (d.env, self.library(d).into_os_string()),
            (other.engine_env, self.engine(other).into_os_string()),
            (d.engine_env, self.engine(d).into_os_string()),
            ("GPUPORT_DOUBLE_REPORT", self.report(d).into_os_string()),
            ("GPUPORT_CONFORMANCE_BACKENDS", d.backend.into()),
            // Kernels compiled in this run are compiled, not read from a user's cache.
            ("GPUPORT_KERNEL_CACHE", absolute(self.root.join("kernel-cache")).into_os_string()),
        ];
        env.extend(compilers());
        env
    }

    /// Empties double `d`'s report file before a run.
    pub(crate) fn clear_report(&self, d: &Double) {
        let _ = std::fs::remove_file(self.report(d));
        let _ = std::fs::remove_dir_all(self.root.join("kernel-cache"));
    }

    /// Whether double `d`'s validation layer reported nothing since [`Place::clear_report`];
    /// prints the reports when it did.
    pub(crate) fn no_violation(&self, d: &Double) -> bool {
        self.violations(d).is_none()
    }

    /// The reports of double `d`'s validation layer since [`Place::clear_report`] (the
    /// first few lines), printed whole; `None` when there are none.
    pub(crate) fn violations(&self, d: &Double) -> Option<Vec<String>> {
        match std::fs::read_to_string(self.report(d)) {
            Ok(text) if !text.trim().is_empty() => {
                let n = text.lines().count();
                eprintln!("xtask: the {} double reported {n} violation(s):\n{text}", d.name);
                let mut first: Vec<String> = text.lines().take(3).map(str::to_owned).collect();
                first.push(format!("({n} report(s) in all)"));
                Some(first)
            }
            _ => {
                println!("xtask: the {} double reported no violation", d.name);
                None
            }
        }
    }
}

/// The runtime compilers the doubles' runs compile with, where this machine has them: NVRTC
/// from the Python test environment's `nvidia-cuda-nvrtc-cu12` wheel, hiprtc inside
/// Debian's ROCm 5.2 runtime (both compile on the CPU; the doubles run the images).
pub(crate) fn compilers() -> Vec<(&'static str, OsString)> {
    let mut found = Vec::new();
    if let Some(nvrtc) = crate::python::site_packages_file("nvidia/cuda_nvrtc/lib/libnvrtc.so.12") {
        found.push(("GPUPORT_NVRTC_LIBRARY", nvrtc.into_os_string()));
    }
    let hiprtc = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    if hiprtc.is_file() {
        found.push(("GPUPORT_HIPRTC_LIBRARY", hiprtc.as_os_str().to_owned()));
    }
    found
}

fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// Builds every double into `target/doubles/NAME/`.
pub(crate) fn build() -> Result<(), String> {
    let place = Place::plain();
    DOUBLES.iter().try_for_each(|d| place.build(d, cargo(), &[]))
}

/// A command with the double loaded (see [`Place::env`]).
fn with_double(mut cmd: Command, d: &Double) -> Command {
    cmd.envs(Place::plain().env(d));
    cmd.env_remove("GPUPORT_BACKENDS");
    cmd
}

/// The tests that need a device of `backend` (`cuda`, `rocm`), ignored by default: its
/// own device tests (`backends/*/tests/gpu.rs`), the interchange tests on its arrays and
/// the copy kernels' test.
/// A named run includes exactly these — never the other vendor's, nor the checks that
/// need a real library without a device.
pub(crate) fn device_tests(backend: &str) -> Vec<(String, Command)> {
    let own = if backend == "cuda" { "gpuport-cuda" } else { "gpuport-rocm" };
    let mut device = cargo();
    // One test at a time: several hold a stream shut, and on a real driver another test's
    // allocation or free waits for it and stalls every thread's driver calls meanwhile.
    device.args(["test", "-p", own, "--test", "gpu", "--", "--include-ignored", "--test-threads=1"]);
    let mut interchange = cargo();
    interchange.args(["test", "-p", "gpuport-dlpack", "-p", "gpuport-cai", "--test", "vendor_devices"]);
    interchange.args(["--", "--include-ignored"]);
    let mut copies = cargo();
    copies.args(["test", "-p", "gpuport-runtime", "--test", "copy_kernels", "--", "--include-ignored"]);
    vec![
        (format!("{backend} device tests"), device),
        (format!("DLPack and CAI on {backend} arrays"), interchange),
        (format!("strided copies on {backend} arrays"), copies),
    ]
}

/// Runs a backend's tests on its double: the whole conformance suite (two devices,
/// kernels included), the backend's own device tests, staged copies between the two
/// vendors, the mutation check's driver
/// mutants and the fault-injection tests. Fails
/// on a failed test and on any validation report.
pub(crate) fn test_on(d: &Double, tally: &mut Tally, python: bool) -> bool {
    let place = Place::plain();
    place.clear_report(d);
    println!("\nxtask: the {} backend on the {} double ({})", d.backend, d.name, place.library(d).display());
    let mut conformance = cargo();
    conformance.args(["test", "-p", "gpuport-conformance", "--test", "conformance"]);
    let mut ok = run_tests(with_double(conformance, d), tally);
    for (_, cmd) in device_tests(d.backend) {
        ok &= run_tests(with_double(cmd, d), tally);
    }
    // Staged copies between the two vendors, which only the doubles can show pipelined
    // (they say how much work is queued).
    let mut between = cargo();
    between.args(["test", "-p", "gpuport-runtime", "--test", "between_vendors", "--", "--include-ignored"]);
    ok &= run_tests(with_double(between, d), tally);
    // gpuport's NCCL and RCCL loader on the doubles' engines (found where they are named,
    // their version read, every call gpuport resolves present), and its communicators on
    // them: every collective, ordering, refusals, ranks made one at a time, and the watchdog.
    let mut engines = cargo();
    engines.args(["test", "-p", "gpuport-collective", "--test", "engines_on_double", "--test", "nccl_on_double"]);
    engines.args(["--test", "nccl_watchdog_on_double", "--test", "nccl_one_rank", "--test", "nccl_ranks_on_double"]);
    engines.args(["--", "--ignored"]);
    ok &= run_tests(with_double(engines, d), tally);
    // Four ranks in one process: the double presenting four devices, a rank on each.
    let mut four = cargo();
    four.args(["test", "-p", "gpuport-collective", "--test", "nccl_ranks_on_double", "--", "--ignored"]);
    let mut four = with_double(four, d);
    four.env("GPUPORT_DOUBLE_DEVICES", "4");
    ok &= run_tests(four, tally);
    // An MPI communicator made into the engine's (the unique id over MPI), with the `mpich`
    // wheel's library: a world of this process alone, whose ranks the double can hold.
    match crate::collectives::mpich() {
        _ if !python => {
            let why = "--no-python: its MPI is the Python environment's";
            println!("xtask: Communicator::for_device on the {} double left out ({why})", d.name);
        }
        Ok((_, library)) => {
            let mut for_device = cargo();
            for_device.args(["test", "-p", "gpuport-collective", "--test", "nccl_bootstrap_on_double"]);
            for_device.args(["--", "--ignored"]).env("GPUPORT_MPI_LIBRARY", library).env("GPUPORT_MPI_SINGLETON", "1");
            ok &= run_tests(with_double(for_device, d), tally);
        }
        Err(e) => {
            tally.note_failure(format!("Communicator::for_device on the {} double", d.name), vec![e]);
            ok = false;
        }
    }
    // A double built with features (ROCm 5.2, HIP 7.2) checks its own version's answers;
    // the default builds' tests run with the workspace.
    if !d.features.is_empty() {
        let mut own = cargo();
        own.args(["test", "-p", d.package, "--features", &d.features.join(","), "--test", "versions"]);
        ok &= run_tests(own, tally);
    }
    // The mutation check's driver mutants: the suite on this backend over the double given
    // one flaw at a time must fail in the case that checks the broken rule. The flaws live
    // in the simulation every version shares; they run on each version whose stream
    // handles and lookups differ (ROCm 6, HIP 7), not on 5.2 as well.
    if d.name != "rocm5" {
        let mut mutants = cargo();
        mutants.args(["test", "-p", "gpuport-mutants", "--test", "mutation_check", "--", "--ignored"]);
        mutants.arg(format!("driver/{}/", d.backend));
        ok &= run_tests(with_double(mutants, d), tally);
    }
    // One process per injected fault (tests/faults).
    let mut faults = cargo();
    faults.args(["test", "-p", "gpuport-faults", "--test", "faults"]);
    ok &= run_tests(with_double(faults, d), tally);
    // The Python module's own tests on this backend's arrays (the wheel is installed by
    // the caller). The interpreter does not free what it holds at exit, so the double's
    // exit check is off for it; every other check stays on.
    let mut env = place.env(d);
    env.push(("GPUPORT_DOUBLE_LEAK_CHECK", "0".into()));
    // The collectives on this backend's arrays, with two ranks (MPI comes with the Python
    // environment's test packages).
    if !python {
        println!(
            "xtask: the collectives on the {} double left out (--no-python: their MPI is the Python environment's)",
            d.name
        );
    } else if d.name != "rocm5" {
        ok &= crate::collectives::on_double(d.name, &place.env(d), tally);
    }
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let files: &[&str] = if d.backend == "cuda" {
        &[
            "tests/python/test_vendor_devices.py",
            "tests/python/test_raw_kernels.py",
            "tests/python/test_distributed_devices.py",
            "tests/python/test_gpu.py",
        ]
    } else {
        &[
            "tests/python/test_vendor_devices.py",
            "tests/python/test_raw_kernels.py",
            "tests/python/test_distributed_devices.py",
        ]
    };
    if !python {
        println!("xtask: the Python tests on the {} double left out (--no-python)", d.name);
    } else {
        let (passed, failed) = crate::python::pytest(files, &env);
        tally.note_python(passed, &failed);
        ok &= passed;
    }
    if let Some(reports) = place.violations(d) {
        tally.note_failure(format!("the {} double's validation layer", d.name), reports);
        ok = false;
    }
    ok
}
