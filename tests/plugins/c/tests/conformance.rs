//! The conformance suite through the C ABI against a plugin written in C: the whole suite
//! must pass on the plugin, and each broken variant must fail the case written for the
//! rule it breaks (as the Rust mutants of `tests/mutants` do).

use gpuport::{ModuleImage, Runtime};
use gpuport_c_plugin_test::{library, NAME};
use gpuport_conformance::{run_port, Port, TestKernel};

/// The plugin's one kernel: module "kernels" of its own image format.
fn kernel() -> TestKernel {
    TestKernel { image: ModuleImage::Custom { format: "c-plugin", bytes: b"kernels" }, name: "fill_u32" }
}

fn load() -> gpuport::Result<()> {
    Runtime::load_plugin(library(None))
}

#[test]
fn the_c_plugin_passes_the_whole_suite() {
    let report = run_port(&Port { name: NAME, register: Some(load), kernel: Some(kernel()) });
    report.assert_passed();
}

/// The cases that failed in a report (`group::case`).
fn failed(report: &str) -> Vec<String> {
    report
        .lines()
        .filter_map(|l| l.split_once(" ... FAILED")?.0.split_once("::").map(|(_, case)| case.to_owned()))
        .collect()
}

macro_rules! broken_variant {
    ($test:ident, $variant:literal, $case:literal) => {
        #[test]
        fn $test() {
            fn load() -> gpuport::Result<()> {
                Runtime::load_plugin(library(Some($variant)))
            }
            let name = concat!("cplugin-", $variant);
            let report = run_port(&Port { name, register: Some(load), kernel: Some(kernel()) }).to_string();
            let failed = failed(&report);
            assert!(
                failed.iter().any(|c| c == $case),
                "{name} was not caught by {} (it failed {failed:?}):\n{report}",
                $case
            );
        }
    };
}

broken_variant!(a_wait_that_does_nothing_is_caught, "noop-wait", "ordering::cross_stream_event");
broken_variant!(a_query_that_is_always_done_is_caught, "query-always-done", "ordering::stream_query");
broken_variant!(an_elapsed_time_not_measured_is_caught, "fake-elapsed", "events::elapsed_time");
broken_variant!(
    no_implicit_synchronisation_is_caught,
    "no-implicit-sync",
    "implicit::blocking_stream_waits_for_legacy"
);
broken_variant!(
    an_event_told_before_its_stream_counts_it_is_caught,
    "event-before-count",
    "events::stream_and_event_agree"
);
broken_variant!(progress_read_from_the_wrong_counter_is_caught, "progress-wrong-counter", "ordering::stream_query");
