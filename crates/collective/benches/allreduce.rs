//! `all_reduce` through gpuport beside the same MPI's `MPI_Allreduce_c` called directly, in
//! the same job: run under `mpiexec -n N` by `cargo xtask bench --collectives` (criterion
//! is not used: every rank must run the same loops, which its adaptive iteration counts
//! would not give).
//!
//! Each size (8 B to 64 MiB of `f32`, summed in place on host arrays) is measured in rounds
//! — the direct call, the engine's nonblocking path as gpuport drives it
//! (`MPI_Iallreduce_c`, then `MPI_Test` until done, on the calling thread: what of the
//! difference is the engine's), then gpuport, each a fixed number of back-to-back calls
//! between two barriers — and rank 0 prints one line per size: the median over the rounds
//! of each one's time per call, and the median of the rounds' ratios of gpuport to the
//! direct call. gpuport's figure is
//! `all_reduce(…).wait()`: queued on the array's stream, run by its worker, waited for by
//! the caller.

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use gpuport_collective::{Communicator, ReduceOp};
use gpuport_runtime::{Array, Runtime};

/// `MPI_Allreduce_c`'s C signature.
type AllreduceC = unsafe extern "C" fn(*const c_void, *mut c_void, i64, *mut c_void, *mut c_void, *mut c_void) -> c_int;
/// `MPI_Iallreduce_c`'s.
type IallreduceC = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    i64,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut *mut c_void,
) -> c_int;
/// `MPI_Test`'s.
type Test = unsafe extern "C" fn(*mut *mut c_void, *mut c_int, *mut c_void) -> c_int;
/// `MPI_Barrier`'s.
type Barrier = unsafe extern "C" fn(*mut c_void) -> c_int;

// The standard ABI's predefined handles (mpi_abi.h, MPI 5.0).
const MPI_COMM_WORLD: usize = 0x101;
const MPI_FLOAT: usize = 0x210;
const MPI_SUM: usize = 0x21;
const MPI_IN_PLACE: usize = 1;
const MPI_REQUEST_NULL: usize = 0x180;

const SIZES: [usize; 11] = [8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20];

/// Calls per round: about 32 MiB reduced per round, at least 4 calls and at most 2,000.
fn calls(bytes: usize) -> usize {
    ((32 << 20) / bytes).clamp(4, 2_000)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::var("GPUPORT_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let rt = Runtime::discover();
    let world = match Communicator::world() {
        Ok(world) => world,
        Err(e) => {
            // `cargo bench` without a launcher: nothing to measure.
            println!("allreduce: skipped ({e}); run `cargo xtask bench --collectives`");
            return Ok(());
        }
    };
    let host = rt.device("host")?;
    // The library gpuport loaded, opened again for the direct calls (the same handle).
    // SAFETY: an MPI library gpuport has already loaded and initialised.
    let lib = unsafe { libloading::Library::new(world.engine_library()) }?;
    // SAFETY: the standard C signatures of the four functions.
    let (allreduce, iallreduce, test, barrier) = unsafe {
        (
            *lib.get::<AllreduceC>(b"MPI_Allreduce_c\0")?,
            *lib.get::<IallreduceC>(b"MPI_Iallreduce_c\0")?,
            *lib.get::<Test>(b"MPI_Test\0")?,
            *lib.get::<Barrier>(b"MPI_Barrier\0")?,
        )
    };
    let comm = MPI_COMM_WORLD as *mut c_void;
    let local: usize = std::env::var("MPI_LOCALNRANKS").ok().and_then(|n| n.parse().ok()).unwrap_or(world.size());
    let oversubscribed = local > std::thread::available_parallelism().map_or(1, |n| n.get());
    let sync = || {
        // SAFETY: the world communicator.
        assert_eq!(unsafe { barrier(comm) }, 0, "MPI_Barrier failed");
    };
    if world.rank() == 0 {
        println!("# {} ranks, {}, {rounds} rounds", world.size(), world.engine_version());
    }
    for bytes in SIZES {
        let count = bytes / 4;
        let n = calls(bytes);
        let x = Array::from_slice(&host, &vec![0.0f32; count], &[count])?;
        // The direct calls reduce the same memory: where the pages lie (huge pages or not)
        // moves a 64 MiB reduction, bound by memory, by more than the call path does.
        let direct_buf = x.buffer().host_ptr(x.byte_offset(), bytes)?;
        // One untimed call each: first-touch of the buffers and MPI's connection set-up.
        world.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
        let (mut direct, mut nonblocking, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            sync();
            let start = Instant::now();
            for _ in 0..n {
                // SAFETY: `direct_buf` holds `count` floats (`x`'s, alive, and every collective
                // queued on it waited for), reduced in place on the world.
                let code = unsafe {
                    allreduce(
                        MPI_IN_PLACE as *const c_void,
                        direct_buf.cast(),
                        count as i64,
                        MPI_FLOAT as *mut c_void,
                        MPI_SUM as *mut c_void,
                        comm,
                    )
                };
                assert_eq!(code, 0, "MPI_Allreduce_c failed");
            }
            let d = start.elapsed().as_nanos() as f64 / n as f64;
            // The engine's nonblocking path, as gpuport drives it, on this thread.
            sync();
            let start = Instant::now();
            for _ in 0..n {
                let mut request = MPI_REQUEST_NULL as *mut c_void;
                let mut done: c_int = 0;
                // SAFETY: as above, with a request to fill; it is tested until complete.
                let code = unsafe {
                    iallreduce(
                        MPI_IN_PLACE as *const c_void,
                        direct_buf.cast(),
                        count as i64,
                        MPI_FLOAT as *mut c_void,
                        MPI_SUM as *mut c_void,
                        comm,
                        &mut request,
                    )
                };
                assert_eq!(code, 0, "MPI_Iallreduce_c failed");
                let since = Instant::now();
                while done == 0 {
                    // SAFETY: a live request, a valid flag, MPI_STATUS_IGNORE.
                    assert_eq!(unsafe { test(&mut request, &mut done, std::ptr::null_mut()) }, 0, "MPI_Test failed");
                    // As gpuport paces its tests: the CPU is yielded after 50 µs, or at once
                    // where this machine runs more ranks than it has CPUs.
                    if oversubscribed || since.elapsed() > Duration::from_micros(50) {
                        std::thread::yield_now();
                    }
                }
            }
            nonblocking.push(start.elapsed().as_nanos() as f64 / n as f64);
            sync();
            let start = Instant::now();
            for _ in 0..n {
                world.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
            }
            let g = start.elapsed().as_nanos() as f64 / n as f64;
            direct.push(d);
            ours.push(g);
            ratios.push(g / d);
        }
        if world.rank() == 0 {
            println!(
                "allreduce ranks={} bytes={bytes} direct_ns={:.0} nonblocking_ns={:.0} gpuport_ns={:.0} ratio={:.3}",
                world.size(),
                median(direct),
                median(nonblocking),
                median(ours),
                median(ratios)
            );
        }
    }
    Ok(())
}
