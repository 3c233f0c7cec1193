//! gpuport's task runner: `cargo xtask <command>`.
//!
//! - `test --backend host|cuda|rocm|ext|all` — the workspace's tests plus the conformance
//!   suite against that backend. A backend named explicitly that is unavailable fails the
//!   run with its reason; `all` runs every available backend and lists the others, then
//!   the CUDA and ROCm backends on their driver doubles (see `doubles`).
//! - `test --backend cuda|rocm --double` — that backend's conformance run and device
//!   tests on its driver double(s) only, failing on any validation report.
//! - `doubles` — builds the driver doubles into `target/driver-doubles/`.
//! - `lint` — rustfmt check, clippy with warnings denied, rustdoc with warnings denied.
//! - `bench [--quick]` — the benchmarks (release build): every figure beside its floor
//!   measured in the same run, in two thread placements, printed as one table of ratios
//!   and targets (see `bench`); `--quick` is CI's smoke run.
//! - `ci` — what `.ci/run` runs: `lint`, then `test --backend all`.
//! - `gpu-bundle [--out DIR]` — one folder (default `gpu-bundle/`) with release test
//!   binaries, the demo, the benchmarks and `run.sh`, to run every GPU check on a CUDA
//!   machine without a Rust toolchain (see `gpu_bundle`).
//! - `rocm-sid-check [--root DIR] [--prepare]` — the ROCm loader against Debian sid's HIP 6 runtime in
//!   a debootstrapped sid root (see `rocm_sid`).
//!
//! `test` also builds the Python module's wheel into `.venv` and runs `tests/python` (see
//! `python`), and builds and tests `examples/port-template`, a device port kept outside the
//! workspace (its own `Cargo.toml`), through the conformance suite's public entry point;
//! `lint` checks it too.

mod bench;
mod doubles;
mod gpu_bundle;
mod python;
mod rocm_sid;

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

const BACKENDS: &[&str] = &["host", "cuda", "rocm", "ext", "all"];

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\
         \n\
         commands:\n  \
           test --backend NAME   workspace tests + conformance suite on NAME ({})\n  \
           test --backend cuda|rocm --double  that backend's tests on its driver double(s)\n  \
           doubles               build the CUDA and HIP driver doubles into target/driver-doubles\n  \
           lint                  cargo fmt --check, clippy -D warnings, rustdoc -D warnings\n  \
           bench [--quick]       benchmarks: ratios against floors measured in the same run, one table\n  \
           ci                    lint, then test --backend all (what .ci/run runs)\n  \
           python-test           build the wheel into .venv and run tests/python only\n  \
           gpu-bundle [--out DIR] release test binaries, demo, benches and run.sh for a CUDA machine\n  \
           rocm-sid-check [--root DIR] [--prepare] the ROCm loader against sid's HIP 6 runtime, in a debootstrapped root",
        BACKENDS.join("|")
    );
    ExitCode::from(2)
}

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The port template's manifest: a crate outside the workspace.
const TEMPLATE: &str = "examples/port-template/Cargo.toml";

/// `cargo <subcommand> --manifest-path <template> <args>`, sharing the workspace's target
/// folder so the gpuport crates it depends on are built once.
fn template_cargo(subcommand: &str, args: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.arg(subcommand).args(["--manifest-path", TEMPLATE]).args(args);
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        cmd.env("CARGO_TARGET_DIR", "target");
    }
    cmd
}

/// Runs a command, echoing it; returns whether it succeeded.
fn run(mut cmd: Command) -> bool {
    eprintln!("xtask: running {cmd:?}");
    match cmd.status() {
        Ok(status) => status.success(),
        Err(e) => {
            eprintln!("xtask: could not start {cmd:?}: {e}");
            false
        }
    }
}

/// Totals of libtest's `test result:` lines.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Tally {
    /// Adds a `test result: ok. 3 passed; 0 failed; 1 ignored; …` line.
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else { return };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else { continue };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// Runs `cargo test …`, echoing its output and adding its results to `tally`.
fn run_tests(mut cmd: Command, tally: &mut Tally) -> bool {
    eprintln!("xtask: running {cmd:?}");
    let mut child = match cmd.stdout(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask: could not start {cmd:?}: {e}");
            return false;
        }
    };
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            tally.add_line(&line);
        }
    }
    child.wait().is_ok_and(|s| s.success())
}

/// `test --backend cuda|rocm --double`: the backend's tests on its driver double(s) only.
fn test_on_doubles(backend: &str) -> bool {
    if let Err(e) = doubles::build().and_then(|()| python::install()) {
        eprintln!("xtask: {e}");
        return false;
    }
    let mut tally = Tally::default();
    let mut ok = true;
    for d in doubles::DOUBLES.iter().filter(|d| d.backend == backend) {
        ok &= doubles::test_on(d, &mut tally);
    }
    println!("\nxtask test --backend {backend} --double: {} passed, {} failed", tally.passed, tally.failed);
    ok
}

fn test(backend: &str) -> bool {
    if !BACKENDS.contains(&backend) {
        eprintln!("xtask: unknown backend {backend:?}; expected one of {}", BACKENDS.join(", "));
        return false;
    }
    let mut cmd = cargo();
    // Unit, integration and doc tests of every crate, the conformance harness included.
    cmd.args(["test", "--workspace", "--no-fail-fast"]);
    cmd.env("GPUPORT_CONFORMANCE_BACKENDS", backend);
    // Discovery must see every backend the suite is asked for.
    cmd.env_remove("GPUPORT_BACKENDS");
    let mut tally = Tally::default();
    let mut ok = run_tests(cmd, &mut tally);
    // A named GPU backend: the tests that need its devices (ignored by default) — its own
    // device tests and the interchange tests on its arrays, and nothing else (not the other
    // vendor's, nor the checks of a real library without a device).
    if backend == "cuda" || backend == "rocm" {
        for mut cmd in doubles::device_tests(backend) {
            cmd.env("GPUPORT_CONFORMANCE_BACKENDS", backend).env_remove("GPUPORT_BACKENDS");
            ok &= run_tests(cmd, &mut tally);
        }
    }
    // The port written outside the workspace passes the suite through its public entry point.
    ok &= run_tests(template_cargo("test", &[]), &mut tally);
    // The Python module: the wheel built and installed into .venv, pytest over tests/python
    // (NumPy, JAX and tvm-ffi on the CPU; the GPU peers where a CUDA device is).
    let python_ok = report(python::test());
    // `all`: the CUDA and ROCm backends also run on their driver doubles (CPU
    // implementations of libcuda and libamdhip64 with a validation layer), so every line of
    // them runs here whether or not a GPU is.
    if backend == "all" {
        match doubles::build() {
            Ok(()) => {
                for d in doubles::DOUBLES {
                    ok &= doubles::test_on(d, &mut tally);
                }
            }
            Err(e) => {
                eprintln!("xtask: {e}");
                ok = false;
            }
        }
    }
    println!("\nxtask test --backend {backend}: {} ignored", tally.ignored);
    println!(
        "{} passed, {} failed (Rust); Python tests {}",
        tally.passed,
        tally.failed,
        if python_ok { "passed" } else { "FAILED" }
    );
    ok &= python_ok;
    if !ok {
        eprintln!("xtask: tests failed for backend `{backend}` (an unavailable backend fails as `{backend}::available` with its reason)");
    }
    ok
}

fn lint() -> bool {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings");
    // The ROCm ABI cross-check builds hip-sys, which needs the ROCm headers (HIP_PATH).
    let mut clippy_hip = cargo();
    clippy_hip.args(["clippy", "-p", "gpuport-rocm", "--all-targets", "--features", "hip-sys", "--", "-D", "warnings"]);
    let hip_headers =
        std::env::var("HIP_PATH").map(|p| std::path::Path::new(&p).join("include/hip/hip_runtime_api.h").is_file());
    let template_fmt = template_cargo("fmt", &["--check"]);
    let template_clippy = template_cargo("clippy", &["--all-targets", "--", "-D", "warnings"]);
    run(fmt)
        && run(clippy)
        && run(doc)
        && run(template_fmt)
        && run(template_clippy)
        && (hip_headers != Ok(true) || run(clippy_hip))
}

fn report(result: Result<(), String>) -> bool {
    result.map_err(|e| eprintln!("xtask: {e}")).is_ok()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ok = match args.as_slice() {
        ["test", "--backend", backend @ ("cuda" | "rocm"), "--double"] => test_on_doubles(backend),
        ["test", "--backend", backend] | ["test", "--backend", backend, ..] => test(backend),
        ["doubles"] => report(doubles::build()),
        ["test"] => test("host"),
        ["lint"] => lint(),
        ["bench"] => report(bench::bench(false)),
        ["bench", "--quick"] => report(bench::bench(true)),
        ["ci"] => lint() && test("all"),
        ["python-test"] => report(python::test()),
        ["gpu-bundle"] => report(gpu_bundle::gpu_bundle(std::path::Path::new(gpu_bundle::DEFAULT_OUT))),
        ["gpu-bundle", "--out", dir] => report(gpu_bundle::gpu_bundle(std::path::Path::new(dir))),
        ["rocm-sid-check", rest @ ..] => {
            let prepare = rest.contains(&"--prepare");
            let root = rest.windows(2).find(|w| w[0] == "--root").map(|w| std::path::Path::new(w[1]));
            report(rocm_sid::rocm_sid_check(root, prepare))
        }
        _ => return usage(),
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
