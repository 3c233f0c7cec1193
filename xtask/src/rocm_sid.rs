//! `cargo xtask rocm-sid-check [--runtime 6|7] [--root DIR] [--prepare]`: gpuport's ROCm
//! loader against the HIP runtimes AMD users run today. Debian's build machine has ROCm 5.2;
//! Debian sid ships `libamdhip64-6` (6.4) and experimental `libamdhip64-7` (7.2, with
//! `libhiprtc7` and `librccl1`). Both need a newer glibc than the build machine's, so each
//! runs in its own root made with `debootstrap --variant=minbase sid` (HIP 7's HSA runtime
//! and code-object manager replace 6.4's, so one root cannot hold both faithfully). The
//! roots are cached: made once per machine under `$GPUPORT_CI_CACHE` or
//! `~/.cache/gpuport-ci` (`sid-root`, `sid-experimental-root`; the second is copied from the
//! first when it exists, then given experimental's packages), or at `DIR` with one
//! `--runtime`.
//!
//! The `real_runtime` test of `gpuport-rocm` is built here and run inside each root (newer
//! glibc runs older binaries): every required symbol resolves, the version's paths are
//! taken, discovery says `no device (… runtime 6.4/7.2 …)`, and — on 7 — `libhiprtc.so.7`
//! and `librccl.so.1` are found where gpuport looks for them and the runtime carries no
//! compiler, and gpuport's NCCL/RCCL loader reads RCCL (`gpuport-collective`'s
//! `real_engines`: version, every call it resolves); each version's hiprtc compiles gpuport's test kernels for the targets of its
//! time (gfx90a and gfx1030; gfx942 and gfx1100 from 6; gfx950 and gfx1201 from 7). On 7 gpuport's declarations are also checked against HIP 7.2's headers
//! (experimental's `libamdhip64-dev`), compiled into a probe with the host's C compiler.
//! Needs root, `debootstrap` and the package mirrors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIRROR: &str = "http://deb.debian.org/debian";

/// One runtime checked in a sid root.
struct SidRuntime {
    major: u32,
    /// The root's folder name in the cache.
    root: &'static str,
    /// Whether the root takes experimental's packages.
    experimental: bool,
    packages: &'static [&'static str],
    library: &'static str,
}

const RUNTIMES: [SidRuntime; 2] = [
    SidRuntime {
        major: 6,
        root: "sid-root",
        experimental: false,
        packages: &["libamdhip64-6"],
        library: "/usr/lib/x86_64-linux-gnu/libamdhip64.so.6",
    },
    SidRuntime {
        major: 7,
        root: "sid-experimental-root",
        experimental: true,
        packages: &["libamdhip64-7", "libhiprtc7", "librccl1", "libamdhip64-dev"],
        library: "/usr/lib/x86_64-linux-gnu/libamdhip64.so.7",
    },
];

pub(crate) fn cache() -> PathBuf {
    std::env::var_os("GPUPORT_CI_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/gpuport-ci")
    })
}

pub(crate) fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

/// `apt-get ARGS` inside `root` (its index may be a snapshot older than its Valid-Until).
pub(crate) fn apt(root: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("chroot");
    cmd.arg(root).args(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "Acquire::Check-Valid-Until=false"]);
    cmd.args(args);
    cmd
}

/// Makes the root of runtime `rt` at `root`, unless it is there already.
fn ensure_root(rt: &SidRuntime, root: &Path) -> Result<(), String> {
    if root.join(rt.library.trim_start_matches('/')).exists() {
        return Ok(());
    }
    ensure_sid_root(root, &cache().join(RUNTIMES[0].root))?;
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    if rt.experimental {
        let list = root.join("etc/apt/sources.list.d/experimental.list");
        std::fs::write(&list, format!("deb {MIRROR} experimental main\n"))
            .map_err(|e| format!("writing {}: {e}", list.display()))?;
        install.extend(["-t", "experimental"]);
    }
    run(&mut apt(root, &["update", "-qq"]))?;
    install.extend(rt.packages);
    run(&mut apt(root, &install))
}

/// Makes a plain sid root at `root`, replacing a partial one: a copy of `base` when that is
/// a sid root already (the same start, without the downloads), else debootstrapped.
pub(crate) fn ensure_sid_root(root: &Path, base: &Path) -> Result<(), String> {
    if root.exists() {
        std::fs::remove_dir_all(root).map_err(|e| format!("removing a partial {}: {e}", root.display()))?;
    }
    if let Some(parent) = root.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    if base != root && base.join("usr/bin/apt-get").exists() {
        run(Command::new("cp").arg("-a").arg(base).arg(root))?;
        let _ = std::fs::remove_dir_all(root.join("opt/gpuport"));
        Ok(())
    } else {
        run(Command::new("debootstrap").args(["--variant=minbase", "sid"]).arg(root).arg(MIRROR))
    }
}

/// Builds the `real_runtime` test binary and returns its path.
fn build_test() -> Result<PathBuf, String> {
    test_binary(&["test", "-p", "gpuport-rocm", "--test", "real_runtime"], "real_runtime")
}

/// Builds a test binary with `args` (`--no-run` and JSON messages added) and returns the
/// path of the one named `target`.
pub(crate) fn test_binary(args: &[&str], target: &str) -> Result<PathBuf, String> {
    let mut cmd = crate::cargo();
    cmd.args(args).args(["--no-run", "--message-format=json"]);
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.stderr(Stdio::inherit()).output().map_err(|e| format!("could not start cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the {target} test failed"));
    }
    crate::gpu_bundle::artifacts(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .find(|a| a.target == target)
        .map(|a| a.executable)
        .ok_or_else(|| format!("cargo gave no {target} executable"))
}

/// Builds the `real_engines` test binary (gpuport's NCCL and RCCL loader) and returns its path.
fn build_engines_test() -> Result<PathBuf, String> {
    test_binary(&["test", "-p", "gpuport-collective", "--test", "real_engines"], "real_engines")
}

/// The check of one runtime; see the module documentation. `engines` is the loader's test,
/// run where the root has RCCL.
fn check(rt: &SidRuntime, root: &Path, test: &Path, engines: Option<&Path>) -> Result<(), String> {
    let inside = root.join("opt/gpuport");
    std::fs::create_dir_all(&inside).map_err(|e| format!("creating {}: {e}", inside.display()))?;
    std::fs::copy(test, inside.join("real_runtime")).map_err(|e| format!("copying the test into the root: {e}"))?;
    run(Command::new("chroot").arg(root).args([
        "env",
        &format!("GPUPORT_REAL_HIP={}", rt.library),
        &format!("GPUPORT_REAL_HIP_MAJOR={}", rt.major),
        // The compiler runs: nothing is read from a cache.
        "GPUPORT_KERNEL_CACHE=off",
        "RUST_BACKTRACE=1",
        "/opt/gpuport/real_runtime",
        "--ignored",
        "--nocapture",
    ]))?;
    if let Some(engines) = engines.filter(|_| rt.major >= 7) {
        std::fs::copy(engines, inside.join("real_engines"))
            .map_err(|e| format!("copying the test into the root: {e}"))?;
        run(Command::new("chroot").arg(root).args([
            "env",
            "RUST_BACKTRACE=1",
            "/opt/gpuport/real_engines",
            "--ignored",
            "--exact",
            "rccl_is_found_read_and_has_every_call",
            "--nocapture",
        ]))?;
    }
    if rt.major >= 7 {
        // Absolute: the test runs in its crate's folder.
        let facts = std::path::absolute(crate::doubles::target_dir().join(format!("hip{}-header-facts.txt", rt.major)))
            .map_err(|e| format!("the facts file's path: {e}"))?;
        crate::hip_headers::write_facts(&root.join("usr/include"), &facts)?;
        let mut cmd = crate::cargo();
        cmd.args(["test", "-q", "-p", "gpuport-rocm", "--lib", "header_check", "--", "--ignored", "--nocapture"]);
        cmd.env("GPUPORT_HIP_HEADER_FACTS", &facts);
        run(&mut cmd)?;
    }
    println!(
        "xtask: HIP {} runtime in {}: every required symbol resolves, its version's paths are taken, no device reported{}",
        rt.major,
        root.display(),
        if rt.major >= 7 {
            "; hiprtc and RCCL found, RCCL read by gpuport's loader with every call it resolves; declarations match its headers"
        } else {
            ""
        }
    );
    Ok(())
}

/// `cargo xtask rocm-sid-check`. With `prepare_only`, only makes the roots (so CI can tell
/// a mirror or machine that cannot make one from a failing check).
pub fn rocm_sid_check(major: Option<u32>, root: Option<&Path>, prepare_only: bool) -> Result<(), String> {
    let chosen: Vec<&SidRuntime> = RUNTIMES.iter().filter(|rt| major.is_none_or(|m| m == rt.major)).collect();
    if chosen.is_empty() {
        return Err(format!("--runtime takes {}", RUNTIMES.map(|r| r.major.to_string()).join(" or ")));
    }
    if root.is_some() && chosen.len() > 1 {
        return Err("--root names the root of one runtime: give --runtime too".into());
    }
    let roots: Vec<PathBuf> =
        chosen.iter().map(|rt| root.map(Path::to_path_buf).unwrap_or_else(|| cache().join(rt.root))).collect();
    for (rt, root) in chosen.iter().zip(&roots) {
        ensure_root(rt, root)?;
        if prepare_only {
            println!("xtask: the sid root with {} is ready in {}", rt.packages.join(", "), root.display());
        }
    }
    if prepare_only {
        return Ok(());
    }
    let test = build_test()?;
    let engines = if chosen.iter().any(|rt| rt.major >= 7) { Some(build_engines_test()?) } else { None };
    chosen.iter().zip(&roots).try_for_each(|(rt, root)| check(rt, root, &test, engines.as_deref()))
}
