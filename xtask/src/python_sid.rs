//! `cargo xtask python312-check [--prepare]`: the Python module's 3.12 wheel (the build whose
//! keyword calls go through vectorcall, see `crates/python/Cargo.toml`) against a newer
//! CPython than `.venv`'s. The build machine has CPython 3.11 only; Debian sid's `python3`
//! (3.12 or later, with `python3-numpy` and `python3-pytest`) needs a newer glibc, so it runs
//! in a debootstrapped sid root of its own, `sid-python-root` in the cache folder of
//! `rocm-sid-check` (copied from its `sid-root` when that exists).
//!
//! The check builds the 3.12 wheel, unpacks it and runs `tests/python` with that
//! interpreter. `--prepare` only makes the root. Either way it writes `target/python312`,
//! a script that runs the root's `python3` with this checkout bound at the same path (in a
//! mount namespace of its own, so nothing stays mounted) — what `GPUPORT_BENCH_PYTHON` can
//! name for `cargo xtask bench --interchange`. Needs root, `debootstrap`, `unshare` and the
//! package mirrors.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::python::{build_wheel, wheel_dir, Floor};
use crate::rocm_sid::{apt, cache, ensure_sid_root, run};

const ROOT: &str = "sid-python-root";
const PACKAGES: &[&str] = &["python3", "python3-numpy", "python3-pytest"];
/// The interpreter script, relative to the checkout.
const LAUNCHER: &str = "target/python312";

/// Makes the root with the packages, unless its interpreter is there already.
fn ensure_root(root: &Path) -> Result<(), String> {
    if root.join("usr/bin/python3").exists() {
        return Ok(());
    }
    ensure_sid_root(root, &cache().join("sid-root"))?;
    run(&mut apt(root, &["update", "-qq"]))?;
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend(PACKAGES);
    run(&mut apt(root, &install))
}

/// Writes the launcher: `python3` of `root`, in a mount namespace of its own where the
/// checkout and `/proc` are bound into the root at their own paths, started in the
/// caller's folder.
fn write_launcher(root: &Path) -> Result<PathBuf, String> {
    let checkout = std::env::current_dir().map_err(|e| format!("the checkout's path: {e}"))?;
    let script = format!(
        "#!/bin/sh\n\
         # Debian sid's python3 in {root}, with this checkout at its own path (cargo xtask python312-check).\n\
         exec unshare --mount --propagation private sh -c '\n\
         \x20 root=$1; here=$2; shift 2\n\
         \x20 mkdir -p \"$root$here\" \"$root/proc\"\n\
         \x20 mount --bind \"$here\" \"$root$here\" && mount --bind /proc \"$root/proc\" &&\n\
         \x20 exec chroot \"$root\" /bin/sh -c \"cd \\\"\\$0\\\" && exec python3 \\\"\\$@\\\"\" \"$PWD\" \"$@\"\n\
         ' sh '{root}' '{here}' \"$@\"\n",
        root = root.display(),
        here = checkout.display(),
    );
    let path = checkout.join(LAUNCHER);
    std::fs::write(&path, script).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let mut perms = std::fs::metadata(&path).map_err(|e| e.to_string())?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).map_err(|e| e.to_string())?;
    Ok(path)
}

/// `cargo xtask python312-check`; see the module documentation.
pub fn python312_check(prepare_only: bool) -> Result<(), String> {
    let root = cache().join(ROOT);
    ensure_root(&root)?;
    let python = write_launcher(&root)?;
    if prepare_only {
        println!("xtask: {} runs sid's python3 from {}", python.display(), root.display());
        return Ok(());
    }
    let wheel = build_wheel("dev", &wheel_dir(), Floor::Py312)?;
    let site = std::path::absolute(wheel_dir().with_file_name("python312-site")).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&site);
    let mut unpack = Command::new("python3");
    unpack.args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&site);
    run(&mut unpack)?;
    let mut pytest = Command::new(&python);
    pytest.args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/python"]);
    pytest.env("PYTHONPATH", &site).env_remove("GPUPORT_BACKENDS");
    run(&mut pytest)?;
    println!("xtask: the 3.12 wheel passes tests/python with sid's python3 ({})", python.display());
    Ok(())
}
