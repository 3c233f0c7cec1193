//! The Python module's build and tests (`crates/python`, `tests/python`):
//!
//! - a project-local virtual environment, `.venv`, made with `python3` (or
//!   `GPUPORT_PYTHON`, checked to be Python ≥ 3.11 first) and the pinned packages of
//!   `tests/python/requirements.txt`; made again when another interpreter or other pins
//!   are asked for;
//! - the abi3 wheels, built by maturin into `wheels/` of the target folder (the dev profile
//!   for tests, the `wheel` profile users get for the benchmark; the bundle asks for its
//!   own profile): one for every CPython from 3.11, and
//!   one from 3.12, whose stable ABI has vectorcall ([`Floor`]);
//! - the wheel installed into `.venv`, and pytest over `tests/python`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtual environment, relative to the repository root.
pub const VENV: &str = ".venv";
pub(crate) const REQUIREMENTS: &str = "tests/python/requirements.txt";
/// A copy of the requirements the environment was made with.
const STAMP: &str = ".venv/gpuport-requirements.txt";
const MANIFEST: &str = "crates/python/Cargo.toml";

/// A file a pinned wheel installed in `.venv`: `relative` under its `site-packages`
/// (absolute), if there.
pub(crate) fn site_packages_file(relative: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(Path::new(VENV).join("lib")).ok()?;
    let found = entries.flatten().map(|e| e.path().join("site-packages").join(relative)).find(|p| p.is_file())?;
    Some(std::path::absolute(&found).unwrap_or(found))
}

pub(crate) fn venv_bin(name: &str) -> PathBuf {
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

/// The oldest Python the module supports (its abi3 floor).
const MIN_PYTHON: (u32, u32) = (3, 11);

/// The interpreter `.venv` is made with: `GPUPORT_PYTHON`, else `python3`.
fn base_python() -> String {
    std::env::var("GPUPORT_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// `python`'s version and resolved executable (`3.11 /usr/bin/python3.11`), or why not.
fn describe_python(python: &str) -> Result<(u32, u32, String), String> {
    let out = Command::new(python)
        .args(["-c", "import sys; print(sys.version_info[0], sys.version_info[1], sys.executable)"])
        .output()
        .map_err(|e| format!("no Python interpreter `{python}` ({e}); install Python ≥ 3.11 or set GPUPORT_PYTHON"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let parsed =
        (|| Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?, words.collect::<Vec<_>>().join(" "))))();
    parsed.ok_or_else(|| format!("`{python}` did not say its version: {}", String::from_utf8_lossy(&out.stderr).trim()))
}

/// `python`'s version and executable if it is one the module supports, else why not.
fn supported_python(python: &str) -> Result<(u32, u32, String), String> {
    let found = describe_python(python)?;
    if (found.0, found.1) < MIN_PYTHON {
        return Err(format!(
            "the Python module needs Python ≥ {}.{}, found {}.{} at {} (set GPUPORT_PYTHON to a newer one, or run \
             cargo xtask test --no-python)",
            MIN_PYTHON.0, MIN_PYTHON.1, found.0, found.1, found.2
        ));
    }
    Ok(found)
}

/// What `.venv` was made from, recorded beside it: the base interpreter and the pinned
/// requirements. Any difference makes a new `.venv`.
fn venv_identity(python: &(u32, u32, String), requirements: &str) -> String {
    format!("# python {}.{} at {}\n{requirements}", python.0, python.1, python.2)
}

/// Makes `.venv` with the pinned packages, unless it was made by the same interpreter with
/// exactly them. The interpreter's version is checked first: a clear message, not a failed
/// build later.
pub fn ensure_venv() -> Result<(), String> {
    let wanted = std::fs::read_to_string(REQUIREMENTS).map_err(|e| format!("{REQUIREMENTS}: {e}"))?;
    let python = base_python();
    let found = supported_python(&python)?;
    let identity = venv_identity(&found, &wanted);
    if venv_bin("python").exists() && std::fs::read_to_string(STAMP).ok().as_deref() == Some(identity.as_str()) {
        return Ok(());
    }
    if Path::new(VENV).exists() {
        eprintln!("xtask: {VENV} was made by another interpreter or with other pins: making it again");
        std::fs::remove_dir_all(VENV).map_err(|e| format!("removing {VENV}: {e}"))?;
    }
    let mut make = Command::new(&python);
    make.args(["-m", "venv", VENV]);
    status(make).map_err(|e| format!("{e}: the venv module is needed (Debian: apt install python3-venv)"))?;
    let mut install = Command::new(venv_bin("python"));
    install.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS]);
    status(install)?;
    std::fs::write(STAMP, identity).map_err(|e| format!("{STAMP}: {e}"))
}

/// The stable-ABI floor a wheel is built for (the module's `abi3-py3XX` features).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Floor {
    /// Every CPython from 3.11: the wheel the tests install into `.venv`.
    Py311,
    /// Every CPython from 3.12, whose stable ABI has vectorcall: pip takes it over the
    /// 3.11 one wherever it can.
    Py312,
}

impl Floor {
    /// The wheel tag's Python part (`cp311`).
    fn tag(self) -> &'static str {
        match self {
            Floor::Py311 => "cp311",
            Floor::Py312 => "cp312",
        }
    }
}

/// Builds the wheel for `floor` with the cargo profile `profile` into `out`, replacing an
/// earlier wheel of that floor there; returns its path. Always named: without it maturin
/// would take `[tool.maturin] profile` (the slow-to-build `wheel`).
pub fn build_wheel(profile: &str, out: &Path, floor: Floor) -> Result<PathBuf, String> {
    ensure_venv()?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let ours = |p: &Path| {
        p.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("gpuport-") && n.contains(&format!("-{}-abi3-", floor.tag()))
        })
    };
    let listed = || -> Result<Vec<PathBuf>, String> {
        Ok(std::fs::read_dir(out)
            .map_err(|e| format!("{}: {e}", out.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| ours(p))
            .collect())
    };
    for p in listed()? {
        std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let mut build = Command::new(venv_bin("maturin"));
    build.args(["build", "--quiet", "-m", MANIFEST, "--out"]).arg(out);
    match floor {
        // Tagged for the tests' interpreter (`.venv`'s).
        Floor::Py311 => build.arg("-i").arg(venv_bin("python")),
        // An abi3 wheel needs no interpreter to build; `.venv`'s may be older than 3.12.
        Floor::Py312 => build.args(["--no-default-features", "--features", "abi3-py312"]),
    };
    build.args(["--profile", profile]);
    status(build)?;
    listed()?
        .into_iter()
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin made no {} wheel in {}", floor.tag(), out.display()))
}

/// Where wheels go: `wheels/` in the target folder (`CARGO_TARGET_DIR` when set).
pub fn wheel_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target")).join("wheels")
}

/// The interpreter the 3.12 wheel is measured with: `GPUPORT_BENCH_PYTHON`, a Python ≥ 3.12
/// with NumPy installed (`.venv` keeps the oldest supported Python, for the tests).
pub const BENCH_PYTHON_ENV: &str = "GPUPORT_BENCH_PYTHON";

/// The Python interchange benchmark (`crates/python/benches/interchange.py`) with a
/// wheel built as users get it (the `wheel` profile) — never the dev-profile build, which
/// is several times slower — unpacked into a folder of its own and put first on
/// `PYTHONPATH` (the `.venv` keeps its dev install for the tests). Its rounds go to `out`. With [`Floor::Py311`] it runs with
/// `.venv`'s interpreter; with [`Floor::Py312`] with [`BENCH_PYTHON_ENV`]'s, and is
/// `Ok(false)` (nothing measured) when that is not set.
pub fn bench_interchange(out: &Path, rounds: &str, quick: bool, floor: Floor) -> Result<bool, String> {
    let python = match floor {
        Floor::Py311 => venv_bin("python").into_os_string(),
        Floor::Py312 => match std::env::var_os(BENCH_PYTHON_ENV) {
            Some(python) => python,
            None => return Ok(false),
        },
    };
    let found = describe_python(&python.to_string_lossy())?;
    if floor == Floor::Py312 && (found.0, found.1) < (3, 12) {
        return Err(format!(
            "{BENCH_PYTHON_ENV} is Python {}.{} at {}: the 3.12 wheel needs 3.12 or later",
            found.0, found.1, found.2
        ));
    }
    // The profile a user's wheel is built with (`[tool.maturin] profile`).
    let wheels = wheel_dir().with_file_name("wheels-release");
    let wheel = build_wheel("wheel", &wheels, floor)?;
    let site = std::path::absolute(wheels.with_file_name(format!("bench-python-{}", floor.tag())))
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&site);
    let mut unpack = Command::new(venv_bin("python"));
    unpack.args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&site);
    status(unpack)?;
    let mut run = Command::new(&python);
    run.arg("crates/python/benches/interchange.py")
        .arg(out)
        .env("PYTHONPATH", &site)
        .env("GPUPORT_BENCH_ROUNDS", rounds)
        .env("GPUPORT_BENCH_QUICK", if quick { "1" } else { "0" })
        .env_remove("GPUPORT_BACKENDS");
    status(run)?;
    Ok(true)
}

/// Builds the wheel (dev profile) and installs it into `.venv`.
pub fn install() -> Result<(), String> {
    let wheel = build_wheel("dev", &wheel_dir(), Floor::Py311)?;
    let mut install = Command::new(venv_bin("python"));
    install
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--force-reinstall", "--no-deps"])
        .arg(&wheel);
    status(install)
}

/// The folder the installed wheel put the `gpuport` package in (inside `.venv`).
pub fn installed_package() -> Result<PathBuf, String> {
    let out = Command::new(venv_bin("python"))
        .args(["-c", "import importlib.util as u; print(u.find_spec('gpuport').submodule_search_locations[0])"])
        .env_remove("PYTHONPATH")
        .output()
        .map_err(|e| format!("could not ask .venv's Python where gpuport is: {e}"))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && path.is_dir() {
        Ok(path)
    } else {
        Err(format!("gpuport is not installed in {VENV}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// pytest over `paths` with the installed wheel; `env` is set for the run. Whether it
/// passed, and the lines of its short summary that name a failure (`FAILED path::test -
/// message`, `ERROR …`).
pub fn pytest(paths: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> (bool, Vec<String>) {
    let mut pytest = pytest_command(paths);
    for (k, v) in env {
        pytest.env(k, v);
    }
    let mut failed = Vec::new();
    let (ok, _) = crate::summary::run_merged(pytest, |line| {
        if line.starts_with("FAILED ") || line.starts_with("ERROR ") {
            failed.push(line.to_owned());
        }
    });
    (ok, failed)
}

/// The command that runs pytest over `paths` with `.venv`'s interpreter.
pub fn pytest_command(paths: &[&str]) -> Command {
    let mut pytest = Command::new(venv_bin("python"));
    pytest.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]).args(paths);
    // Discovery must see every backend the tests use (the ext plugin, the host).
    pytest.env_remove("GPUPORT_BACKENDS");
    pytest
}

/// Builds the wheel, installs it into `.venv` and runs pytest over `tests/python`: whether
/// it passed, and the failures pytest named (or why it could not run).
pub fn test() -> (bool, Vec<String>) {
    if let Err(e) = install() {
        return (false, vec![format!("ERROR installing the wheel - {e}")]);
    }
    pytest(&["tests/python"], &[])
}

/// `python-install-check`: the module installed as Python users install it, into a fresh
/// virtual environment of its own — `pip install ./crates/python`, then the sdist maturin
/// builds, installed by pip from a folder of its own — each followed by a use of the
/// module without NumPy (NumPy is an optional extra). pip builds the extension with the
/// dev profile here (`MATURIN_PEP517_ARGS`), to keep the check quick; users get release.
pub fn install_check() -> Result<(), String> {
    ensure_venv()?;
    let target = wheel_dir().parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("target"));
    let venv = std::path::absolute(target.join("pip-install-check")).map_err(|e| e.to_string())?;
    let sdist_dir = target.join("sdist");
    for dir in [&venv, &sdist_dir] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
    }
    let mut make = Command::new(base_python());
    make.args(["-m", "venv"]).arg(&venv);
    status(make)?;
    let python = venv.join("bin").join("python");
    let pip_install = |what: &Path| {
        let mut pip = Command::new(&python);
        pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--force-reinstall"]).arg(what);
        pip.env("MATURIN_PEP517_ARGS", "--profile dev");
        status(pip)
    };
    let use_it = || {
        let mut run = Command::new(&python);
        run.args(["-c", USE_WITHOUT_NUMPY]).env_remove("GPUPORT_BACKENDS");
        status(run)
    };
    pip_install(Path::new("./crates/python"))?;
    use_it()?;
    let mut sdist = Command::new(venv_bin("maturin"));
    sdist.args(["sdist", "-m", MANIFEST, "--out"]).arg(&sdist_dir);
    status(sdist)?;
    let archive = std::fs::read_dir(&sdist_dir)
        .map_err(|e| format!("{}: {e}", sdist_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .ok_or_else(|| format!("maturin made no sdist in {}", sdist_dir.display()))?;
    pip_install(&archive)?;
    use_it()?;
    println!("xtask: pip installs gpuport from ./crates/python and from its sdist; it runs without NumPy");
    Ok(())
}

/// Uses the installed module with NumPy absent: creation, a copy to another device, the
/// values back.
const USE_WITHOUT_NUMPY: &str = "\
import importlib.util, gpuport
assert importlib.util.find_spec('numpy') is None, 'NumPy is installed: the check is for its absence'
gpuport.register_ext()
a = gpuport.asarray([[1, 2], [3, 4]], dtype='int32')
assert a.to('ext:0').to('host').tolist() == [[1, 2], [3, 4]]
print('gpuport', gpuport.__version__, repr(a))
";

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in interpreter: a script answering the version query as `version` would.
    fn fake_python(dir: &Path, version: &str) -> String {
        let path = dir.join(format!("python{version}"));
        let (major, minor) = version.split_once('.').expect("major.minor");
        std::fs::write(&path, format!("#!/bin/sh\necho {major} {minor} /opt/python{version}/bin/python3\n"))
            .expect("write the script");
        let mut perms = std::fs::metadata(&path).expect("metadata").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&path, perms).expect("chmod");
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn the_interpreter_is_checked_before_anything_is_made() {
        let dir = std::env::temp_dir().join(format!("gpuport-xtask-python-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let old = supported_python(&fake_python(&dir, "3.10")).expect_err("3.10 is too old");
        assert!(old.contains("needs Python ≥ 3.11, found 3.10 at /opt/python3.10/bin/python3"), "{old}");
        assert!(old.contains("--no-python"), "{old}");
        let ok = supported_python(&fake_python(&dir, "3.12")).expect("3.12 is supported");
        assert_eq!(ok, (3, 12, "/opt/python3.12/bin/python3".to_owned()));
        let missing = supported_python("/nonexistent/python3").expect_err("no interpreter");
        assert!(missing.contains("GPUPORT_PYTHON"), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_interpreter_or_other_pins_make_a_new_venv() {
        let a = venv_identity(&(3, 11, "/usr/bin/python3.11".into()), "numpy==2.4.6\n");
        assert_ne!(a, venv_identity(&(3, 12, "/usr/bin/python3.12".into()), "numpy==2.4.6\n"));
        assert_ne!(a, venv_identity(&(3, 11, "/usr/bin/python3.11".into()), "numpy==2.4.7\n"));
        assert_eq!(a, venv_identity(&(3, 11, "/usr/bin/python3.11".into()), "numpy==2.4.6\n"));
    }
}
