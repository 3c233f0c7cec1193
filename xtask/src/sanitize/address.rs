//! AddressSanitizer with leak detection over the Python module's tests: the foreign edges
//! (capsules and their deleters, the exchange API's C functions, the buffer protocol).

use std::path::PathBuf;
use std::process::Command;

use super::{ensure_nightly, host_triple, NIGHTLY};
use crate::{run, rustup_cargo};

/// Where AddressSanitizer's build of the Python module goes.
const ASAN_TARGET: &str = "target/asan";

/// A shared library the system C compiler knows (`cc -print-file-name`).
fn compiler_library(name: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .map_err(|e| format!("could not run {cc} to find {name}: {e}"))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if path.is_absolute() && path.exists() {
        Ok(path)
    } else {
        Err(format!("{cc} knows no {name} (for libasan.so, install the C compiler's AddressSanitizer runtime, e.g. Debian's libasan8)"))
    }
}

/// What the interpreter is started with (`LD_PRELOAD`). Python is not built instrumented,
/// so AddressSanitizer's shared runtime must come first into the process, and the
/// instrumented extension module calls into it: GCC's `libasan.so` (Rust links its own
/// runtime only into executables). The C++ runtime comes right after it: the runtime
/// intercepts `__cxa_throw` and must find the real one when it starts, and jaxlib, loaded
/// later, throws C++ exceptions.
fn asan_preload() -> Result<std::ffi::OsString, String> {
    let asan = compiler_library("libasan.so")?;
    let cxx = compiler_library("libstdc++.so.6")?;
    let mut preload = asan.into_os_string();
    preload.push(" ");
    preload.push(cxx);
    Ok(preload)
}

/// `cargo xtask sanitize address`: the Python module built with AddressSanitizer
/// (`-Zsanitizer=address`) and the Python tests run against it, leak detection on — the
/// foreign edges: capsules and their deleters, the exchange API's C functions, the buffer
/// protocol, the CUDA Array Interface's pointers, NumPy's and JAX's memory on the far side,
/// and the C device plugin (built instrumented) behind the plugin ABI.
pub fn address() -> Result<(), String> {
    let pytest = pytest_command(&[], &["tests/python"])?;
    if !run(pytest) {
        return Err("AddressSanitizer: the Python tests failed or reported (see above)".into());
    }
    eprintln!("xtask: AddressSanitizer: the Python tests passed with no report");
    Ok(())
}

/// pytest over `tests` against the Python module built with AddressSanitizer and with
/// `features` (of gpuport-python or, as `crate/feature`, of its dependencies).
pub(super) fn pytest_command(features: &[&str], tests: &[&str]) -> Result<Command, String> {
    let preload = asan_preload()?;
    let shadow = instrumented_module(features)?;
    let suppressions = std::path::absolute(LSAN_SUPPRESSIONS).map_err(|e| e.to_string())?;
    let mut pytest = crate::python::pytest_command(tests);
    // pytest captures Python's streams only, never the process's own descriptors: the
    // runtime writes its report to descriptor 2 and ends the process at once, before
    // pytest would show anything it had captured there.
    pytest.arg("--capture=sys");
    pytest
        .env("LD_PRELOAD", preload)
        // The instrumented module first, ahead of the installed one.
        .env("PYTHONPATH", shadow)
        // Every Python object from malloc, so AddressSanitizer sees them too (a capsule
        // or a NumPy array freed twice, a view used after its base went).
        .env("PYTHONMALLOC", "malloc")
        // Leaks are looked for once, as the interpreter starts to exit (the tests'
        // conftest calls the check then, and explains why), not by the runtime at exit:
        // at exit CPython leaves its own objects unfreed on purpose, which would bury a
        // real report. Python is not instrumented, so the checks that need every caller
        // instrumented stay off.
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:leak_check_at_exit=0:halt_on_error=1:detect_odr_violation=0:alloc_dealloc_mismatch=0",
        )
        .env("GPUPORT_LSAN_AT_EXIT", "1")
        // The C plugin the plugin tests build is instrumented as well: its memory and the
        // memory it hands across the boundary are checked (the preloaded runtime serves
        // both).
        .env("GPUPORT_PLUGIN_TEST_CFLAGS", "-fsanitize=address -fno-omit-frame-pointer")
        .env("LSAN_OPTIONS", format!("suppressions={}:print_suppressions=0", suppressions.display()));
    Ok(pytest)
}

/// Builds the Python module with AddressSanitizer and puts it, with the installed
/// package's Python files around it, in a folder of its own; returns the folder to put
/// first on `PYTHONPATH`.
fn instrumented_module(features: &[&str]) -> Result<PathBuf, String> {
    ensure_nightly(&[])?;
    let triple = host_triple()?;
    // The wheel installed into .venv brings the package around the module (its
    // `__init__.py`, stubs) and the test environment.
    crate::python::install()?;
    let mut build = rustup_cargo(NIGHTLY);
    // `--target`: the flags then reach the target's crates only, not build scripts and
    // procedural macros (an instrumented macro would be loaded into the compiler).
    build.args(["build", "-q", "-p", "gpuport-python", "--target", &triple]);
    if !features.is_empty() {
        build.args(["--features", &features.join(",")]);
    }
    build.env("CARGO_TARGET_DIR", ASAN_TARGET).env("RUSTFLAGS", "-Zsanitizer=address");
    if !run(build) {
        return Err("building the Python module with AddressSanitizer failed".into());
    }
    let package = crate::python::installed_package()?;
    let shadow = PathBuf::from(ASAN_TARGET).join("python");
    let module = shadow.join("gpuport");
    let _ = std::fs::remove_dir_all(&module);
    std::fs::create_dir_all(&module).map_err(|e| format!("creating {}: {e}", module.display()))?;
    for entry in std::fs::read_dir(&package).map_err(|e| format!("reading {}: {e}", package.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "py" || e == "pyi" || e == "typed") {
            let to = module.join(path.file_name().unwrap_or_default());
            std::fs::copy(&path, &to).map_err(|e| format!("copying {}: {e}", path.display()))?;
        }
    }
    let built = PathBuf::from(ASAN_TARGET).join(&triple).join("debug").join("libgpuport_python.so");
    std::fs::copy(&built, module.join("gpuport.abi3.so")).map_err(|e| format!("copying {}: {e}", built.display()))?;
    std::path::absolute(&shadow).map_err(|e| e.to_string())
}

/// What the interpreter and the libraries beside it hold in ways the leak checker cannot
/// follow (each entry with its reason), never gpuport's own allocations.
const LSAN_SUPPRESSIONS: &str = "tests/python/lsan-suppressions.txt";
