//! gpuport's task runner: `cargo xtask <command>`.
//!
//! - `test --backend host|cuda|rocm|ext|all` — the workspace's tests plus the conformance
//!   suite against that backend. A backend named explicitly that is unavailable fails the
//!   run at once with its reason (nothing else runs); `all` runs every available backend and lists the others, then
//!   the CUDA and ROCm backends on their driver doubles (see `doubles`).
//! - `test --backend cuda|rocm --double` — that backend's conformance run and device
//!   tests on its driver double(s) only, failing on any validation report.
//! - `doubles` — builds the driver doubles into `target/doubles/`.
//! - `minimal-versions` — the lowest versions of the direct dependencies built by the
//!   oldest supported compiler (see `minimal_versions`).
//! - `lint` — rustfmt check, clippy with warnings denied, rustdoc with warnings denied.
//! - `bench [--quick]` — the benchmarks (release build): every figure beside its floor
//!   measured in the same run, in two thread placements, printed as one table of ratios
//!   and targets (see `bench`); `--quick` is CI's smoke run; `--interchange` measures
//!   only the interchange figures (DLPack, CAI, the C exchange API; Rust and Python);
//!   `--collectives` runs `all_reduce` beside `MPI_Allreduce_c` called directly, with 2
//!   and 4 ranks under `mpiexec` (see `bench_collectives`).
//! - `bench-table [--prefix P] PLACEMENT=DIR…` — the same table for the HAL figures, from
//!   criterion folders a `hal` benchmark binary already wrote (the GPU bundle's, where no
//!   cargo is).
//! - `ci` — what `.ci/run` runs: `lint`, then `test --backend all`.
//! - `gpu-bundle [--out DIR]` — one folder (default `gpu-bundle/`) with release test
//!   binaries, the demo, the benchmarks and `run.sh`, to run every GPU check on a CUDA
//!   machine without a Rust toolchain (see `gpu_bundle`).
//! - `python312-check [--prepare]` — the Python module's 3.12 wheel with Debian sid's
//!   CPython in a debootstrapped root; writes `target/python312`, an interpreter
//!   `GPUPORT_BENCH_PYTHON` can name (see `python_sid`).
//! - `rocm-sid-check [--runtime 6|7] [--root DIR] [--prepare]` — the ROCm loader against Debian
//!   sid's HIP 6.4 and experimental's HIP 7.2 runtimes, each in a debootstrapped sid root, and
//!   the declarations against HIP 7.2's headers (see `rocm_sid`).
//! - `mutants [--target queue|vendor|queue-kit|vendor-kit] [--shard K/N] [--untested] [--missed]` — cargo-mutants
//!   over the port templates and the two kits with the conformance suite as their test;
//!   every survivor must be explained in `docs/conformance-rules.md`, and each run records
//!   its mutants' outcomes (see `mutants`); `mutants --sample N [--seed S] [--target T]`
//!   re-runs N recorded caught mutants of each target without cargo-mutants (CI's run).
//! - `stress [--runs N]` — every mutation check N times (default 20) on one CPU another
//!   process keeps busy; each must be caught every time (see `stress`).
//! - `sanitize miri|thread|address` — the tests of the unsafe and threaded code under Miri
//!   or ThreadSanitizer, the Python module's under AddressSanitizer (see `sanitize`);
//!   `sanitize bugs` — deliberate bugs (a race, an early free, a double delete), each of
//!   which its checker must report; `sanitize ci` — the part of these CI runs.
//!
//! `test` also builds the Python module's wheel into `.venv` and runs `tests/python` (see
//! `python`), and builds and tests `examples/port-template`, a device port kept outside the
//! workspace (its own `Cargo.toml`), through the conformance suite's public entry point;
//! `lint` checks it too.

mod bench;
mod bench_collectives;
mod bench_logs;
mod bench_nccl;
mod collectives;
mod doubles;
mod env_table;
mod gpu_bundle;
mod hip_headers;
mod layers;
mod minimal_versions;
mod mutants;
mod plan;
mod python;
mod python_sid;
mod rocm_sid;
mod sanitize;
mod stress;
mod summary;

use std::process::{Command, ExitCode};

use summary::{run_tests, Tally};

const BACKENDS: &[&str] = &["host", "cuda", "rocm", "ext", "all"];

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\
         \n\
         commands:\n  \
           test --backend NAME   workspace tests + conformance suite on NAME ({})\n  \
           test --backend cuda|rocm --double  that backend's tests on its driver double(s)\n  \
           test ... --no-python  leave the Python module's tests out (the summary says so)\n  \
           test ... --plan       print what the run would do and leave out, and why; run nothing\n  \
           doubles               build the CUDA and HIP driver doubles into target/doubles\n  \
           minimal-versions      the lowest direct dependency versions, built by the declared rust-version\n  \
           lint                  cargo fmt --check, clippy -D warnings, rustdoc -D warnings\n  \
           bench [--quick]       benchmarks: ratios against floors measured in the same run, one table\n  \
           bench --interchange   the interchange figures only (Rust and Python), full rounds\n  \
           bench --collectives   all_reduce beside MPI_Allreduce called directly, 2 and 4 ranks under mpiexec\n  \
           bench-collectives-table LOG... the collectives' table from the benchmark's logs\n  \
           bench-nccl-table LOG... NCCL's all_reduce through gpuport, directly and through PyTorch, from the GPU bundle's logs\n  \
           bench-table [--prefix P] PLACEMENT=DIR... the HAL figures' table from criterion folders already written\n  \
           ci                    lint, then test --backend all (what .ci/run runs)\n  \
           python-test           build the wheel into .venv and run tests/python only\n  \
           python-install-check  pip install ./crates/python and its sdist into a fresh venv, use it without NumPy\n  \
           python312-check [--prepare] the 3.12 wheel (vectorcall) with sid's python3 in a debootstrapped root; writes target/python312\n  \
           gpu-bundle [--out DIR] release test binaries, demo, benches and run.sh for a CUDA machine\n  \
           rocm-sid-check [--runtime 6|7] [--root DIR] [--prepare] the ROCm loader against sid's HIP 6.4 and experimental's 7.2, in debootstrapped roots\n  \
           mutants [--target queue|vendor|queue-kit|vendor-kit] [--shard K/N] [--untested] [--missed] cargo-mutants over the templates and kits, the suite as their test\n  \
           mutants --sample N [--seed S] [--target T] N recorded caught mutants of each target, re-run without cargo-mutants\n  \
           stress [--runs N]     every mutation check N times (20) on one busy CPU: each caught every time\n  \
           sanitize miri|thread  the unsafe and threaded code's tests under Miri or ThreadSanitizer (nightly)\n  \
           sanitize address      the Python module built with AddressSanitizer, its tests run with leak detection\n  \
           sanitize bugs         deliberate bugs, each of which its checker must report\n  \
           sanitize ci           CI's part: Miri on the queue kit and interchange, ThreadSanitizer on the devices and doubles, their bugs",
        BACKENDS.join("|")
    );
    ExitCode::from(2)
}

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The port templates, each a crate with a workspace of its own (outside gpuport's): what
/// it is, and its manifest. The software-device template runs its work on the CPU through
/// the queue kit; the vendor template ports a runtime library (its own fake vendor, built
/// beside it) through the vendor kit.
pub(crate) const TEMPLATES: [(&str, &str); 2] = [
    ("the port template", "examples/port-template/Cargo.toml"),
    ("the vendor port template", "examples/vendor-port-template/Cargo.toml"),
];

/// `cargo <subcommand> --manifest-path <manifest> <args>`, sharing the workspace's target
/// folder so the gpuport crates a template depends on are built once.
fn template_cargo(manifest: &str, subcommand: &str, args: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.arg(subcommand).args(["--manifest-path", manifest]).args(args);
    if std::env::var_os("CARGO_TARGET_DIR").is_none() {
        cmd.env("CARGO_TARGET_DIR", "target");
    }
    cmd
}

/// Runs a command, echoing it; returns whether it succeeded.
/// `cargo` through rustup's proxy, which reads the `+toolchain` argument (the `CARGO` that
/// runs xtask is one toolchain's own binary).
pub(crate) fn rustup_cargo(toolchain: &str) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg(toolchain).env_remove("RUSTUP_TOOLCHAIN").env_remove("RUSTC");
    cmd
}

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

/// `test`: runs the plan for `request` (see `plan`), then prints the summary: per backend
/// whether the conformance suite ran and how it ended, the tests left ignored with their
/// reasons, what the command leaves out, the totals. With `--plan`, prints the plan only.
fn test(request: plan::Request<'_>, print_only: bool) -> bool {
    let plan = match plan::plan(request) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("xtask: {e}");
            return false;
        }
    };
    if print_only {
        print!("{}", plan.describe());
        return true;
    }
    if !request.double && request.backend != "all" && !backend_available(request.backend) {
        eprintln!(
            "xtask: backend `{0}` is unavailable here (`{0}::available` above gives the reason); nothing else ran",
            request.backend
        );
        return false;
    }
    // The runtime compilers the tests compile with (NVRTC from the Python environment's
    // wheel, hiprtc from Debian's ROCm 5.2 runtime), named for every test process: the
    // environment is made first where the run includes Python, so a fresh machine's first
    // run compiles as every later one does.
    if !request.no_python {
        if let Err(e) = python::ensure_venv() {
            eprintln!("xtask: {e}");
        }
    }
    for (name, value) in doubles::compilers() {
        if std::env::var_os(name).is_none() {
            std::env::set_var(name, value);
        }
    }
    let mut tally = Tally::default();
    let mut ok = true;
    let mut doubles_built = true;
    for step in plan.steps {
        match step {
            plan::Step::Cargo { cmd, .. } => ok &= run_tests(*cmd, &mut tally),
            plan::Step::Python => {
                // The wheel built and installed into .venv, pytest over tests/python (NumPy,
                // JAX and tvm-ffi on the CPU; the GPU peers where a CUDA device is).
                let (passed, failed) = python::test();
                tally.note_python(passed, &failed);
                ok &= passed;
            }
            plan::Step::BuildDoubles => {
                // The doubles' Python runs need the wheel installed.
                doubles_built = report(doubles::build());
                if doubles_built && tally.python_ran().is_none() && !request.no_python {
                    doubles_built = report(python::install());
                }
                ok &= doubles_built;
            }
            plan::Step::OnDouble(d) if doubles_built => {
                tally.context = format!("on the {} double", d.name);
                ok &= doubles::test_on(d, &mut tally, !request.no_python);
                tally.context.clear();
            }
            plan::Step::OnDouble(_) => {}
            plan::Step::Collectives => ok &= collectives::run(&mut tally),
        }
    }
    let mode = if request.double { " --double" } else { "" };
    tally.print(&format!("xtask test --backend {}{mode}", request.backend), &plan.not_run);
    if !ok {
        match tally.unavailable_backends().as_slice() {
            [] => eprintln!("xtask: tests failed for backend `{}` (listed above)", request.backend),
            unavailable => eprintln!(
                "xtask: tests failed for backend `{}` (an unavailable backend fails as `X::available` with its \
                 reason: {})",
                request.backend,
                unavailable.join(", ")
            ),
        }
    }
    ok
}

/// Whether `backend` can run here: the conformance harness's `BACKEND::available` trial,
/// alone, before anything else is built or run, so a machine without the backend's device
/// says so at once, with the reason.
fn backend_available(backend: &str) -> bool {
    let mut cmd = cargo();
    cmd.args(["test", "-q", "-p", "gpuport-conformance", "--test", "conformance", "--", "--exact"])
        .arg(format!("{backend}::available"))
        .env("GPUPORT_CONFORMANCE_BACKENDS", backend)
        .env_remove("GPUPORT_BACKENDS");
    run(cmd)
}

fn lint() -> bool {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    // The Python module's 3.12 build (vectorcall) has code of its own.
    let mut clippy_py312 = cargo();
    clippy_py312.args(["clippy", "-p", "gpuport-python", "--no-default-features", "--features", "abi3-py312"]);
    clippy_py312.args(["--", "-D", "warnings"]);
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings");
    // The ROCm ABI cross-check builds hip-sys, which needs the ROCm headers (HIP_PATH).
    let mut clippy_hip = cargo();
    clippy_hip.args(["clippy", "-p", "gpuport-rocm", "--all-targets", "--features", "hip-sys", "--", "-D", "warnings"]);
    let hip_headers =
        std::env::var("HIP_PATH").map(|p| std::path::Path::new(&p).join("include/hip/hip_runtime_api.h").is_file());
    let templates_clean = || {
        TEMPLATES.iter().all(|(_, manifest)| {
            run(template_cargo(manifest, "fmt", &["--all", "--check"]))
                && run(template_cargo(manifest, "clippy", &["--workspace", "--all-targets", "--", "-D", "warnings"]))
        })
    };
    run(fmt)
        && run(clippy)
        && run(clippy_py312)
        && run(doc)
        && templates_clean()
        && (hip_headers != Ok(true) || run(clippy_hip))
}

fn report(result: Result<(), String>) -> bool {
    result.map_err(|e| eprintln!("xtask: {e}")).is_ok()
}

/// `test [--backend NAME] [--double] [--no-python] [--plan]` (default backend: host).
fn test_request<'a>(args: &[&'a str]) -> Option<(plan::Request<'a>, bool)> {
    let mut request = plan::Request { backend: "host", double: false, no_python: false };
    let mut print_only = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match *arg {
            "--backend" => request.backend = args.next()?,
            "--double" => request.double = true,
            "--no-python" => request.no_python = true,
            "--plan" => print_only = true,
            _ => return None,
        }
    }
    Some((request, print_only))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ok = match args.as_slice() {
        ["test", rest @ ..] => match test_request(rest) {
            Some((request, print_only)) => test(request, print_only),
            None => return usage(),
        },
        ["doubles"] => report(doubles::build()),
        ["minimal-versions"] => report(minimal_versions::check()),
        ["lint"] => lint(),
        ["bench"] => report(bench::bench(bench::Run::Full)),
        ["bench", "--quick"] => report(bench::bench(bench::Run::Quick)),
        ["bench", "--interchange"] => report(bench::bench(bench::Run::Interchange)),
        ["bench", "--collectives"] => report(bench_collectives::bench_collectives()),
        ["bench-table", rest @ ..] => {
            let (prefix, homes) = match rest {
                ["--prefix", prefix, homes @ ..] => (*prefix, homes),
                homes => ("", homes),
            };
            let homes: Option<Vec<(&str, &std::path::Path)>> = homes
                .iter()
                .map(|h| h.split_once('=').map(|(placement, dir)| (placement, std::path::Path::new(dir))))
                .collect();
            match homes {
                Some(homes) => report(bench::table_from(prefix, &homes).map(|table| println!("{table}"))),
                None => return usage(),
            }
        }
        ["bench-collectives-table", logs @ ..] if !logs.is_empty() => {
            report(bench_collectives::table_from(logs).map(|table| println!("{table}")))
        }
        ["bench-nccl-table", logs @ ..] if !logs.is_empty() => {
            report(bench_nccl::table_from(logs).map(|table| println!("{table}")))
        }
        ["ci"] => lint() && test(plan::Request { backend: "all", double: false, no_python: false }, false),
        ["python-test"] => python::test().0,
        ["python-install-check"] => report(python::install_check()),
        ["gpu-bundle"] => report(gpu_bundle::gpu_bundle(std::path::Path::new(gpu_bundle::DEFAULT_OUT))),
        ["gpu-bundle", "--out", dir] => report(gpu_bundle::gpu_bundle(std::path::Path::new(dir))),
        ["stress"] => report(stress::stress(20)),
        ["stress", "--runs", n] => match n.parse::<usize>() {
            Ok(runs) if runs > 0 => report(stress::stress(runs)),
            _ => return usage(),
        },
        ["sanitize", "miri"] => report(sanitize::miri()),
        ["sanitize", "thread"] => report(sanitize::thread()),
        ["sanitize", "bugs"] => report(sanitize::bugs()),
        ["sanitize", "address"] => report(sanitize::address()),
        ["sanitize", "ci"] => report(sanitize::ci()),
        ["mutants", rest @ ..] => {
            let value = |flag: &str| rest.windows(2).find(|w| w[0] == flag).map(|w| w[1]);
            match (value("--sample").map(str::parse::<usize>), value("--seed").map(str::parse::<u64>)) {
                (Some(Ok(count)), Some(Ok(seed))) => report(mutants::sample(value("--target"), count, Some(seed))),
                (Some(Ok(count)), None) => report(mutants::sample(value("--target"), count, None)),
                (None, None) => {
                    let only: Vec<mutants::Outcome> =
                        [("--untested", mutants::Outcome::Untested), ("--missed", mutants::Outcome::Missed)]
                            .into_iter()
                            .filter(|(flag, _)| rest.contains(flag))
                            .map(|(_, outcome)| outcome)
                            .collect();
                    report(mutants::mutants(value("--target"), value("--shard"), &only))
                }
                _ => return usage(),
            }
        }
        ["python312-check"] => report(python_sid::python312_check(false)),
        ["python312-check", "--prepare"] => report(python_sid::python312_check(true)),
        ["rocm-sid-check", rest @ ..] => {
            let prepare = rest.contains(&"--prepare");
            let value = |flag: &str| rest.windows(2).find(|w| w[0] == flag).map(|w| w[1]);
            let root = value("--root").map(std::path::Path::new);
            match value("--runtime").map(str::parse::<u32>) {
                Some(Err(_)) => return usage(),
                runtime => report(rocm_sid::rocm_sid_check(runtime.and_then(Result::ok), root, prepare)),
            }
        }
        _ => return usage(),
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
