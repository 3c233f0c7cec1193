//! `cargo xtask rocm-sid-check [--root DIR] [--prepare]`: gpuport's ROCm loader against a current HIP
//! runtime. Debian's build machine has ROCm 5.2; real AMD users run ROCm 6 and 7. Debian
//! sid ships `libamdhip64-6` (6.4), which needs a newer glibc than the build machine's, so
//! it runs in a sid root made with `debootstrap --variant=minbase` (cached: made once per
//! machine, at `DIR`, default `$GPUPORT_CI_CACHE/sid-root` or `~/.cache/gpuport-ci/sid-root`).
//! The `real_runtime` test of `gpuport-rocm` is built here and run inside the root
//! (newer glibc runs older binaries): every required symbol resolves, the ROCm 6 paths are
//! taken, and discovery says `no device (… runtime 6.4 …)`. Needs root, `debootstrap` and
//! the package mirrors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIRROR: &str = "http://deb.debian.org/debian";
const LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.6";

fn default_root() -> PathBuf {
    let cache = std::env::var_os("GPUPORT_CI_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/gpuport-ci")
    });
    cache.join("sid-root")
}

fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

/// Makes the sid root with the HIP 6 runtime, unless it is there already.
fn ensure_root(root: &Path) -> Result<(), String> {
    if root.join(LIBRARY.trim_start_matches('/')).exists() {
        return Ok(());
    }
    if root.exists() {
        std::fs::remove_dir_all(root).map_err(|e| format!("removing a partial {}: {e}", root.display()))?;
    }
    if let Some(parent) = root.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    run(Command::new("debootstrap").args(["--variant=minbase", "sid"]).arg(root).arg(MIRROR))?;
    // The index may be a snapshot older than its Valid-Until.
    let apt = |args: &[&str]| {
        let mut cmd = Command::new("chroot");
        cmd.arg(root).args([
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "-o",
            "Acquire::Check-Valid-Until=false",
        ]);
        cmd.args(args);
        cmd
    };
    run(&mut apt(&["update", "-qq"]))?;
    run(&mut apt(&["install", "-y", "-qq", "--no-install-recommends", "libamdhip64-6"]))
}

/// Builds the `real_runtime` test binary and returns its path.
fn build_test() -> Result<PathBuf, String> {
    let mut cmd = crate::cargo();
    cmd.args(["test", "-p", "gpuport-rocm", "--test", "real_runtime", "--no-run", "--message-format=json"]);
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.stderr(Stdio::inherit()).output().map_err(|e| format!("could not start cargo: {e}"))?;
    if !out.status.success() {
        return Err("building the real_runtime test failed".into());
    }
    crate::gpu_bundle::artifacts(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .find(|a| a.target == "real_runtime")
        .map(|a| a.executable)
        .ok_or_else(|| "cargo gave no real_runtime executable".into())
}

/// The check; see the module documentation. With `prepare_only`, only makes the root (so
/// CI can tell a mirror or machine that cannot make one from a failing check).
pub fn rocm_sid_check(root: Option<&Path>, prepare_only: bool) -> Result<(), String> {
    let root = root.map(Path::to_path_buf).unwrap_or_else(default_root);
    ensure_root(&root)?;
    if prepare_only {
        println!("xtask: the sid root with libamdhip64-6 is ready in {}", root.display());
        return Ok(());
    }
    let test = build_test()?;
    let inside = root.join("opt/gpuport");
    std::fs::create_dir_all(&inside).map_err(|e| format!("creating {}: {e}", inside.display()))?;
    std::fs::copy(&test, inside.join("real_runtime")).map_err(|e| format!("copying the test into the root: {e}"))?;
    run(Command::new("chroot").arg(&root).args([
        "env",
        &format!("GPUPORT_REAL_HIP={LIBRARY}"),
        "GPUPORT_REAL_HIP_MAJOR=6",
        "RUST_BACKTRACE=1",
        "/opt/gpuport/real_runtime",
        "--ignored",
        "--nocapture",
    ]))?;
    println!(
        "xtask: ROCm 6 runtime in {}: every required symbol resolves, ROCm 6 paths taken, no device reported",
        root.display()
    );
    Ok(())
}
