//! `cargo xtask gpu-bundle [--out DIR]`: one self-contained folder that runs every GPU
//! check on a CUDA machine that has no Rust toolchain and no network.
//!
//! It builds, here, the release (profile `bundle`: no debug info) test binaries of the conformance suite and of
//! `gpuport-cuda` (unit, loading, GPU-only and real-driver tests), the demo, and the
//! benchmark binaries (and this tool, whose `bench-table` turns the HAL benchmark's
//! criterion folders into the table `cargo xtask bench` prints); copies them into
//! `DIR/bin` under stable names; and writes
//! `DIR/run.sh` (`run.sh LOGDIR` runs them all with the CUDA backend, one log per part, a
//! `summary.txt`, non-zero exit if anything failed or was unavailable). `DIR/python/` holds
//! the Python module's abi3 wheels for 3.11 and 3.12 on (profile `bundle`) and `DIR/tests/python/` its tests (with the C
//! plugin's source and the plugin header, which the plugin tests compile),
//! which `run.sh` installs into a scratch folder and runs with the machine's Python.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The default output folder (ignored by git).
pub const DEFAULT_OUT: &str = "gpu-bundle";

const RUN_SH: &str = include_str!("../bundle/run.sh");
const README: &str = include_str!("../bundle/README.md");
const CUPY_PEER: &str = include_str!("../bundle/cupy_peer.py");
const COMPILE_PEER: &str = include_str!("../bundle/compile_peer.py");
const NCCL_PEER: &str = include_str!("../bundle/nccl_peer.py");

/// What to build (with the `bundle` profile: release, no debug info), and how each artifact is named
/// in the bundle: (package, target name, bundle name).
const PARTS: &[(&str, &str, &str)] = &[
    ("gpuport-conformance", "conformance", "conformance"),
    ("gpuport-cuda", "gpuport_cuda", "cuda-unit"),
    ("gpuport-cuda", "loading", "cuda-loading"),
    ("gpuport-cuda", "gpu", "cuda-gpu"),
    ("gpuport-cuda", "real_driver", "cuda-real-driver"),
    ("gpuport-dlpack", "exchange", "dlpack-exchange"),
    ("gpuport-dlpack", "vendor_devices", "dlpack-devices"),
    ("gpuport-cai", "vendor_devices", "cai-devices"),
    ("gpuport-runtime", "copy_kernels", "copy-kernels"),
    // The collectives with several ranks (cuda:0's arrays among the host's and ext's) and
    // their benchmark, under the `mpich` wheel's `mpiexec` (the wheel is in `mpi/`).
    ("gpuport-collective", "ranks", "collective-ranks"),
    ("gpuport-collective", "allreduce", "bench-allreduce"),
    // The NCCL loader against the NCCL the machine's Python environment has, and a
    // one-rank communicator on it.
    ("gpuport-collective", "real_engines", "collective-real-engines"),
    ("gpuport-collective", "nccl_one_rank", "collective-nccl-one-rank"),
    // NCCL with one rank per process (one per GPU), under the same `mpiexec`, and its
    // all_reduce beside the engine called directly (and PyTorch's, by `nccl_peer.py`).
    ("gpuport-collective", "nccl_processes", "collective-nccl-processes"),
    ("gpuport-collective", "nccl_allreduce", "bench-nccl-allreduce"),
    ("gpuport", "demo", "demo"),
    ("gpuport-runtime", "staged_copy", "bench-staged-copy"),
    ("gpuport-runtime", "cuda_bandwidth", "bench-cuda"),
    ("gpuport-runtime", "hal", "bench-hal"),
    // The table of the HAL figures from the criterion folders `bench-hal` writes.
    ("xtask", "xtask", "xtask"),
];

/// One built executable: its package, target name and path.
pub(crate) struct Artifact {
    pub(crate) package: String,
    pub(crate) target: String,
    pub(crate) executable: PathBuf,
    /// Built as a test harness (`--tests`, `--bench`): a binary built as itself and as its
    /// unit tests gives two executables of one name.
    pub(crate) test: bool,
}

/// The value of `"key":"…"` after `from` in one line of cargo's JSON (cargo writes one
/// flat object per line and escapes no characters in these fields).
fn field<'a>(line: &'a str, key: &str, from: usize) -> Option<&'a str> {
    let pattern = format!("\"{key}\":\"");
    let start = line[from..].find(&pattern)? + from + pattern.len();
    let end = line[start..].find('"')? + start;
    Some(&line[start..end])
}

pub(crate) fn artifacts(json: &str) -> Vec<Artifact> {
    json.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter_map(|l| {
            let executable = field(l, "executable", 0)?;
            // `path+file:///…/backends/cuda#gpuport-cuda@0.1.0`, or `…/gpuport#0.1.0` when
            // the package is named like its folder.
            let (url, fragment) = field(l, "package_id", 0)?.rsplit_once('#')?;
            let package = match fragment.split_once('@') {
                Some((name, _)) => name,
                None => url.rsplit('/').next()?,
            }
            .to_owned();
            let target = field(l, "name", l.find("\"target\":")?)?.to_owned();
            // The profile's `test` (the target's own `"test"` field comes before it).
            let test = l.find("\"profile\":").is_some_and(|at| l[at..].contains("\"test\":true"));
            Some(Artifact { package, target, executable: PathBuf::from(executable), test })
        })
        .collect()
}

/// Builds everything in one cargo call and returns the artifacts.
fn build() -> Result<Vec<Artifact>, String> {
    let mut cmd = crate::cargo();
    cmd.args(["build", "--profile", "bundle", "--message-format=json-render-diagnostics"]);
    cmd.args([
        "-p",
        "gpuport-conformance",
        "-p",
        "gpuport-cuda",
        "-p",
        "gpuport-dlpack",
        "-p",
        "gpuport-cai",
        "-p",
        "gpuport",
        "-p",
        "gpuport-runtime",
        "-p",
        "gpuport-collective",
        "-p",
        "xtask",
    ]);
    cmd.args(["--tests", "--example", "demo", "--bench", "staged_copy", "--bench", "cuda_bandwidth", "--bench", "hal"]);
    cmd.args(["--bench", "allreduce", "--bench", "nccl_allreduce"]);
    cmd.args(["--bin", "xtask"]);
    // A bundle must not depend on anything outside it: no -C target-cpu=native.
    cmd.env_remove("RUSTFLAGS");
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.stderr(Stdio::inherit()).output().map_err(|e| format!("could not start cargo: {e}"))?;
    if !out.status.success() {
        return Err("the release build failed".into());
    }
    Ok(artifacts(&String::from_utf8_lossy(&out.stdout)))
}

/// Builds the bundle into `out` (emptied first).
pub fn gpu_bundle(out: &Path) -> Result<(), String> {
    let built = build()?;
    if out.exists() {
        fs::remove_dir_all(out).map_err(|e| format!("emptying {}: {e}", out.display()))?;
    }
    let bin = out.join("bin");
    for dir in [bin.clone(), out.join("bench"), out.join("python"), out.join("tests/python")] {
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    for (package, target, name) in PARTS {
        // Where a binary came as itself and as its unit tests (xtask), the binary.
        let artifact = built
            .iter()
            .filter(|a| a.package == *package && a.target == *target)
            .min_by_key(|a| a.test)
            .ok_or_else(|| format!("the build gave no executable for {package} {target}"))?;
        let dest = bin.join(name);
        fs::copy(&artifact.executable, &dest)
            .map_err(|e| format!("copying {} to {}: {e}", artifact.executable.display(), dest.display()))?;
    }
    write_executable(&out.join("run.sh"), RUN_SH)?;
    fs::write(out.join("README.md"), README).map_err(|e| format!("writing README.md: {e}"))?;
    fs::write(out.join("bench/cupy_peer.py"), CUPY_PEER).map_err(|e| format!("writing cupy_peer.py: {e}"))?;
    fs::write(out.join("bench/compile_peer.py"), COMPILE_PEER).map_err(|e| format!("writing compile_peer.py: {e}"))?;
    fs::write(out.join("bench/nccl_peer.py"), NCCL_PEER).map_err(|e| format!("writing nccl_peer.py: {e}"))?;
    // <gpuport/kernel.h> where CuPy's compiler finds it beside gpuport's (which has it built in).
    let include = out.join("bench/include/gpuport");
    fs::create_dir_all(&include).map_err(|e| format!("creating {}: {e}", include.display()))?;
    fs::write(include.join("kernel.h"), gpuport_vendor_kit_header()).map_err(|e| format!("writing kernel.h: {e}"))?;
    // The Python module: the abi3 wheels, for 3.11 and for 3.12 on (pip installs the one
    // the machine's Python takes, --no-index --no-deps), and the interop tests, GPU peers
    // included.
    for floor in [crate::python::Floor::Py311, crate::python::Floor::Py312] {
        crate::python::build_wheel("bundle", &out.join("python"), floor)?;
    }
    mpich_wheel(&out.join("mpi"))?;
    for entry in fs::read_dir("tests/python").map_err(|e| format!("tests/python: {e}"))?.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "py" || x == "txt" || x == "cu") {
            let dest = out.join("tests/python").join(entry.file_name());
            fs::copy(&path, &dest).map_err(|e| format!("copying {}: {e}", path.display()))?;
        }
    }
    // At their paths in the repository: the C plugin's source and the plugin ABI's header
    // (the plugin tests build it with the machine's C compiler), and the Python
    // collectives' example (the distributed tests run it).
    let files = [
        "examples/c-plugin/c_plugin.c",
        "crates/plugin-abi/include/gpuport_plugin.h",
        "crates/python/examples/allreduce.py",
    ];
    for file in files {
        let dest = out.join(file);
        fs::create_dir_all(dest.parent().unwrap_or(out)).map_err(|e| format!("creating {}: {e}", dest.display()))?;
        fs::copy(file, &dest).map_err(|e| format!("copying {file}: {e}"))?;
    }
    let version = Command::new("git").args(["describe", "--always", "--dirty"]).output().ok();
    let version = version.filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    fs::write(out.join("VERSION"), format!("{}\n", version.as_deref().unwrap_or("unknown")))
        .map_err(|e| format!("writing VERSION: {e}"))?;
    let size: u64 = walk(out).iter().filter_map(|p| p.metadata().ok()).map(|m| m.len()).sum();
    println!(
        "xtask: GPU bundle in {} ({:.1} MiB): copy it to a CUDA machine and run `./run.sh LOGDIR`",
        out.display(),
        size as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// The `mpich` wheel the test packages pin, downloaded into `dir`: `run.sh` installs it into
/// a scratch environment for its launcher and its standard-ABI library (the GPU machine has
/// no network).
fn mpich_wheel(dir: &Path) -> Result<(), String> {
    let pins =
        fs::read_to_string(crate::python::REQUIREMENTS).map_err(|e| format!("{}: {e}", crate::python::REQUIREMENTS))?;
    let pin = pins
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("mpich=="))
        .ok_or_else(|| format!("{} pins no mpich", crate::python::REQUIREMENTS))?;
    crate::python::ensure_venv()?;
    let mut download = Command::new(crate::python::venv_bin("python"));
    download.args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]);
    download.args(["--only-binary=:all:", "--dest"]).arg(dir).arg(pin);
    eprintln!("xtask: running {download:?}");
    match download.status() {
        Ok(s) if s.success() => Ok(()),
        _ => Err(format!("pip could not download {pin}")),
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn write_executable(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("making {} executable: {e}", path.display()))?;
    }
    Ok(())
}

/// `<gpuport/kernel.h>`, as gpuport gives it to its compilers.
fn gpuport_vendor_kit_header() -> &'static str {
    include_str!("../../crates/vendor-kit/src/compile/kernel.h")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_are_read_from_cargo_json() {
        let json = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/backends/cuda#gpuport-cuda@0.1.0","manifest_path":"/w/backends/cuda/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"gpu","src_path":"/w/backends/cuda/tests/gpu.rs"},"profile":{"test":true},"executable":"/w/target/release/deps/gpu-123","fresh":true}
{"reason":"compiler-artifact","package_id":"path+file:///w/crates/core#gpuport-core@0.1.0","target":{"kind":["lib"],"name":"gpuport_core"},"executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///w/crates/gpuport#0.1.0","target":{"kind":["example"],"name":"demo","test":true},"profile":{"test":false},"executable":"/w/target/release/examples/demo"}
{"reason":"build-finished","success":true}"#;
        let found = artifacts(json);
        assert_eq!(found.len(), 2);
        assert_eq!((found[1].package.as_str(), found[1].target.as_str()), ("gpuport", "demo"));
        assert_eq!(found[0].package, "gpuport-cuda");
        assert_eq!(found[0].target, "gpu");
        assert_eq!(found[0].executable, PathBuf::from("/w/target/release/deps/gpu-123"));
        // The profile's `test`, not the target's.
        assert_eq!((found[0].test, found[1].test), (true, false));
    }
}
