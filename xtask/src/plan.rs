//! What `cargo xtask test --backend NAME` runs, decided before anything runs: the steps,
//! and what is left out with the reason. `--plan` prints it without running it, and the
//! tests below check the selection for every backend on a machine without a GPU.
//!
//! The selection rules: every run has the workspace's tests (the conformance harness on the
//! named backend among them), the two port templates and the Python module (unless
//! `--no-python`). A named GPU backend adds exactly the tests that need its devices — its
//! own device tests and the interchange tests on its arrays — and never the other vendor's,
//! nor the checks that need a real library without a device (those need variables CI
//! sets). `all` adds every backend's driver double; `--double` runs only the named
//! backend's doubles.

use std::process::Command;

use crate::doubles::{self, Double};
use crate::{cargo, template_cargo, TEMPLATES};

/// How a test run was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request<'a> {
    /// `host`, `cuda`, `rocm`, `ext` or `all`.
    pub backend: &'a str,
    /// Only the backend's driver doubles (`--double`; cuda and rocm only).
    pub double: bool,
    /// Leave the Python module out (`--no-python`).
    pub no_python: bool,
}

/// One step of a run.
pub(crate) enum Step {
    /// A `cargo test` command, its libtest output counted.
    Cargo { what: String, cmd: Box<Command> },
    /// The Python module: the wheel built and installed into `.venv`, pytest over
    /// `tests/python`.
    Python,
    /// Builds the driver doubles.
    BuildDoubles,
    /// A backend's tests on one driver double (see [`doubles::test_on`]).
    OnDouble(&'static Double),
    /// The collectives' tests with several ranks under `mpiexec` (see `collectives`).
    Collectives,
}

impl Step {
    /// The step in words, for `--plan`.
    pub fn describe(&self) -> String {
        match self {
            Step::Cargo { what, cmd } => {
                let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
                format!("{what}: cargo {}", args.join(" "))
            }
            Step::Python => "the Python module: wheel into .venv, pytest tests/python".into(),
            Step::BuildDoubles => "build the driver doubles into target/doubles".into(),
            Step::Collectives => format!(
                "the collectives with {} ranks under the mpich wheel's mpiexec",
                crate::collectives::RANKS.map(|n| n.to_string()).join(" and ")
            ),
            Step::OnDouble(d) => format!(
                "the {} backend on the {} double: conformance, device tests, interchange, driver mutants, faults, Python",
                d.backend, d.name
            ),
        }
    }
}

/// A run's steps and what it leaves out, with why.
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub not_run: Vec<(String, String)>,
}

/// The vendor backends' device tests, and how to run them.
const VENDORS: [(&str, &str); 2] = [("cuda", "an NVIDIA GPU"), ("rocm", "an AMD GPU")];

/// The plan for `request`, or why it cannot be run.
pub(crate) fn plan(request: Request<'_>) -> Result<Plan, String> {
    let backend = request.backend;
    if !crate::BACKENDS.contains(&backend) {
        return Err(format!("unknown backend {backend:?}; expected one of {}", crate::BACKENDS.join(", ")));
    }
    let vendor = backend == "cuda" || backend == "rocm";
    if request.double && !vendor {
        return Err(format!("--double runs a vendor backend on its driver double: cuda or rocm, not {backend}"));
    }
    let mut steps = Vec::new();
    let mut not_run = Vec::new();
    if request.double {
        steps.push(Step::BuildDoubles);
        steps.extend(doubles::DOUBLES.iter().filter(|d| d.backend == backend).map(Step::OnDouble));
        not_run.push(("the workspace's other tests".into(), "--double runs only the backend's doubles".into()));
        return Ok(Plan { steps, not_run });
    }
    let mut workspace = cargo();
    // Unit, integration and doc tests of every crate, the conformance harness included.
    workspace.args(["test", "--workspace", "--no-fail-fast"]);
    workspace.env("GPUPORT_CONFORMANCE_BACKENDS", backend);
    // Discovery must see every backend the suite is asked for.
    workspace.env_remove("GPUPORT_BACKENDS");
    steps.push(Step::Cargo { what: format!("workspace tests, conformance on {backend}"), cmd: Box::new(workspace) });
    for (name, gpu) in VENDORS {
        if name == backend {
            for (what, mut cmd) in doubles::device_tests(name) {
                cmd.env("GPUPORT_CONFORMANCE_BACKENDS", name).env_remove("GPUPORT_BACKENDS");
                steps.push(Step::Cargo { what, cmd: Box::new(cmd) });
            }
        } else {
            not_run.push((
                format!("{name} device tests and interchange on {name} arrays"),
                format!("need {gpu}: cargo xtask test --backend {name}"),
            ));
        }
    }
    not_run.push((
        "real-library checks (backends/cuda/tests/real_driver.rs, backends/rocm/tests/real_runtime.rs)".into(),
        "need GPUPORT_REAL_LIBCUDA / GPUPORT_REAL_HIP naming a real library without a device (.ci/run sets them)"
            .into(),
    ));
    // The ports written outside the workspace pass the suite through its public entry point.
    for (what, manifest) in TEMPLATES {
        steps
            .push(Step::Cargo { what: what.into(), cmd: Box::new(template_cargo(manifest, "test", &["--workspace"])) });
    }
    if request.no_python {
        not_run.push(("the Python module's tests".into(), "--no-python".into()));
        not_run.push((
            "the collectives with several ranks".into(),
            "their MPI is the mpich wheel of the Python environment: run without --no-python".into(),
        ));
    } else {
        steps.push(Step::Python);
        steps.push(Step::Collectives);
    }
    // `all`: the CUDA and ROCm backends also run on their driver doubles, so every line of
    // them runs here whether or not a GPU is.
    if backend == "all" {
        steps.push(Step::BuildDoubles);
        steps.extend(doubles::DOUBLES.iter().map(Step::OnDouble));
    } else {
        not_run.push((
            "the CUDA and ROCm backends on their driver doubles".into(),
            "run by --backend all, or --backend cuda|rocm --double".into(),
        ));
    }
    Ok(Plan { steps, not_run })
}

impl Plan {
    /// The plan in words.
    pub fn describe(&self) -> String {
        let mut text = String::from("steps:\n");
        for (i, step) in self.steps.iter().enumerate() {
            text.push_str(&format!("  {}. {}\n", i + 1, step.describe()));
        }
        if !self.not_run.is_empty() {
            text.push_str("not run:\n");
            for (what, why) in &self.not_run {
                text.push_str(&format!("  {what} — {why}\n"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(backend: &str) -> Request<'_> {
        Request { backend, double: false, no_python: false }
    }

    /// Every cargo command of a plan, as one string each.
    fn commands(plan: &Plan) -> Vec<String> {
        plan.steps.iter().filter(|s| matches!(s, Step::Cargo { .. })).map(Step::describe).collect()
    }

    fn is_not_run(plan: &Plan, what: &str) -> bool {
        plan.not_run.iter().any(|(w, _)| w.contains(what))
    }

    #[test]
    fn a_named_gpu_backend_runs_exactly_its_own_device_tests() {
        for (name, other) in [("cuda", "rocm"), ("rocm", "cuda")] {
            let plan = plan(request(name)).expect("a known backend");
            let cmds = commands(&plan);
            let own = format!("-p gpuport-{name} --test gpu -- --include-ignored");
            assert!(cmds.iter().any(|c| c.contains(&own)), "{name}: its device tests run: {cmds:#?}");
            assert!(
                cmds.iter().any(|c| c.contains("--test vendor_devices -- --include-ignored")),
                "{name}: the interchange tests on its arrays run"
            );
            assert!(!cmds.iter().any(|c| c.contains(&format!("gpuport-{other}"))), "{name}: nothing of {other}");
            assert!(
                !cmds.iter().any(|c| c.contains("--workspace") && c.contains("--include-ignored")),
                "{name}: no ignored test of the whole workspace is switched on"
            );
            assert!(is_not_run(&plan, &format!("{other} device tests")), "{name}: says {other}'s are left out");
            assert!(is_not_run(&plan, "real-library checks"), "{name}: says the real-library checks are left out");
            assert!(plan.steps.iter().any(|s| matches!(s, Step::Python)), "{name}: the Python tests run");
            assert!(!plan.steps.iter().any(|s| matches!(s, Step::OnDouble(_))), "{name}: no double without --double");
        }
    }

    #[test]
    fn software_backends_run_no_device_tests() {
        for name in ["host", "ext"] {
            let plan = plan(request(name)).expect("a known backend");
            let cmds = commands(&plan);
            assert!(!cmds.iter().any(|c| c.contains("--include-ignored")), "{name}: {cmds:#?}");
            assert!(is_not_run(&plan, "cuda device tests") && is_not_run(&plan, "rocm device tests"));
            assert!(cmds[0].contains("test --workspace"), "{name}: the workspace's tests first");
        }
    }

    #[test]
    fn all_adds_every_double_and_double_runs_only_the_backends() {
        let all = plan(request("all")).expect("all");
        let doubles: Vec<&str> =
            all.steps.iter().filter_map(|s| if let Step::OnDouble(d) = s { Some(d.name) } else { None }).collect();
        assert_eq!(doubles, ["cuda", "rocm6", "rocm7", "rocm5"]);
        let rocm = plan(Request { backend: "rocm", double: true, no_python: false }).expect("rocm --double");
        let doubles: Vec<&str> =
            rocm.steps.iter().filter_map(|s| if let Step::OnDouble(d) = s { Some(d.name) } else { None }).collect();
        assert_eq!(doubles, ["rocm6", "rocm7", "rocm5"]);
        assert!(commands(&rocm).is_empty(), "only the doubles");
    }

    #[test]
    fn no_python_says_what_it_leaves_out_and_bad_requests_are_refused() {
        let plan = plan(Request { backend: "host", double: false, no_python: true }).expect("host");
        assert!(!plan.steps.iter().any(|s| matches!(s, Step::Python)));
        assert!(plan.not_run.iter().any(|(what, why)| what.contains("Python") && why == "--no-python"));
        assert!(super::plan(request("vulkan")).is_err_and(|e| e.contains("unknown backend")));
        assert!(super::plan(Request { backend: "host", double: true, no_python: false }).is_err());
    }
}
