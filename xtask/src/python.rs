//! The Python module's build and tests (`crates/python`, `tests/python`):
//!
//! - a project-local virtual environment, `.venv`, made with `python3` (or
//!   `GPUPORT_PYTHON`) and the pinned packages of `tests/python/requirements.txt`,
//!   reinstalled only when that file changes;
//! - the abi3 wheel, built by maturin into `target/wheels` (the dev profile for tests;
//!   the bundle asks for its own profile);
//! - the wheel installed into `.venv`, and pytest over `tests/python`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtual environment, relative to the repository root.
pub const VENV: &str = ".venv";
const REQUIREMENTS: &str = "tests/python/requirements.txt";
/// A copy of the requirements the environment was made with.
const STAMP: &str = ".venv/gpuport-requirements.txt";
const MANIFEST: &str = "crates/python/Cargo.toml";

fn venv_bin(name: &str) -> PathBuf {
    Path::new(VENV).join("bin").join(name)
}

fn status(mut cmd: Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{cmd:?} failed ({s})")),
        Err(e) => Err(format!("could not start {cmd:?}: {e}")),
    }
}

/// Makes `.venv` with the pinned packages, unless it already has exactly them.
pub fn ensure_venv() -> Result<(), String> {
    let wanted = std::fs::read_to_string(REQUIREMENTS).map_err(|e| format!("{REQUIREMENTS}: {e}"))?;
    if venv_bin("python").exists() && std::fs::read_to_string(STAMP).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    if !venv_bin("python").exists() {
        let python = std::env::var("GPUPORT_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut make = Command::new(&python);
        make.args(["-m", "venv", VENV]);
        status(make).map_err(|e| format!("{e}: a Python ≥ 3.11 with the venv module is needed (GPUPORT_PYTHON)"))?;
    }
    let mut install = Command::new(venv_bin("python"));
    install.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS]);
    status(install)?;
    std::fs::write(STAMP, wanted).map_err(|e| format!("{STAMP}: {e}"))
}

/// Builds the wheel with `profile` (`None` = dev) into `out`; returns its path.
pub fn build_wheel(profile: Option<&str>, out: &Path) -> Result<PathBuf, String> {
    ensure_venv()?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let stale: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("gpuport-")))
        .collect();
    for p in stale {
        std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let mut build = Command::new(venv_bin("maturin"));
    build.args(["build", "--quiet", "-m", MANIFEST, "--out"]).arg(out).arg("-i").arg(venv_bin("python"));
    if let Some(profile) = profile {
        build.args(["--profile", profile]);
    }
    status(build)?;
    std::fs::read_dir(out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin made no wheel in {}", out.display()))
}

/// Builds the wheel (dev profile) and installs it into `.venv`.
pub fn install() -> Result<(), String> {
    let wheel = build_wheel(None, Path::new("target/wheels"))?;
    let mut install = Command::new(venv_bin("python"));
    install
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--force-reinstall", "--no-deps"])
        .arg(&wheel);
    status(install)
}

/// pytest over `paths` with the installed wheel; `env` is set for the run.
pub fn pytest(paths: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<(), String> {
    let mut pytest = Command::new(venv_bin("python"));
    pytest.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]).args(paths);
    // Discovery must see every backend the tests use (the ext plugin, the host).
    pytest.env_remove("GPUPORT_BACKENDS");
    for (k, v) in env {
        pytest.env(k, v);
    }
    status(pytest)
}

/// Builds the wheel, installs it into `.venv` and runs pytest over `tests/python`.
pub fn test() -> Result<(), String> {
    install()?;
    pytest(&["tests/python"], &[])
}
