//! The mutation check: every mutant of `gpuport-mutants` runs the conformance suite
//! through its public entry point, in a process of its own (a broken port must not disturb
//! the others, and a hang is killed). A mutant passes this check only when the suite
//! fails it in the case named for it; the control must pass every case. A mutant's run
//! is only that case (`run_port_cases`): the claim is that this case catches the flaw,
//! and the other cases, run on the mutant, would add minutes to every test run and
//! nothing to the verdict.
//!
//! The driver mutants (`driver/cuda/FLAW`, `driver/rocm/FLAW`) run the suite on the CUDA
//! or ROCm backend over a driver double given one flaw (`GPUPORT_DOUBLE_MUTANT`). They
//! need the double loaded (`GPUPORT_CUDA_LIBRARY` / `GPUPORT_HIP_LIBRARY`), so they are
//! ignored by default; `cargo xtask test --backend cuda|rocm --double` runs them. The
//! unflawed run on the double is the conformance run beside them, which must pass.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuport::Runtime;
use gpuport_conformance::{builtin_ports, registered_fill_kernel, run_port_cases, Port};
use gpuport_mutants::{with_mutant, DRIVER_MUTANTS, MUTANTS};
use libtest_mimic::{Arguments, Failed, Trial};

/// Set in a child process: the mutant it runs the suite against (an index into `MUTANTS`,
/// or `BACKEND/FLAW` for a driver mutant).
const CHILD_ENV: &str = "GPUPORT_MUTANT";
/// The doubles' variable that gives them a flaw.
const DOUBLE_MUTANT_ENV: &str = "GPUPORT_DOUBLE_MUTANT";
/// The vendor backends the driver mutants run through.
const VENDOR_BACKENDS: [&str; 2] = ["cuda", "rocm"];
/// How long one mutant's suite may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(240);

fn main() {
    if let Ok(index) = std::env::var(CHILD_ENV) {
        std::process::exit(run_child(&index));
    }
    let args = Arguments::from_args();
    let mut trials: Vec<Trial> = MUTANTS
        .iter()
        .enumerate()
        .map(|(index, mutant)| {
            let judged = Judged { name: mutant.name, breaks: mutant.breaks, caught_by: mutant.caught_by };
            Trial::test(mutant.name, move || check(&index.to_string(), &[], &judged))
        })
        .collect();
    trials.push(Trial::test("driver_mutants_match_the_doubles", driver_mutants_match_the_doubles));
    for backend in VENDOR_BACKENDS {
        for mutant in DRIVER_MUTANTS {
            let name = format!("driver/{backend}/{}", mutant.flaw);
            let breaks = gpuport_double_sim::mutation::MUTATIONS
                .iter()
                .find(|(_, name, _)| *name == mutant.flaw)
                .map_or(mutant.flaw, |(_, _, what)| *what);
            let judged = Judged { name: backend, breaks, caught_by: mutant.caught_by };
            let child = format!("{backend}/{}", mutant.flaw);
            let trial = Trial::test(name, move || check(&child, &[(DOUBLE_MUTANT_ENV, mutant.flaw)], &judged));
            // Ignored by default (`cargo xtask test` runs them with `--ignored` where the
            // double is loaded); the reason is given only where it is missing, so a run on
            // the double names the check alone.
            let trial = trial.with_ignored_flag(true);
            trials.push(match double_loaded(backend) {
                true => trial,
                false => {
                    trial.with_kind(format!("needs a driver double: cargo xtask test --backend {backend} --double"))
                }
            });
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Whether `backend`'s driver double is the library gpuport will load here.
fn double_loaded(backend: &str) -> bool {
    let library = match backend {
        "cuda" => std::env::var_os("GPUPORT_CUDA_LIBRARY"),
        _ => std::env::var_os("GPUPORT_HIP_LIBRARY"),
    };
    library.is_some_and(|l| l.to_string_lossy().contains("/doubles/"))
}

/// Every flaw the doubles know has a case that must catch it, and no other is named.
fn driver_mutants_match_the_doubles() -> Result<(), Failed> {
    let known: Vec<&str> = gpuport_double_sim::mutation::MUTATIONS.iter().map(|(_, name, _)| *name).collect();
    let listed: Vec<&str> = DRIVER_MUTANTS.iter().map(|m| m.flaw).collect();
    let missing: Vec<&&str> = known.iter().filter(|k| !listed.contains(k)).collect();
    let unknown: Vec<&&str> = listed.iter().filter(|l| !known.contains(l)).collect();
    match missing.is_empty() && unknown.is_empty() {
        true => Ok(()),
        false => Err(format!("flaws without a case: {missing:?}; cases for unknown flaws: {unknown:?}").into()),
    }
}

/// What a child run is judged by: the backend name the report is for, the rule broken,
/// and the case that must fail (empty: the control, which must pass every case).
struct Judged {
    name: &'static str,
    breaks: &'static str,
    caught_by: &'static str,
}

/// In the child: runs the suite against the mutant `what` names, prints the report.
fn run_child(what: &str) -> i32 {
    if let Some((backend, flaw)) = what.split_once('/') {
        // A driver mutant: the built-in vendor port, over the double the parent's
        // environment loads with the flaw it names.
        let Some(port) = builtin_ports().into_iter().find(|p| p.name == backend) else {
            eprintln!("{CHILD_ENV}={what:?} names no built-in backend");
            return 2;
        };
        let Some(mutant) = DRIVER_MUTANTS.iter().find(|m| m.flaw == flaw) else {
            eprintln!("{CHILD_ENV}={what:?} names no driver flaw");
            return 2;
        };
        print!("{}", run_port_cases(&port, |case| case == mutant.caught_by));
        return 0;
    }
    run_software_mutant(what)
}

/// In the child: registers mutant `index`, runs the suite, prints the report.
fn run_software_mutant(index: &str) -> i32 {
    let Some(index) = index.parse::<usize>().ok().filter(|&i| i < MUTANTS.len()) else {
        eprintln!("{CHILD_ENV}={index:?} names no mutant");
        return 2;
    };
    match with_mutant!(index, |backend| Runtime::register_plugin(backend)) {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            eprintln!("registering {}: {e}", MUTANTS[index].name);
            return 2;
        }
        None => {
            eprintln!("mutant {index} has no backend type");
            return 2;
        }
    }
    let port = Port { name: MUTANTS[index].name, register: None, kernel: Some(registered_fill_kernel()) };
    // The control runs every case; a mutant, the one named for its flaw.
    let caught_by = MUTANTS[index].caught_by;
    print!("{}", run_port_cases(&port, |case| caught_by.is_empty() || case == caught_by));
    0
}

/// Runs the mutant `what` names in a child process (with `env` added) and checks its
/// report. A flawed double's validation reports are expected, so they are kept out of
/// the report file the unflawed runs are checked by.
fn check(what: &str, env: &[(&str, &str)], mutant: &Judged) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| format!("no test executable: {e}"))?;
    let mut child = Command::new(exe)
        .env(CHILD_ENV, what)
        .envs(env.iter().copied())
        .env_remove("GPUPORT_BACKENDS")
        .env_remove("GPUPORT_DOUBLE_REPORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the child for {}: {e}", mutant.name))?;
    let mut stdout = child.stdout.take().ok_or("no child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{}: the suite did not finish within {LIMIT:?}", mutant.name).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = reader.join().map_err(|_| "the reader thread panicked")?;
    if !status.success() {
        return Err(format!("{}: the child failed ({status}):\n{report}", mutant.name).into());
    }
    judge(mutant, &report).map_err(|why| format!("{why}\n--- report ---\n{report}").into())
}

/// The control passes every case; a mutant fails its named case.
fn judge(mutant: &Judged, report: &str) -> Result<(), String> {
    let failed: Vec<&str> =
        report.lines().filter_map(|l| l.split_once(" ... FAILED")?.0.split_once("::").map(|(_, case)| case)).collect();
    if !report.contains(&format!("conformance of {}:", mutant.name)) {
        return Err(format!("{}: no conformance summary in the report", mutant.name));
    }
    if mutant.caught_by.is_empty() {
        return match failed.is_empty() {
            true => Ok(()),
            false => Err(format!("the control (which breaks nothing) failed: {failed:?}")),
        };
    }
    if failed.is_empty() {
        return Err(format!("{} ({}) PASSED the whole suite", mutant.name, mutant.breaks));
    }
    if !failed.contains(&mutant.caught_by) {
        return Err(format!("{} was not caught by {} (it failed {failed:?})", mutant.name, mutant.caught_by));
    }
    Ok(())
}
