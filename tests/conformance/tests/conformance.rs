//! The conformance harness for this workspace's backends. Runs the suite against the
//! backends named in `GPUPORT_CONFORMANCE_BACKENDS` (comma-separated; default `host`; `all`
//! = every built-in port, unavailable ones reported and ignored). A backend that is named
//! explicitly but unavailable fails the run with its reason — it never passes silently. A
//! case a backend cannot run is reported as ignored, with the reason as its kind. Cases run
//! one at a time: some provoke device-wide errors on purpose.

use std::sync::Arc;

use gpuport::Runtime;
use gpuport_conformance::{builtin_ports, open_target, register, run_case, CASES};
use libtest_mimic::{Arguments, Failed, Trial};

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
    let names: Vec<String> =
        if all { ports.iter().map(|p| p.name.to_owned()).collect() } else { gpuport::parse_backend_list(&wanted) };
    let mut trials = Vec::new();
    for name in names {
        let kernel = ports.iter().find(|p| p.name == name).and_then(|p| p.kernel);
        match open_target(&rt, &name, kernel) {
            Ok(target) => {
                let target = Arc::new(target);
                for case in CASES {
                    let test_name = format!("{name}::{}", case.name);
                    if let Some(why) = target.missing(case.needs) {
                        eprintln!("skipping {test_name}: {why}");
                        trials.push(Trial::test(test_name, || Ok(())).with_kind("skipped").with_ignored_flag(true));
                        continue;
                    }
                    let target = target.clone();
                    trials.push(Trial::test(test_name, move || {
                        run_case(case, &target).map_err(|f| Failed::from(f.to_string()))
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
    let conclusion = libtest_mimic::run(&args, trials);
    // Give every device resource back before the process ends: the staging buffers the copy
    // engine keeps, and drops still on their way to the release thread (a driver that
    // checks for leaks at exit, such as the driver doubles, reports what is left).
    gpuport::release_staging_buffers();
    gpuport::release::flush();
    conclusion.exit();
}
