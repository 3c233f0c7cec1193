//! The deliberate bugs: each checker must report the bug it exists for, here.

use super::{address, ensure_nightly, finish, host_triple, miri, thread, Run, MIRI, RUST_SRC};

/// Which checker must report a deliberate bug.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Checker {
    Miri,
    Thread,
    Address,
}

/// A deliberate bug (a cargo feature of the crate it lives in), the test that walks into
/// it — a test that passes on the code as shipped — and what its checker prints. For
/// AddressSanitizer the test is a pytest path, run against the Python module built with
/// the feature.
struct Bug {
    what: &'static str,
    checker: Checker,
    package: &'static str,
    feature: &'static str,
    test: &'static [&'static str],
    report: &'static str,
}

/// The bugs each checker exists for, planted where gpuport could make them.
const BUGS: &[Bug] = &[
    Bug {
        what: "an unsynchronised write from a stream worker (a copy counted complete before it writes)",
        checker: Checker::Thread,
        package: "gpuport-queue",
        feature: "deliberate-race",
        test: &["--test", "buffers_in_flight", "a_copy_has_written_its_bytes_when_synchronize_returns"],
        report: "WARNING: ThreadSanitizer: data race",
    },
    Bug {
        what: "a buffer freed while its stream work is pending (a queued copy that does not keep its buffers)",
        checker: Checker::Miri,
        package: "gpuport-queue",
        feature: "deliberate-early-free",
        test: &["--test", "buffers_in_flight", "a_waiting_copy_keeps_its_buffers"],
        report: "has been freed",
    },
    Bug {
        what: "a DLPack deleter run twice (an imported tensor given back twice)",
        checker: Checker::Miri,
        package: "gpuport-dlpack",
        feature: "deliberate-double-delete",
        test: &["--test", "exchange", "the_imported_array_releases_the_producer_once"],
        report: "has been freed",
    },
    Bug {
        what: "a DLPack deleter run twice, seen from Python (a NumPy array given back twice)",
        checker: Checker::Address,
        package: "gpuport-dlpack",
        feature: "deliberate-double-delete",
        test: &["tests/python/test_numpy.py::test_device_and_shared_memory_both_ways"],
        report: "ERROR: AddressSanitizer: attempting double-free",
    },
];

/// Runs every deliberate bug for one of `checkers` under its checker; returns those not
/// reported as they must be.
pub(super) fn bug_failures(checkers: &[Checker]) -> Result<Vec<String>, String> {
    ensure_nightly(&[MIRI, RUST_SRC])?;
    let triple = host_triple()?;
    let mut failed = Vec::new();
    for bug in BUGS.iter().filter(|b| checkers.contains(&b.checker)) {
        let step = Run { package: bug.package, args: bug.test, env: &[], strict_provenance: false };
        let mut cmd = match bug.checker {
            Checker::Miri => miri::miri_command(&step, &[bug.feature]),
            Checker::Thread => thread::tsan_command(&triple, &step, &[bug.feature]),
            Checker::Address => address::pytest_command(&[&format!("{}/{}", bug.package, bug.feature)], bug.test)?,
        };
        eprintln!("xtask: deliberate bug: {}", bug.what);
        eprintln!("xtask: running {cmd:?}");
        let out = cmd.output().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() && text.contains(bug.report) {
            let line = text.lines().find(|l| l.contains(bug.report)).unwrap_or(bug.report);
            eprintln!("xtask: reported, as it must be: {}", line.trim());
        } else {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            failed.push(format!("deliberate bug not reported (`{}`): {}", bug.report, bug.what));
        }
    }
    Ok(failed)
}

/// `cargo xtask sanitize bugs`: each deliberate bug must make its checker report it.
pub fn bugs() -> Result<(), String> {
    finish("the deliberate bugs", bug_failures(&[Checker::Miri, Checker::Thread, Checker::Address])?)
}
