//! CUDA bandwidth and latency through gpuport, on `cuda:0`: pinned host→device,
//! device→host and device→device copies at 1 MiB, 16 MiB, 256 MiB and 1 GiB (event-timed
//! on the GPU), and event record, stream wait and kernel launch + synchronize latency
//! (host-timed), and strided views read to the host (`Array::to_bytes`, host-timed: one
//! column of an 8192 × 8192 `f32` matrix, every 8th `f32` of 64 MiB — the elements alone,
//! packed on the device by a copy kernel (2D copies where none compiles) and read in one
//! piece — and the 64 MiB read whole,
//! what reading a view's span costs). Prints
//! one `RESULT <metric> <value> <unit>` line per figure; the GPU
//! bundle's `run.sh` runs CuPy's `bench/cupy_peer.py` with the same metric names in the
//! same run and prints the ratios. Asserts nothing about time. Without a CUDA GPU it says
//! why and exits with status 2.
//!
//! `cargo bench -p gpuport --bench cuda_bandwidth`, or `bin/bench-cuda` in the bundle.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use gpuport_runtime::prelude::*;
use gpuport_runtime::{Array, DType, KernelArg, LaunchConfig, ModuleImage};

const SIZES: &[(usize, &str)] = &[(1 << 20, "1MiB"), (16 << 20, "16MiB"), (256 << 20, "256MiB"), (1 << 30, "1GiB")];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// GB/s of one copy, the median of several event-timed runs.
fn copy_gbps(dev: &AnyDevice, s: &AnyStream, src: &Buffer, dst: &Buffer, bytes: usize) -> Result<f64> {
    let (start, end) = (dev.create_event(EventFlags::empty())?, dev.create_event(EventFlags::empty())?);
    let runs = (2usize << 30).div_ceil(bytes).clamp(3, 30);
    s.copy(src, 0, dst, 0, bytes)?; // warm up
    s.synchronize()?;
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        s.record(&start)?;
        s.copy(src, 0, dst, 0, bytes)?;
        s.record(&end)?;
        end.synchronize()?;
        ms.push(f64::from(start.elapsed_ms(&end)?));
    }
    Ok(bytes as f64 / (median(ms) / 1e3) / 1e9)
}

/// Microseconds per call of `op`, the median of 5 batches of `n`, `settle` run after each
/// batch (inside the timing).
fn per_op_us(n: usize, mut op: impl FnMut() -> Result<()>, mut settle: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut batches = Vec::new();
    for _ in 0..6 {
        let t = Instant::now();
        for _ in 0..n {
            op()?;
        }
        settle()?;
        batches.push(t.elapsed());
    }
    batches.remove(0); // warm-up batch
    Ok(median(batches.iter().map(Duration::as_secs_f64).collect()) * 1e6 / n as f64)
}

fn run(dev: &AnyDevice) -> Result<()> {
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    for &(bytes, label) in SIZES {
        let pinned = dev.alloc_pinned(bytes, Default::default())?;
        let (a, b) = (dev.alloc(bytes)?, dev.alloc(bytes)?);
        println!("RESULT h2d_{label} {:.2} GB/s", copy_gbps(dev, &s, &pinned, &a, bytes)?);
        println!("RESULT d2h_{label} {:.2} GB/s", copy_gbps(dev, &s, &a, &pinned, bytes)?);
        println!("RESULT d2d_{label} {:.2} GB/s", copy_gbps(dev, &s, &a, &b, bytes)?);
    }
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    println!("RESULT event_record {:.3} us", per_op_us(10_000, || s.record(&ev), || s.synchronize())?);
    let other = dev.create_stream(StreamFlags::NON_BLOCKING, 0)?;
    s.record(&ev)?;
    println!("RESULT stream_wait {:.3} us", per_op_us(10_000, || other.wait(&ev), || other.synchronize())?);
    let module = dev.load_module(ModuleImage::Ptx(gpuport_runtime::cuda::FILL_U32_PTX))?;
    let fill = dev.kernel(&module, "fill_u32")?;
    let out = dev.alloc(4 * 128)?;
    let args = [KernelArg::buffer(&out), KernelArg::scalar(128u32), KernelArg::scalar(7u32)];
    let cfg = LaunchConfig::for_items(128, 128)?;
    let launch_sync = per_op_us(
        1_000,
        || {
            s.launch(&fill, &cfg, &args)?;
            s.synchronize()
        },
        || Ok(()),
    )?;
    println!("RESULT launch_sync {launch_sync:.3} us");
    strided_reads(dev)
}

/// Strided views read back to pageable host memory. Whether `to_bytes` reads a view's
/// elements alone or its whole span is decided by costs measured on the software devices;
/// these figures say what packing the elements on a GPU costs against the whole read.
fn strided_reads(dev: &AnyDevice) -> Result<()> {
    let n = 8192usize;
    let matrix = Array::zeros(dev, &[n, n], DType::F32)?;
    let column = matrix.index_axis(1, 17)?;
    let read = |a: &Array, reps: usize| per_op_us(reps, || a.to_bytes().map(drop), || Ok(()));
    println!("RESULT column_read {:.1} us", read(&column, 20)?);
    let line = Array::zeros(dev, &[16 << 20], DType::F32)?;
    println!("RESULT every8_read {:.1} us", read(&line.slice(0, 0, None, 8)?, 3)?);
    println!("RESULT whole_64MiB_read {:.1} us", read(&line, 3)?);
    Ok(())
}

fn main() -> ExitCode {
    let rt = Runtime::discover_with(&gpuport_runtime::DiscoverOptions {
        backends: Some(vec!["cuda".into()]),
        ..Default::default()
    });
    let dev = match rt.device("cuda:0") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cuda_bandwidth: no CUDA device: {e}");
            return ExitCode::from(2);
        }
    };
    let info = dev.info().map(|i| i.name).unwrap_or_default();
    println!("device: {} ({info})", dev.id());
    match run(&dev) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuda_bandwidth failed: {e}");
            ExitCode::FAILURE
        }
    }
}
