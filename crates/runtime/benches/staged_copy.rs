//! Copies between devices through the copy engine, against a floor measured in the same
//! run: two plain memcpys of the same size between page-aligned buffers (what the bytes
//! must cross at least). Two paths: host → ext → host (the direct route: ext's streams
//! reach host memory, one copy each way) and ext:0 → ext:1 (no link between them: staged
//! through two pinned buffers in chunks). Prints medians and ratios; asserts nothing
//! about time.
//!
//! `cargo xtask bench` (or `cargo bench -p gpuport --bench staged_copy`).

use std::time::{Duration, Instant};

use common::PageBuf;
use gpuport_runtime::{copy, Array, Backend, CopyRoute, DType, Runtime};

mod common;

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

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() -> gpuport_runtime::Result<()> {
    Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default())?)?;
    let rt = Runtime::discover();
    let (host, ext0, ext1) = (rt.device("host")?, rt.device("ext:0")?, rt.device("ext:1")?);
    println!(
        "{:>10} {:>12} {:>16} {:>7} {:>16} {:>7}",
        "bytes", "2×memcpy", "host→ext→host", "ratio", "ext:0→ext:1", "ratio"
    );
    for &n in &[1usize << 16, 1 << 20, 16 << 20, 64 << 20] {
        let iters = if n >= 16 << 20 { 9 } else { 31 };
        let (src_v, mut mid_v, mut dst_v) = (PageBuf::new(n, 1), PageBuf::new(n, 0), PageBuf::new(n, 0));
        let floor = time(iters, || {
            mid_v.as_mut_slice().copy_from_slice(std::hint::black_box(src_v.as_slice()));
            dst_v.as_mut_slice().copy_from_slice(std::hint::black_box(mid_v.as_slice()));
        });
        let src = Array::from_slice(&host, src_v.as_slice(), &[n])?;
        let on_ext = Array::empty(&ext0, &[n], DType::U8)?;
        let back = Array::empty(&host, &[n], DType::U8)?;
        let on_ext1 = Array::empty(&ext1, &[n], DType::U8)?;
        if copy(&on_ext, &on_ext1)? == CopyRoute::Direct {
            return Err(gpuport_runtime::Error::invalid_argument("ext:0 → ext:1 was expected to be staged"));
        }
        let mut failed = None;
        let mut note = |r: gpuport_runtime::Result<CopyRoute>| {
            if let Err(e) = r {
                failed.get_or_insert(e);
            }
        };
        let direct = time(iters, || note(copy(&src, &on_ext).and_then(|_| copy(&on_ext, &back))));
        let staged = time(iters, || note(copy(&on_ext, &on_ext1)));
        if let Some(e) = failed {
            return Err(e);
        }
        println!(
            "{n:>10} {:>10.1}µs {:>14.1}µs {:>6.2}x {:>14.1}µs {:>6.2}x",
            micros(floor),
            micros(direct),
            micros(direct) / micros(floor),
            micros(staged),
            micros(staged) / micros(floor)
        );
    }
    Ok(())
}
