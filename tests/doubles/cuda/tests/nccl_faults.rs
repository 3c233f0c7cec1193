//! Faults injected into the engine's calls (`GPUPORT_DOUBLE_FAULTS` with NCCL's names): a
//! remote error that fails a collective on every rank when it runs, a call that fails at
//! once, and a rank lost mid-collective, whose peer waits until its communicator is
//! aborted. One test: the faults are read once per process.

#![allow(non_snake_case)]

use std::ffi::c_int;
use std::ptr::null_mut;

use gpuport_cuda_double::status::*;
use gpuport_cuda_double::*;
use gpuport_double_sim::config::FAULTS_ENV;
use gpuport_double_sim::nccl::status as nccl;
use gpuport_double_sim::report;

fn ok(status: CUresult) {
    assert_eq!(status, CUDA_SUCCESS);
}

/// Device `d` current; a stream and a 16-byte buffer holding `value` on it.
fn side(d: c_int, value: f32) -> (Handle, CUdeviceptr) {
    let (mut ctx, mut stream, mut buf): (Handle, Handle, CUdeviceptr) = (null_mut(), null_mut(), 0);
    let values = [value; 4];
    // SAFETY: local out-pointers; the copy's host side is `values`, whole, and completes
    // before the block ends.
    unsafe {
        ok(cuDevicePrimaryCtxRetain(&mut ctx, d));
        ok(cuCtxSetCurrent(ctx));
        ok(cuStreamCreateWithPriority(&mut stream, 1, 0));
        ok(cuMemAlloc_v2(&mut buf, 16));
        ok(cuMemcpyAsync(buf, values.as_ptr() as CUdeviceptr, 16, stream));
        ok(cuStreamSynchronize(stream));
    }
    (stream, buf)
}

fn read(stream: Handle, buf: CUdeviceptr) -> f32 {
    let mut out = [0f32; 4];
    // SAFETY: the host side is `out`, whole; the copy completes before this returns.
    unsafe {
        ok(cuStreamSynchronize(stream));
        ok(cuMemcpyAsync(out.as_mut_ptr() as CUdeviceptr, buf, 16, stream));
        ok(cuStreamSynchronize(stream));
    }
    out[0]
}

fn async_error(comm: u64) -> c_int {
    let mut e = -1;
    // SAFETY: a local out-pointer.
    assert_eq!(unsafe { ncclCommGetAsyncError(comm, &mut e) }, nccl::SUCCESS);
    e
}

#[test]
fn injected_faults_fail_collectives_as_nccl_would() {
    // Set before the first call reads them; the driver's own parse skips NCCL's names.
    std::env::set_var(FAULTS_ENV, "ncclAllReduce:2=ncclRemoteError,ncclReduce:1=INVALID_ARGUMENT,ncclBroadcast:1=LOST");
    let before = report::count();
    // SAFETY: every call's arguments are locals, handles and device addresses the double
    // gave out.
    unsafe {
        ok(cuInit(0));
        let (s0, b0) = side(0, 1.0);
        let (s1, b1) = side(1, 2.0);
        let mut comms = [0u64; 2];
        assert_eq!(ncclCommInitAll(comms.as_mut_ptr(), 2, std::ptr::null()), nccl::SUCCESS);

        // The second all-reduce call (rank 1's) carries a remote error: both ranks' parts
        // fail when they meet, nothing moves, each communicator says so.
        assert_eq!(ncclGroupStart(), nccl::SUCCESS);
        assert_eq!(ncclAllReduce(b0, b0, 4, 7, 0, comms[0], s0), nccl::SUCCESS);
        assert_eq!(ncclAllReduce(b1, b1, 4, 7, 0, comms[1], s1), nccl::SUCCESS);
        assert_eq!(ncclGroupEnd(), nccl::SUCCESS);
        assert_eq!((read(s0, b0), read(s1, b1)), (1.0, 2.0), "nothing moved");
        assert_eq!((async_error(comms[0]), async_error(comms[1])), (nccl::REMOTE_ERROR, nccl::REMOTE_ERROR));

        // A call's own failure: returned at once, nothing queued.
        assert_eq!(ncclReduce(b0, b0, 4, 7, 0, 0, comms[0], s0), nccl::INVALID_ARGUMENT);

        // Rank 0 lost in a broadcast: rank 1 waits for it until its communicator is aborted
        // (what gpuport's watchdog does), which releases its stream.
        assert_eq!(ncclGroupStart(), nccl::SUCCESS);
        assert_eq!(ncclBroadcast(b0, b0, 4, 7, 0, comms[0], s0), nccl::SUCCESS);
        assert_eq!(ncclBroadcast(b1, b1, 4, 7, 0, comms[1], s1), nccl::SUCCESS);
        assert_eq!(ncclGroupEnd(), nccl::SUCCESS);
        assert_eq!(ncclCommAbort(comms[1]), nccl::SUCCESS);
        assert_eq!(read(s1, b1), 2.0, "the waiting rank was released, nothing moved");
        assert_eq!(ncclCommDestroy(comms[0]), nccl::SUCCESS);
        for (d, (s, b)) in [(s0, b0), (s1, b1)].into_iter().enumerate() {
            let mut ctx: Handle = null_mut();
            ok(cuDevicePrimaryCtxRetain(&mut ctx, d as c_int));
            ok(cuCtxSetCurrent(ctx));
            ok(cuMemFree_v2(b));
            ok(cuStreamDestroy_v2(s));
        }
    }
    assert_eq!(report::count(), before, "injected faults are not misuse: nothing reported");
}
