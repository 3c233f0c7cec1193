//! A plugin whose `initialize` never returns (the C plugin built with
//! `BREACH_INITIALIZE_BLOCKS`) is unavailable once `GPUPORT_PLUGIN_INIT_TIMEOUT` has
//! passed, and loading and discovery go on. A test binary of its own: it sets the variable
//! before anything else runs.

use std::time::{Duration, Instant};

use gpuport::{Runtime, INIT_TIMEOUT_ENV};
use gpuport_c_plugin_test::library;

#[test]
fn an_initialize_that_never_returns_times_out() {
    // SAFETY-free in this edition, and this binary's one test: no other thread reads the
    // environment.
    std::env::set_var(INIT_TIMEOUT_ENV, "0.5");
    let started = Instant::now();
    let reason = Runtime::load_plugin(library(Some("initialize-blocks"))).unwrap_err().to_string();
    let took = started.elapsed();
    assert!(reason.contains("did not return within 0.5 s"), "{reason}");
    assert!(took >= Duration::from_millis(500), "refused after {took:?}, before the timeout");
    // Discovery goes on, and another plugin loads.
    Runtime::load_plugin(library(None)).unwrap();
    assert!(Runtime::discover().device("cplugin:0").is_ok());
}
