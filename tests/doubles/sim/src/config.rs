//! The double's settings, read once from the environment when the driver is initialised.

use std::time::Duration;

/// Number of simulated devices (default 2).
pub const DEVICES_ENV: &str = "GPUPORT_DOUBLE_DEVICES";
/// Memory per simulated device, in MiB (default 1024).
pub const MEMORY_ENV: &str = "GPUPORT_DOUBLE_MEMORY_MIB";
/// A delay before each stream operation runs, in microseconds (default 0).
pub const DELAY_ENV: &str = "GPUPORT_DOUBLE_DELAY_US";
/// A file every validation report is appended to (reports always go to stderr too).
pub const REPORT_ENV: &str = "GPUPORT_DOUBLE_REPORT";
/// Faults to inject: `NAME:N=STATUS,…` (see [`crate::faults`]).
pub const FAULTS_ENV: &str = "GPUPORT_DOUBLE_FAULTS";
/// `0` turns off the report of objects still alive at process exit (for programs that
/// never free what they hold at exit, such as a Python interpreter).
pub const LEAK_CHECK_ENV: &str = "GPUPORT_DOUBLE_LEAK_CHECK";
/// A deliberate flaw to run with (see [`crate::mutation`]); unset: none.
pub const MUTANT_ENV: &str = "GPUPORT_DOUBLE_MUTANT";
/// An exit status (1–255) the process ends with when any report was made, for a harness
/// that judges a run by its status alone (cargo-mutants over the vendor kit); unset: the
/// process's own status stands, and the report file tells.
pub const FAIL_EXIT_ENV: &str = "GPUPORT_DOUBLE_FAIL_EXIT";

/// The settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Simulated devices.
    pub devices: usize,
    /// Bytes of memory per device.
    pub memory: usize,
    /// Delay before each stream operation.
    pub delay: Duration,
    /// Whether objects alive at exit are reported.
    pub leak_check: bool,
    /// The fault specification, unparsed.
    pub faults: String,
    /// The mutant's name, unparsed (empty: none).
    pub mutant: String,
    /// The status to end a process that made reports with.
    pub fail_exit: Option<i32>,
}

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

impl Config {
    /// Reads the environment.
    pub fn from_env() -> Self {
        Config {
            devices: number(DEVICES_ENV, 2).min(16) as usize,
            memory: (number(MEMORY_ENV, 1024).clamp(1, 64 * 1024) as usize) << 20,
            delay: Duration::from_micros(number(DELAY_ENV, 0)),
            leak_check: std::env::var(LEAK_CHECK_ENV).map_or(true, |v| v.trim() != "0"),
            faults: std::env::var(FAULTS_ENV).unwrap_or_default(),
            mutant: std::env::var(MUTANT_ENV).unwrap_or_default(),
            fail_exit: std::env::var(FAIL_EXIT_ENV)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .filter(|status| (1..=255).contains(status)),
        }
    }
}
