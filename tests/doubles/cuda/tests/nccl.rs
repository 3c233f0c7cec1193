//! NCCL's C API over the CUDA double, called directly: communicators for both simulated
//! devices (all at once, and one rank per thread from a unique id), every collective on
//! device memory in stream order, and each misuse the double promises to report — ranks
//! that disagree, one thread driving two ranks outside a group, a buffer of the other
//! device, a rank that never arrives — with the communicator's asynchronous error, an
//! abort that releases a waiting rank, point-to-point messages, splits, and a non-blocking
//! communicator (in progress while ranks join, and on its first launch). One test: the
//! double is one machine per process.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;

use gpuport_cuda_double::status::*;
use gpuport_cuda_double::*;
use gpuport_double_sim::nccl::{status as nccl, UniqueId, LIMIT_ENV, VERSION_CODE};
use gpuport_double_sim::report;

fn ok(status: CUresult) {
    assert_eq!(status, CUDA_SUCCESS);
}

fn nccl_ok(status: c_int) {
    // SAFETY: the double's error strings are static and NUL-terminated.
    let last = unsafe { CStr::from_ptr(ncclGetLastError(0)) }.to_string_lossy().into_owned();
    assert_eq!(status, nccl::SUCCESS, "{last}");
}

/// Runs `f` and returns how many reports it made.
fn reports(f: impl FnOnce()) -> usize {
    let before = report::count();
    f();
    report::count() - before
}

/// Device `d`'s primary context, made current.
fn on(d: c_int) {
    let mut ctx: Handle = null_mut();
    // SAFETY: a local out-pointer.
    ok(unsafe { cuDevicePrimaryCtxRetain(&mut ctx, d) });
    // SAFETY: a context the double gave out.
    ok(unsafe { cuCtxSetCurrent(ctx) });
}

/// Per device: a stream and two 64-byte buffers, on that device.
struct Side {
    stream: Handle,
    a: CUdeviceptr,
    b: CUdeviceptr,
}

fn side(d: c_int) -> Side {
    on(d);
    let mut s = Side { stream: null_mut(), a: 0, b: 0 };
    // SAFETY: local out-pointers.
    unsafe {
        ok(cuStreamCreateWithPriority(&mut s.stream, 1, 0));
        ok(cuMemAlloc_v2(&mut s.a, 64));
        ok(cuMemAlloc_v2(&mut s.b, 64));
    }
    s
}

/// Writes `values` at `dst` (device memory of `s`'s device) and waits.
fn put(s: &Side, dst: CUdeviceptr, values: &[f32]) {
    // SAFETY: the host side is `values`, whole; the copy completes before this returns.
    unsafe {
        ok(cuMemcpyAsync(dst, values.as_ptr() as CUdeviceptr, std::mem::size_of_val(values), s.stream));
        ok(cuStreamSynchronize(s.stream));
    }
}

/// `n` floats read from `src` after `s`'s work.
fn get(s: &Side, src: CUdeviceptr, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    // SAFETY: the host side is `out`, whole; the copy completes before this returns.
    unsafe {
        ok(cuStreamSynchronize(s.stream));
        ok(cuMemcpyAsync(out.as_mut_ptr() as CUdeviceptr, src, n * 4, s.stream));
        ok(cuStreamSynchronize(s.stream));
    }
    out
}

const FLOAT32: c_int = 7;
const SUM: c_int = 0;
const MAX: c_int = 2;

fn async_error(comm: u64) -> c_int {
    let mut e = -1;
    // SAFETY: a live communicator and a local out-pointer.
    nccl_ok(unsafe { ncclCommGetAsyncError(comm, &mut e) });
    e
}

#[test]
fn collectives_run_in_stream_order_and_every_misuse_is_reported() {
    // SAFETY: every call's arguments are locals, handles and device addresses the double
    // gave out, or deliberately wrong ones the double must refuse without touching them.
    unsafe {
        ok(cuInit(0));
        let mut version = 0;
        nccl_ok(ncclGetVersion(&mut version));
        assert_eq!(version, VERSION_CODE);
        let sides = [side(0), side(1)];

        // Communicators for both devices at once.
        let mut comms = [0u64; 2];
        nccl_ok(ncclCommInitAll(comms.as_mut_ptr(), 2, std::ptr::null()));
        for (rank, &c) in comms.iter().enumerate() {
            let (mut n, mut d, mut r) = (0, 0, 0);
            nccl_ok(ncclCommCount(c, &mut n));
            nccl_ok(ncclCommCuDevice(c, &mut d));
            nccl_ok(ncclCommUserRank(c, &mut r));
            assert_eq!((n, d, r), (2, rank as c_int, rank as c_int));
        }

        // Every collective, grouped as one thread driving both devices must: no report.
        let quiet = reports(|| {
            put(&sides[0], sides[0].a, &[1.0, 2.0, 3.0, 4.0]);
            put(&sides[1], sides[1].a, &[10.0, 20.0, 30.0, 40.0]);
            let each = |f: &dyn Fn(usize, &Side) -> c_int| {
                nccl_ok(ncclGroupStart());
                for (r, s) in sides.iter().enumerate() {
                    nccl_ok(f(r, s));
                }
                nccl_ok(ncclGroupEnd());
            };
            each(&|r, s| ncclAllReduce(s.a, s.b, 4, FLOAT32, SUM, comms[r], s.stream));
            for s in &sides {
                assert_eq!(get(s, s.b, 4), [11.0, 22.0, 33.0, 44.0]);
            }
            each(&|r, s| ncclBroadcast(s.a, s.b, 2, FLOAT32, 1, comms[r], s.stream));
            for s in &sides {
                assert_eq!(get(s, s.b, 2), [10.0, 20.0]);
            }
            each(&|r, s| ncclAllGather(s.a, s.b, 2, FLOAT32, comms[r], s.stream));
            for s in &sides {
                assert_eq!(get(s, s.b, 4), [1.0, 2.0, 10.0, 20.0]);
            }
            each(&|r, s| ncclReduceScatter(s.a, s.b, 2, FLOAT32, MAX, comms[r], s.stream));
            assert_eq!(
                (get(&sides[0], sides[0].b, 2), get(&sides[1], sides[1].b, 2)),
                (vec![10.0, 20.0], vec![30.0, 40.0])
            );
            each(&|r, s| ncclAlltoAll(s.a, s.b, 2, FLOAT32, comms[r], s.stream));
            assert_eq!(
                (get(&sides[0], sides[0].b, 4), get(&sides[1], sides[1].b, 4)),
                (vec![1.0, 2.0, 10.0, 20.0], vec![3.0, 4.0, 30.0, 40.0])
            );
            // In place, on the legacy stream of each communicator's device.
            each(&|r, s| ncclReduce(s.a, s.a, 4, FLOAT32, SUM, 0, comms[r], null_mut::<c_void>()));
            on(0);
            ok(cuCtxSynchronize());
            assert_eq!(get(&sides[0], sides[0].a, 4), [11.0, 22.0, 33.0, 44.0]);
        });
        assert_eq!(quiet, 0, "correct use was reported");
        assert_eq!((async_error(comms[0]), async_error(comms[1])), (nccl::SUCCESS, nccl::SUCCESS));

        // Ranks that disagree on the count: reported once, both fail, nothing moves.
        put(&sides[0], sides[0].b, &[7.0; 4]);
        let mismatch = reports(|| {
            nccl_ok(ncclGroupStart());
            nccl_ok(ncclAllReduce(sides[0].a, sides[0].b, 4, FLOAT32, SUM, comms[0], sides[0].stream));
            nccl_ok(ncclAllReduce(sides[1].a, sides[1].b, 2, FLOAT32, SUM, comms[1], sides[1].stream));
            nccl_ok(ncclGroupEnd());
            let _ = get(&sides[0], sides[0].b, 1);
            let _ = get(&sides[1], sides[1].b, 1);
        });
        assert_eq!(mismatch, 1);
        assert_eq!((async_error(comms[0]), async_error(comms[1])), (nccl::REMOTE_ERROR, nccl::REMOTE_ERROR));
        let last = CStr::from_ptr(ncclGetLastError(comms[1])).to_string_lossy().into_owned();
        assert!(last.contains("disagree"), "{last}");
        assert_eq!(get(&sides[0], sides[0].b, 4), [7.0; 4], "nothing moved");
        // A buffer of the other device: refused and reported at the call.
        assert_eq!(
            reports(|| assert_eq!(
                ncclAllReduce(sides[1].a, sides[0].b, 4, FLOAT32, SUM, comms[0], sides[0].stream),
                nccl::UNHANDLED_CUDA_ERROR
            )),
            1
        );
        // An unknown data type and a made-up communicator: refused and reported.
        assert_eq!(
            reports(|| assert_eq!(
                ncclAllReduce(sides[0].a, sides[0].b, 4, 99, SUM, comms[0], sides[0].stream),
                nccl::INVALID_ARGUMENT
            )),
            1
        );
        assert_eq!(reports(|| assert_eq!(ncclCommDestroy(0x1234), nccl::INVALID_ARGUMENT)), 1);
        for c in comms {
            nccl_ok(ncclCommDestroy(c));
        }

        // One rank per thread, from a unique id: no group needed, none reported.
        let mut id = UniqueId { internal: [0; 128] };
        nccl_ok(ncclGetUniqueId(&mut id));
        let (s0, s1) = (&sides[0], &sides[1]);
        let threaded = reports(|| {
            std::thread::scope(|scope| {
                // Handles cross threads as numbers.
                for (d, a, b, stream) in [(0, s0.a, s0.b, s0.stream as usize), (1, s1.a, s1.b, s1.stream as usize)] {
                    scope.spawn(move || {
                        let s = &Side { stream: stream as Handle, a, b };
                        on(d);
                        let mut comm = 0;
                        nccl_ok(ncclCommInitRank(&mut comm, 2, id, d));
                        nccl_ok(ncclAllReduce(s.a, s.b, 1, FLOAT32, SUM, comm, s.stream));
                        let _ = get(s, s.b, 1);
                        nccl_ok(ncclCommDestroy(comm));
                    });
                }
            })
        });
        assert_eq!(threaded, 0);

        // One thread driving both ranks outside a group: reported (NCCL deadlocks there);
        // the double still completes the collective.
        let mut pair = [0u64; 2];
        nccl_ok(ncclCommInitAll(pair.as_mut_ptr(), 2, std::ptr::null()));
        let ungrouped = reports(|| {
            nccl_ok(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, pair[0], s0.stream));
            nccl_ok(ncclAllReduce(s1.a, s1.b, 1, FLOAT32, SUM, pair[1], s1.stream));
            let _ = get(s0, s0.b, 1);
        });
        assert_eq!(ungrouped, 1);
        pair.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));

        // A rank that never arrives: reported after the double's limit, the waiting rank's
        // collective failed.
        std::env::set_var(LIMIT_ENV, "0.2");
        nccl_ok(ncclCommInitAll(pair.as_mut_ptr(), 2, std::ptr::null()));
        let lonely = reports(|| {
            nccl_ok(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, pair[0], s0.stream));
            let _ = get(s0, s0.b, 1);
        });
        assert_eq!(lonely, 1);
        assert_eq!(async_error(pair[0]), nccl::REMOTE_ERROR);
        pair.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));

        // An abort releases a rank waiting for one that never comes, without a report.
        std::env::set_var(LIMIT_ENV, "600");
        nccl_ok(ncclCommInitAll(pair.as_mut_ptr(), 2, std::ptr::null()));
        let aborted = reports(|| {
            nccl_ok(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, pair[0], s0.stream));
            nccl_ok(ncclCommAbort(pair[0]));
            let _ = get(s0, s0.b, 1);
        });
        assert_eq!(aborted, 0);
        nccl_ok(ncclCommDestroy(pair[1]));

        // Messages: both ranks send and receive from one thread in one group (NCCL fuses
        // them; queued one by one, each rank would wait for the other's receive behind its
        // own send), and a send and a receive from two threads outside any group.
        let mut pair = [0u64; 2];
        nccl_ok(ncclCommInitAll(pair.as_mut_ptr(), 2, std::ptr::null()));
        put(s0, s0.a, &[1.0, 2.0]);
        put(s1, s1.a, &[3.0, 4.0]);
        let quiet = reports(|| {
            nccl_ok(ncclGroupStart());
            for (r, s) in [s0, s1].into_iter().enumerate() {
                nccl_ok(ncclSend(s.a, 2, FLOAT32, 1 - r as c_int, pair[r], s.stream));
                nccl_ok(ncclRecv(s.b, 2, FLOAT32, 1 - r as c_int, pair[r], s.stream));
            }
            nccl_ok(ncclGroupEnd());
            assert_eq!((get(s0, s0.b, 2), get(s1, s1.b, 2)), (vec![3.0, 4.0], vec![1.0, 2.0]));
            let (a0, b1, st0, st1) = (s0.a, s1.b, s0.stream as usize, s1.stream as usize);
            let (c0, c1) = (pair[0], pair[1]);
            std::thread::scope(|scope| {
                scope.spawn(move || nccl_ok(ncclSend(a0, 2, FLOAT32, 1, c0, st0 as Handle)));
                scope.spawn(move || nccl_ok(ncclRecv(b1, 2, FLOAT32, 0, c1, st1 as Handle)));
            });
            assert_eq!(get(s1, s1.b, 2), [1.0, 2.0]);
        });
        assert_eq!(quiet, 0);
        // Sides that disagree on the count: reported, both fail.
        let mismatch = reports(|| {
            nccl_ok(ncclGroupStart());
            nccl_ok(ncclSend(s0.a, 2, FLOAT32, 1, pair[0], s0.stream));
            nccl_ok(ncclRecv(s1.b, 1, FLOAT32, 0, pair[1], s1.stream));
            nccl_ok(ncclGroupEnd());
            let _ = (get(s0, s0.b, 1), get(s1, s1.b, 1));
        });
        assert_eq!(mismatch, 1);
        assert_eq!((async_error(pair[0]), async_error(pair[1])), (nccl::REMOTE_ERROR, nccl::REMOTE_ERROR));
        pair.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));

        // Splits: one color, ranked by key; no color gives no communicator.
        let mut parent = [0u64; 2];
        nccl_ok(ncclCommInitAll(parent.as_mut_ptr(), 2, std::ptr::null()));
        let mut split = [0u64; 2];
        let quiet = reports(|| {
            nccl_ok(ncclGroupStart());
            nccl_ok(ncclCommSplit(parent[0], 7, 1, &mut split[0], std::ptr::null()));
            nccl_ok(ncclCommSplit(parent[1], 7, 0, &mut split[1], std::ptr::null()));
            nccl_ok(ncclGroupEnd());
        });
        assert_eq!(quiet, 0);
        let (mut r0, mut r1, mut n) = (-1, -1, 0);
        nccl_ok(ncclCommUserRank(split[0], &mut r0));
        nccl_ok(ncclCommUserRank(split[1], &mut r1));
        nccl_ok(ncclCommCount(split[0], &mut n));
        assert_eq!((r0, r1, n), (1, 0, 2), "ranked by key");
        split.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));
        nccl_ok(ncclGroupStart());
        nccl_ok(ncclCommSplit(parent[0], -1, 0, &mut split[0], std::ptr::null()));
        nccl_ok(ncclCommSplit(parent[1], 3, 0, &mut split[1], std::ptr::null()));
        nccl_ok(ncclGroupEnd());
        assert_eq!(split[0], 0, "no color: no communicator");
        nccl_ok(ncclCommCount(split[1], &mut n));
        assert_eq!(n, 1);
        put(s1, s1.a, &[5.0]);
        nccl_ok(ncclAllReduce(s1.a, s1.b, 1, FLOAT32, SUM, split[1], s1.stream));
        assert_eq!(get(s1, s1.b, 1), [5.0], "a communicator of one rank");
        nccl_ok(ncclCommDestroy(split[1]));
        parent.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));

        // A non-blocking communicator: in progress until every rank has joined, refused for
        // collectives until then; a config not made by NCCL's initializer is refused.
        let config = gpuport_double_sim::nccl::ConfigHead { size: 96, magic: 0xcafe_beef, version: 23203, blocking: 0 };
        let mut id = UniqueId { internal: [0; 128] };
        nccl_ok(ncclGetUniqueId(&mut id));
        let mut nb = [0u64; 2];
        on(0);
        assert_eq!(ncclCommInitRankConfig(&mut nb[0], 2, id, 0, &config), nccl::IN_PROGRESS);
        assert_eq!(async_error(nb[0]), nccl::IN_PROGRESS);
        assert_eq!(
            reports(|| assert_eq!(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, nb[0], s0.stream), nccl::INVALID_USAGE)),
            1
        );
        on(1);
        assert_eq!(ncclCommInitRankConfig(&mut nb[1], 2, id, 1, &config), nccl::SUCCESS);
        assert_eq!((async_error(nb[0]), async_error(nb[1])), (nccl::SUCCESS, nccl::SUCCESS));
        nccl_ok(ncclGroupStart());
        nccl_ok(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, nb[0], s0.stream));
        nccl_ok(ncclAllReduce(s1.a, s1.b, 1, FLOAT32, SUM, nb[1], s1.stream));
        nccl_ok(ncclGroupEnd());
        let _ = (get(s0, s0.b, 1), get(s1, s1.b, 1));
        nb.iter().for_each(|&c| nccl_ok(ncclCommDestroy(c)));
        // Its first launch outside a group answers ncclInProgress (NCCL connects to the
        // peers meanwhile): used again before ncclCommGetAsyncError says ncclSuccess, it is
        // refused and reported.
        let mut one = 0u64;
        nccl_ok(ncclGetUniqueId(&mut id));
        on(0);
        assert_eq!(ncclCommInitRankConfig(&mut one, 1, id, 0, &config), nccl::SUCCESS);
        assert_eq!(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, one, s0.stream), nccl::IN_PROGRESS);
        let early = || assert_eq!(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, one, s0.stream), nccl::INVALID_USAGE);
        assert_eq!(reports(early), 1);
        assert_eq!((async_error(one), async_error(one)), (nccl::IN_PROGRESS, nccl::SUCCESS));
        nccl_ok(ncclAllReduce(s0.a, s0.b, 1, FLOAT32, SUM, one, s0.stream));
        let _ = get(s0, s0.b, 1);
        nccl_ok(ncclCommDestroy(one));
        let bad = gpuport_double_sim::nccl::ConfigHead { magic: 0, ..config };
        let mut c = 0u64;
        assert_eq!(reports(|| assert_eq!(ncclCommInitRankConfig(&mut c, 1, id, 0, &bad), nccl::INVALID_ARGUMENT)), 1);

        for (d, s) in sides.iter().enumerate() {
            on(d as c_int);
            ok(cuMemFree_v2(s.a));
            ok(cuMemFree_v2(s.b));
            ok(cuStreamDestroy_v2(s.stream));
        }
    }
}
