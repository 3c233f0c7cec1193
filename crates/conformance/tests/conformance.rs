//! The conformance harness for this workspace's backends. Runs the suite against the
//! backends named in `GPUPORT_CONFORMANCE_BACKENDS` (comma-separated; default `host`; `all`
//! = every built-in port, unavailable ones reported and ignored). A backend that is named
//! explicitly but unavailable fails the run with its reason — it never passes silently. A
//! case a backend cannot run is reported as ignored, with the reason as its kind. Cases run
//! one at a time: some provoke device-wide errors on purpose.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gpuport_conformance::{builtin_ports, open_target, register, run_case, CASES};
use gpuport_runtime::Runtime;
use libtest_mimic::{Arguments, Failed, Trial};

/// A file the harness appends one line per backend to, for `cargo xtask test`'s summary:
/// `BACKEND<TAB>ran<TAB>PASSED<TAB>FAILED<TAB>SKIPPED` or `BACKEND<TAB>not run<TAB>WHY`.
const SUMMARY_ENV: &str = "GPUPORT_CONFORMANCE_SUMMARY";

/// One backend's outcome in this run (cases filtered out on the command line not counted).
#[derive(Default)]
struct Counts {
    passed: AtomicUsize,
    failed: AtomicUsize,
    skipped: AtomicUsize,
}

enum Outcome {
    Ran(Arc<Counts>),
    NotRun(String),
}

fn main() {
    let mut args = Arguments::from_args();
    // Cases provoke device-wide errors (a failing callback is reported by every
    // Device::synchronize until cleared), so they run one at a time.
    args.test_threads.get_or_insert(1);
    let ports = builtin_ports();
    for port in &ports {
        if let Err(failure) = register(port) {
            eprintln!("{failure}");
        }
    }
    let rt = Runtime::discover();
    let wanted = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_else(|_| "host".into());
    let all = wanted.trim() == "all";
    let names: Vec<String> = if all {
        ports.iter().map(|p| p.name.to_owned()).collect()
    } else {
        gpuport_runtime::parse_backend_list(&wanted)
    };
    let mut trials = Vec::new();
    let mut outcomes = Vec::new();
    for name in names {
        let kernel = ports.iter().find(|p| p.name == name).and_then(|p| p.kernel);
        match open_target(&rt, &name, kernel) {
            Ok(target) => {
                let target = Arc::new(target);
                let counts = Arc::new(Counts::default());
                for case in CASES {
                    let test_name = format!("{name}::{}", case.name);
                    if let Some(why) = target.missing(case.needs) {
                        eprintln!("skipping {test_name}: {why}");
                        let counts = counts.clone();
                        let skip = move || {
                            counts.skipped.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        };
                        // An ignored trial never runs; `--include-ignored` runs it, and it
                        // counts the skip. Otherwise the skip is counted below.
                        let kind = format!("skipped: {why}");
                        trials.push(Trial::test(test_name, skip).with_kind(kind).with_ignored_flag(true));
                        continue;
                    }
                    let (target, counts) = (target.clone(), counts.clone());
                    trials.push(Trial::test(test_name, move || {
                        let result = run_case(case, &target).map_err(|f| Failed::from(f.to_string()));
                        let counter = if result.is_ok() { &counts.passed } else { &counts.failed };
                        counter.fetch_add(1, Ordering::Relaxed);
                        result
                    }));
                }
                if !args.include_ignored && !args.ignored {
                    let skipped = CASES.iter().filter(|c| target.missing(c.needs).is_some()).count();
                    counts.skipped.store(skipped, Ordering::Relaxed);
                }
                outcomes.push((name, Outcome::Ran(counts)));
            }
            Err(reason) if all => {
                eprintln!("skipping {name}: {reason}");
                let trial = Trial::test(format!("{name}::available"), || Ok(())).with_kind("backend unavailable here");
                trials.push(trial.with_ignored_flag(true));
                outcomes.push((name, Outcome::NotRun(reason)));
            }
            Err(reason) => {
                outcomes.push((name.clone(), Outcome::NotRun(reason.clone())));
                trials.push(Trial::test(format!("{name}::available"), move || Err(Failed::from(reason))));
            }
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    write_summary(&outcomes);
    // Give every device resource back before the process ends: the staging buffers the copy
    // engine keeps, and drops still on their way to the release thread (a driver that
    // checks for leaks at exit, such as the driver doubles, reports what is left).
    gpuport_runtime::release_copy_resources();
    gpuport_runtime::release::flush();
    conclusion.exit();
}

/// Appends each backend's outcome to the file `GPUPORT_CONFORMANCE_SUMMARY` names, if any.
fn write_summary(outcomes: &[(String, Outcome)]) {
    let Some(path) = std::env::var_os(SUMMARY_ENV) else { return };
    let mut text = String::new();
    for (name, outcome) in outcomes {
        match outcome {
            Outcome::Ran(c) => text.push_str(&format!(
                "{name}\tran\t{}\t{}\t{}\n",
                c.passed.load(Ordering::Relaxed),
                c.failed.load(Ordering::Relaxed),
                c.skipped.load(Ordering::Relaxed)
            )),
            Outcome::NotRun(why) => text.push_str(&format!("{name}\tnot run\t{}\n", why.replace(['\t', '\n'], " "))),
        }
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        eprintln!("{SUMMARY_ENV}={}: {e}", path.to_string_lossy());
    }
}
