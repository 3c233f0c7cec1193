//! The mutation check: every mutant of `gpuport-mutants` runs the whole conformance suite
//! through its public entry point, in a process of its own (a broken port must not disturb
//! the others, and a hang is killed). A mutant passes this check only when the suite
//! fails it in the case named for it; the control must pass every case.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuport::Runtime;
use gpuport_conformance::{registered_fill_kernel, run_port, Port};
use gpuport_mutants::{with_mutant, Mutant, MUTANTS};
use libtest_mimic::{Arguments, Failed, Trial};

/// Set in a child process: the mutant it runs the suite against.
const CHILD_ENV: &str = "GPUPORT_MUTANT";
/// How long one mutant's suite may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(240);

fn main() {
    if let Ok(index) = std::env::var(CHILD_ENV) {
        std::process::exit(run_child(&index));
    }
    let args = Arguments::from_args();
    let trials = MUTANTS
        .iter()
        .enumerate()
        .map(|(index, mutant)| Trial::test(mutant.name, move || check(index, mutant)))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

/// In the child: registers mutant `index`, runs the suite, prints the report.
fn run_child(index: &str) -> i32 {
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
    let report = run_port(&Port { name: MUTANTS[index].name, register: None, kernel: Some(registered_fill_kernel()) });
    print!("{report}");
    0
}

/// Runs mutant `index` in a child process and checks its report.
fn check(index: usize, mutant: &Mutant) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| format!("no test executable: {e}"))?;
    let mut child = Command::new(exe)
        .env(CHILD_ENV, index.to_string())
        .env_remove("GPUPORT_BACKENDS")
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
fn judge(mutant: &Mutant, report: &str) -> Result<(), String> {
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
