//! NCCL's (RCCL's) `all_reduce` through gpuport beside the same engine called directly,
//! one rank per process and GPU, under `mpiexec -n N` — the GPU bundle runs it with one
//! process per GPU, beside PyTorch's `torch.distributed` (NCCL backend) run the same way by
//! its `nccl_peer.py`; `cargo xtask bench-nccl-table` puts the logs side by side.
//!
//! The direct figure is `ncclAllReduce` on a communicator this program makes with the
//! engine's own calls (the unique id sent with `MPI_Bcast`), on the same stream and memory;
//! gpuport's is `Communicator::all_reduce` on the communicator `for_device` made, each
//! `Work` dropped at once (the watchdog follows it) — as a training loop queues its
//! reductions. Each size (8 B to 1 GiB of `f32`, summed in place; `GPUPORT_BENCH_MAX_BYTES`
//! caps it) is measured in rounds of back-to-back calls between two barriers, the stream
//! synchronized at the end of each; rank 0 prints one line per size: the medians of each
//! one's time per call and of the rounds' ratios, and the bus bandwidth of each (NCCL's
//! convention: the bytes per second times 2(n − 1)/n; on one rank, the bytes per second).
//! It asserts nothing.

use std::ffi::{c_int, c_void};
use std::time::Instant;

use gpuport_collective::{Communicator, ReduceOp};
use gpuport_core::{BackendKind, DType, StreamFlags};
use gpuport_runtime::{Array, Runtime};

/// `ncclUniqueId`.
#[repr(C)]
#[derive(Clone, Copy)]
struct UniqueId {
    internal: [u8; 128],
}

type GetUniqueId = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type CommInitRank = unsafe extern "C" fn(*mut *mut c_void, c_int, UniqueId, c_int) -> c_int;
type AllReduce =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, *mut c_void, *mut c_void) -> c_int;
type CommDestroy = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Bcast` and `MPI_Barrier` of the standard ABI.
type Bcast = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, c_int, *mut c_void) -> c_int;
type Barrier = unsafe extern "C" fn(*mut c_void) -> c_int;

// The standard ABI's predefined handles (mpi_abi.h, MPI 5.0), NCCL's enumerations.
const MPI_COMM_WORLD: usize = 0x101;
const MPI_UINT8_T: usize = 0x241;
const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

const SIZES: [usize; 10] = [8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 1 << 30];

/// Calls per round: about 256 MiB reduced per round, at least 4 calls and at most 1,000.
fn calls(bytes: usize) -> usize {
    ((256 << 20) / bytes).clamp(4, 1_000)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// NCCL's bus bandwidth in GB/s for `bytes` reduced in `ns` over `ranks`.
fn bus_gbs(bytes: usize, ns: f64, ranks: usize) -> f64 {
    let factor = if ranks > 1 { 2.0 * (ranks - 1) as f64 / ranks as f64 } else { 1.0 };
    bytes as f64 / ns * factor
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::var("GPUPORT_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let max_bytes: usize =
        std::env::var("GPUPORT_BENCH_MAX_BYTES").ok().and_then(|r| r.parse().ok()).unwrap_or(usize::MAX);
    let world = match Communicator::world() {
        Ok(world) => world,
        Err(e) => {
            println!("nccl_allreduce: skipped ({e}); run it under mpiexec, one process per GPU");
            return Ok(());
        }
    };
    let rt = Runtime::discover();
    let gpus: Vec<_> = [BackendKind::Cuda, BackendKind::Rocm]
        .into_iter()
        .map(|kind| rt.devices().into_iter().filter(|d| d.id().kind == kind).collect::<Vec<_>>())
        .find(|found| !found.is_empty())
        .unwrap_or_default();
    if gpus.is_empty() {
        println!("nccl_allreduce: skipped (no CUDA or ROCm device)");
        return Ok(());
    }
    let (rank, ranks) = (world.rank(), world.size());
    let local: usize = std::env::var("MPI_LOCALRANKID").ok().and_then(|n| n.parse().ok()).unwrap_or(rank);
    let device = gpus[local % gpus.len()].clone();
    let comm = world.for_device(&device)?;
    let stream = device.create_stream(StreamFlags::NON_BLOCKING, 0)?;

    // The same engine and MPI, opened again for the direct calls (the same handles).
    // SAFETY: libraries gpuport has already loaded and initialised.
    let (nccl, mpi) = unsafe {
        (libloading::Library::new(comm.engine_library())?, libloading::Library::new(world.engine_library())?)
    };
    // SAFETY: each symbol's C signature, as the engine's and MPI's headers declare it.
    let (get_id, init_rank, all_reduce, destroy, bcast, barrier) = unsafe {
        (
            *nccl.get::<GetUniqueId>(b"ncclGetUniqueId\0")?,
            *nccl.get::<CommInitRank>(b"ncclCommInitRank\0")?,
            *nccl.get::<AllReduce>(b"ncclAllReduce\0")?,
            *nccl.get::<CommDestroy>(b"ncclCommDestroy\0")?,
            *mpi.get::<Bcast>(b"MPI_Bcast\0")?,
            *mpi.get::<Barrier>(b"MPI_Barrier\0")?,
        )
    };
    let world_handle = MPI_COMM_WORLD as *mut c_void;
    let sync = || {
        // SAFETY: the world communicator.
        assert_eq!(unsafe { barrier(world_handle) }, 0, "MPI_Barrier failed");
    };
    let mut id = UniqueId { internal: [0; 128] };
    if rank == 0 {
        // SAFETY: a writable id.
        assert_eq!(unsafe { get_id(&mut id) }, 0, "ncclGetUniqueId failed");
    }
    // SAFETY: 128 bytes of the id, the world communicator.
    let sent = unsafe { bcast(id.internal.as_mut_ptr().cast(), 128, MPI_UINT8_T as *mut c_void, 0, world_handle) };
    assert_eq!(sent, 0, "MPI_Bcast failed");
    let mut direct_comm: *mut c_void = std::ptr::null_mut();
    // NCCL takes the rank's device from the calling thread.
    device.make_current()?;
    // SAFETY: a writable handle, the id every rank was given, this rank of `ranks`.
    let made = unsafe { init_rank(&mut direct_comm, ranks as c_int, id, rank as c_int) };
    assert_eq!(made, 0, "ncclCommInitRank failed");

    if rank == 0 {
        println!(
            "# {ranks} ranks, {} at {}, {rounds} rounds, {}",
            comm.engine_version(),
            comm.engine_library(),
            device.id()
        );
    }
    for bytes in SIZES.into_iter().filter(|&b| b <= max_bytes) {
        let count = bytes / 4;
        let n = calls(bytes);
        let x = Array::zeros(&device, &[count], DType::F32)?;
        x.synchronize()?;
        let ptr = x.data_addr() as *mut c_void;
        let direct = || {
            for _ in 0..n {
                // SAFETY: `x` holds `count` floats of the rank's device, alive, reduced in
                // place on the rank's stream; the communicator is live.
                let code = unsafe {
                    all_reduce(ptr, ptr, count, NCCL_FLOAT32, NCCL_SUM, direct_comm, stream.raw_handle() as *mut c_void)
                };
                assert_eq!(code, 0, "ncclAllReduce failed");
            }
        };
        let ours = || -> gpuport_core::Result<()> {
            for _ in 0..n {
                // Not waited for: the round synchronizes the stream, and the size's last
                // collective is waited for below (a failure aborts the communicator, which
                // every later call reports).
                let _queued = comm.all_reduce(&x, ReduceOp::Sum, None, Some(&stream))?;
            }
            Ok(())
        };
        // One untimed round each: connection set-up, first touch.
        direct();
        ours()?;
        stream.synchronize()?;
        let (mut d_ns, mut g_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            sync();
            let start = Instant::now();
            direct();
            stream.synchronize()?;
            let d = start.elapsed().as_nanos() as f64 / n as f64;
            sync();
            let start = Instant::now();
            ours()?;
            stream.synchronize()?;
            let g = start.elapsed().as_nanos() as f64 / n as f64;
            d_ns.push(d);
            g_ns.push(g);
            ratios.push(g / d);
        }
        comm.all_reduce(&x, ReduceOp::Sum, None, Some(&stream))?.wait()?;
        if rank == 0 {
            let (d, g) = (median(d_ns), median(g_ns));
            println!(
                "nccl_allreduce ranks={ranks} bytes={bytes} direct_ns={d:.0} gpuport_ns={g:.0} ratio={:.3} \
                 direct_busbw_gbs={:.2} gpuport_busbw_gbs={:.2}",
                median(ratios),
                bus_gbs(bytes, d, ranks),
                bus_gbs(bytes, g, ranks)
            );
        }
    }
    // SAFETY: no work of the direct communicator is in flight (the stream was synchronized).
    assert_eq!(unsafe { destroy(direct_comm) }, 0, "ncclCommDestroy failed");
    Ok(())
}
