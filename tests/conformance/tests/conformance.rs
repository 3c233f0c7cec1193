//! The conformance harness. Runs the suite against the backends named in
//! `GPUPORT_CONFORMANCE_BACKENDS` (comma-separated; default `host`; `all` = every backend
//! this runtime knows, unavailable ones reported and skipped). A backend that is named
//! explicitly but unavailable fails the run with its reason — it never passes silently.

use std::sync::Arc;

use gpuport::Runtime;
use gpuport_conformance::{open_target, run_case, CASES};
use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    for failure in gpuport_conformance::register_plugins() {
        eprintln!("{failure}");
    }
    let rt = Runtime::discover();
    let wanted = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_else(|_| "host".into());
    let all = wanted.trim() == "all";
    let names: Vec<String> =
        if all { rt.reports().iter().map(|r| r.name.clone()).collect() } else { gpuport::parse_backend_list(&wanted) };
    let mut trials = Vec::new();
    for name in names {
        match open_target(&rt, &name) {
            Ok(target) => {
                let target = Arc::new(target);
                for case in CASES {
                    let target = target.clone();
                    let backend = name.clone();
                    trials.push(Trial::test(format!("{name}::{}", case.name), move || match run_case(case, &target) {
                        Ok(None) => Ok(()),
                        Ok(Some(skip)) => {
                            eprintln!("  note: {backend}::{} did not apply: {skip}", case.name);
                            Ok(())
                        }
                        Err(f) => Err(Failed::from(f.to_string())),
                    }));
                }
            }
            Err(reason) if all => {
                eprintln!("skipping {name}: {reason}");
                trials.push(Trial::test(format!("{name}::available"), || Ok(())).with_ignored_flag(true));
            }
            Err(reason) => {
                trials.push(Trial::test(format!("{name}::available"), move || Err(Failed::from(reason))));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
