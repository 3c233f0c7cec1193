//! Staged copies host → ext → host through the copy engine, against a floor measured in
//! the same run: two plain memcpys of the same size (what the bytes must cross at least).
//! Prints medians and the ratio; asserts nothing about time.
//!
//! `cargo xtask bench` (or `cargo bench -p gpuport --bench staged_copy`).

use std::time::{Duration, Instant};

use gpuport::{copy, Array, Backend, DType, Runtime};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(iters: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm up: first-touch page faults, thread start-up
    median(
        (0..iters)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() -> gpuport::Result<()> {
    Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default())?)?;
    let rt = Runtime::discover();
    let host = rt.device("host")?;
    let ext = rt.device("ext:0")?;
    println!("{:>10} {:>12} {:>12} {:>7}", "bytes", "2×memcpy", "host→ext→host", "ratio");
    for &n in &[1usize << 16, 1 << 20, 16 << 20, 64 << 20] {
        let iters = if n >= 16 << 20 { 9 } else { 31 };
        let src_v = vec![1u8; n];
        let mut mid_v = vec![0u8; n];
        let mut dst_v = vec![0u8; n];
        let floor = time(iters, || {
            mid_v.copy_from_slice(std::hint::black_box(&src_v));
            dst_v.copy_from_slice(std::hint::black_box(&mid_v));
        });
        let src = Array::from_slice(&host, &src_v, &[n])?;
        let on_ext = Array::empty(&ext, &[n], DType::U8)?;
        let back = Array::empty(&host, &[n], DType::U8)?;
        let mut failed = None;
        let staged = time(iters, || {
            if let Err(e) = copy(&src, &on_ext).and_then(|_| copy(&on_ext, &back)) {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        println!(
            "{n:>10} {:>10.1}µs {:>10.1}µs {:>6.2}x",
            floor.as_secs_f64() * 1e6,
            staged.as_secs_f64() * 1e6,
            staged.as_secs_f64() / floor.as_secs_f64()
        );
    }
    Ok(())
}
