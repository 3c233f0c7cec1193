//! How long a collective may wait for the other ranks: `GPUPORT_COLLECTIVE_TIMEOUT`
//! seconds, read once, for every engine's watchdog.

use std::sync::OnceLock;
use std::time::Duration;

/// Seconds a collective may wait for the other ranks before gpuport gives up on it: MPI's
/// watchdog aborts the job through the launcher, NCCL's and RCCL's abort the communicator.
pub const TIMEOUT_ENV: &str = "GPUPORT_COLLECTIVE_TIMEOUT";
/// [`TIMEOUT_ENV`]'s default: 10 minutes, as PyTorch's process groups wait.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The watchdogs' limit (read once).
pub(crate) fn limit() -> Duration {
    static LIMIT: OnceLock<Duration> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var(TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64)
    })
}
