//! `cargo xtask stress [--runs N]`: every mutation check, run N times in a row (default
//! 20) with each run confined to CPU 0 while another process keeps that CPU busy — the
//! conditions under which a check decided by a race shows itself. Every check must be
//! caught N times of N:
//!
//! - the hand-written broken ports of `tests/mutants` (`mutation_check`, each in a
//!   process of its own, as the test command runs them);
//! - the broken variants of the C plugin (`tests/plugins/c`'s conformance test);
//! - the driver doubles' flaws under the CUDA and ROCm backends (`mutation_check`'s
//!   `driver/…` checks, with the doubles loaded).
//!
//! A check caught only when a thread loses a race passes on an idle machine and fails
//! here: the case must instead hold the work with a gate and observe the broken order
//! every time. The summary lists, per check, how many runs it failed. About 20 minutes
//! for 20 runs on the two-core development machine; CI runs it with `--runs 2`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::cargo;
use crate::doubles::{Place, DOUBLES};
use crate::gpu_bundle::artifacts;

/// The CPU every run, and the process keeping it busy, are confined to.
const CPU: &str = "0";

/// A process spinning on [`CPU`] for as long as this lives.
struct Spinner(Child);

impl Spinner {
    fn start() -> Result<Spinner, String> {
        Command::new("taskset")
            .args(["-c", CPU, "sh", "-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .map(Spinner)
            .map_err(|e| format!("could not start the spinning process with taskset (util-linux): {e}"))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One test binary run each round: a name for the summary, the executable, its arguments
/// and environment.
struct Check {
    name: String,
    executable: PathBuf,
    args: Vec<String>,
    env: Vec<(&'static str, std::ffi::OsString)>,
}

/// Builds the two test binaries and returns their paths: `mutation_check` and the C
/// plugin's conformance test.
fn binaries() -> Result<(PathBuf, PathBuf), String> {
    let mut cmd = cargo();
    cmd.args(["test", "--no-run", "--message-format=json-render-diagnostics"])
        .args([
            "-p",
            "gpuport-mutants",
            "--test",
            "mutation_check",
            "-p",
            "gpuport-c-plugin-test",
            "--test",
            "conformance",
        ])
        .stderr(Stdio::inherit());
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.output().map_err(|e| format!("could not run cargo: {e}"))?;
    if !out.status.success() {
        return Err("building the mutation checks failed".into());
    }
    let built = artifacts(&String::from_utf8_lossy(&out.stdout));
    let find = |package: &str, target: &str| {
        built
            .iter()
            .find(|a| a.package == package && a.target == target)
            .map(|a| a.executable.clone())
            .ok_or_else(|| format!("the build gave no executable for {package} {target}"))
    };
    Ok((find("gpuport-mutants", "mutation_check")?, find("gpuport-c-plugin-test", "conformance")?))
}

/// The names of the tests a libtest run lists as failed (`failures:` at its end).
fn failed_tests(output: &str) -> Vec<String> {
    let Some(list) = output.rsplit("\nfailures:\n").next().filter(|_| output.contains("\nfailures:\n")) else {
        return Vec::new();
    };
    list.lines().map_while(|l| l.strip_prefix("    ")).map(str::to_owned).collect()
}

/// `cargo xtask stress --runs N`.
pub fn stress(runs: usize) -> Result<(), String> {
    crate::doubles::build()?;
    let (mutation_check, c_plugin) = binaries()?;
    let place = Place::plain();
    let mut checks = vec![
        Check { name: "tests/mutants".into(), executable: mutation_check.clone(), args: vec![], env: vec![] },
        Check { name: "C plugin variants".into(), executable: c_plugin, args: vec![], env: vec![] },
    ];
    for d in DOUBLES.iter().filter(|d| d.name != "rocm5") {
        checks.push(Check {
            name: format!("driver flaws on the {} double", d.name),
            executable: mutation_check.clone(),
            args: vec!["--ignored".into(), format!("driver/{}/", d.backend)],
            env: place.env(d),
        });
    }
    let _spinner = Spinner::start()?;
    // Per check: the tests that failed, with how many runs they failed in.
    let mut failures: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut broken_runs = 0;
    for round in 1..=runs {
        for check in &checks {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", CPU]).arg(&check.executable).args(["-q", "--test-threads=1"]).args(&check.args);
            cmd.envs(check.env.iter().map(|(k, v)| (*k, v))).env_remove("GPUPORT_BACKENDS");
            let out = cmd.output().map_err(|e| format!("could not run {}: {e}", check.executable.display()))?;
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            let failed = failed_tests(&text);
            if !out.status.success() && failed.is_empty() {
                broken_runs += 1;
                eprintln!(
                    "xtask: round {round}: {} ended with {} and named no failed test:\n{text}",
                    check.name, out.status
                );
            }
            for test in failed {
                *failures.entry(check.name.clone()).or_default().entry(test).or_default() += 1;
            }
        }
        eprintln!("xtask: stress round {round} of {runs} done");
    }
    if failures.is_empty() && broken_runs == 0 {
        println!("xtask: stress: every mutation check caught in {runs} of {runs} runs on one busy CPU");
        return Ok(());
    }
    for (check, tests) in &failures {
        for (test, n) in tests {
            println!("xtask: stress: {check}: {test} failed in {n} of {runs} runs");
        }
    }
    Err(format!("{} check(s) failed some runs; {broken_runs} run(s) ended without naming a test", failures.len()))
}

#[cfg(test)]
mod tests {
    use super::failed_tests;

    #[test]
    fn the_failed_tests_are_read_from_libtests_summary() {
        let out = "running 3 tests\n...\nfailures:\n\n---- a stdout ----\nboom\n\nfailures:\n    a\n    b::c\n\ntest result: FAILED. 1 passed; 2 failed";
        assert_eq!(failed_tests(out), ["a", "b::c"]);
        assert!(failed_tests("test result: ok. 3 passed").is_empty());
    }
}
