//! Benchmarks' one shape: the floor, then gpuport, `GPUPORT_BENCH_ROUNDS` times (default
//! 1), as `NAME/floor/ROUND` and `NAME/gpuport/ROUND`; `cargo xtask bench` takes the
//! median of the rounds' ratios.

use criterion::{Bencher, BenchmarkId, Criterion};

/// Benchmarks `floor` then `ours`, round after round, with criterion's sample size
/// `samples` where given (slow figures).
pub fn pair(
    c: &mut Criterion,
    name: &str,
    samples: Option<usize>,
    mut floor: impl FnMut(&mut Bencher<'_>),
    mut ours: impl FnMut(&mut Bencher<'_>),
) {
    let rounds = std::env::var("GPUPORT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1usize).max(1);
    let mut g = c.benchmark_group(name);
    if let Some(n) = samples {
        g.sample_size(n);
    }
    for round in 0..rounds {
        g.bench_function(BenchmarkId::new("floor", round), &mut floor);
        g.bench_function(BenchmarkId::new("gpuport", round), &mut ours);
    }
    g.finish();
}
