//! `cargo xtask minimal-versions`: the workspace built by the oldest compiler it declares
//! (`rust-version`), first with the locked dependency versions, then with the lowest
//! version of every direct dependency that its requirement allows. Dependent crates resolve gpuport's requirements against their own
//! lock files, so the lowest versions must build, not only the locked ones; and the
//! declared compiler must build them.
//!
//! Cargo picks the lowest versions with nightly's `-Z direct-minimal-versions` (transitive
//! dependencies stay at their newest compatible versions, as a dependent's resolution
//! would leave them). The lock file is rewritten for the check and put back afterwards,
//! whatever the outcome; the build goes to `target/minimal-versions`.

use std::path::{Path, PathBuf};

use std::process::Command;

use crate::{run, rustup_cargo};

/// The workspace's `rust-version`, from the root manifest.
fn rust_version() -> Result<String, String> {
    let manifest = std::fs::read_to_string("Cargo.toml").map_err(|e| format!("Cargo.toml: {e}"))?;
    manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = \"").and_then(|v| v.strip_suffix('"')))
        .map(str::to_owned)
        .ok_or_else(|| "Cargo.toml declares no rust-version".into())
}

/// Puts the lock file back when dropped.
struct RestoreLock {
    saved: PathBuf,
}

impl Drop for RestoreLock {
    fn drop(&mut self) {
        if let Err(e) = std::fs::copy(&self.saved, "Cargo.lock") {
            eprintln!("xtask: could not put Cargo.lock back from {}: {e}", self.saved.display());
        }
    }
}

/// Runs the check.
pub(crate) fn check() -> Result<(), String> {
    let msrv = rust_version()?;
    let toolchain = format!("+{msrv}");
    let mut has = Command::new("rustc");
    has.env_remove("RUSTUP_TOOLCHAIN");
    has.args([toolchain.as_str(), "--version"]);
    if !run(has) {
        let mut install = Command::new("rustup");
        install.args(["toolchain", "install", &msrv, "--profile", "minimal"]);
        if !run(install) {
            return Err(format!("Rust {msrv} (the declared rust-version) could not be installed"));
        }
    }
    let target = Path::new("target").join("minimal-versions");
    // The locked versions first: what this repository builds must build with the declared
    // compiler too.
    let mut locked = rustup_cargo(&toolchain);
    locked.args(["check", "--workspace", "--all-targets", "--locked"]).env("CARGO_TARGET_DIR", &target);
    if !run(locked) {
        return Err(format!("the locked dependency versions do not build with Rust {msrv} (the rust-version)"));
    }
    std::fs::create_dir_all("target").map_err(|e| format!("target: {e}"))?;
    let saved = Path::new("target").join("Cargo.lock.before-minimal-versions");
    std::fs::copy("Cargo.lock", &saved).map_err(|e| format!("saving Cargo.lock: {e}"))?;
    let _restore = RestoreLock { saved };
    let mut lowest = rustup_cargo("+nightly");
    lowest.args(["update", "-Z", "direct-minimal-versions"]);
    if !run(lowest) {
        return Err("cargo +nightly update -Z direct-minimal-versions failed (is nightly installed?)".into());
    }
    let mut build = rustup_cargo(&toolchain);
    build.args(["check", "--workspace", "--all-targets", "--locked"]);
    build.env("CARGO_TARGET_DIR", &target);
    match run(build) {
        true => {
            println!("xtask: the lowest direct dependency versions build with Rust {msrv}");
            Ok(())
        }
        false => Err(format!("the lowest direct dependency versions do not build with Rust {msrv}")),
    }
}
