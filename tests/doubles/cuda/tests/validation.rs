//! The validation layer catches each misuse it promises to, and stays silent for correct
//! use: the CUDA double's C functions called directly, one misuse at a time, counting the
//! reports. One test: the double is one machine per process.

#![allow(non_snake_case)]

use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use gpuport_cuda_double::status::*;
use gpuport_cuda_double::*;
use gpuport_double_sim::report;

/// Runs `f` and returns how many reports it made.
fn reports(f: impl FnOnce()) -> usize {
    let before = report::count();
    f();
    report::count() - before
}

fn ok(status: CUresult) {
    assert_eq!(status, CUDA_SUCCESS, "{}", status::name(status).map_or("?".into(), |(n, _)| n.to_string_lossy()));
}

#[test]
fn every_misuse_is_reported_and_correct_use_is_not() {
    // SAFETY: every call's arguments are valid pointers to locals, handles the double gave
    // out, or deliberately bad values the double must refuse without touching them.
    unsafe {
        ok(cuInit(0));
        let mut count = 0;
        ok(cuDeviceGetCount(&mut count));
        assert_eq!(count, 2, "two devices by default");

        // A call that needs a context, without one.
        let mut p: CUdeviceptr = 0;
        assert_eq!(reports(|| assert_eq!(cuMemAlloc_v2(&mut p, 64), CUDA_ERROR_INVALID_CONTEXT)), 1);

        let mut ctx: Handle = null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ok(cuCtxSetCurrent(ctx));
        let mut a: CUdeviceptr = 0;
        let mut b: CUdeviceptr = 0;
        ok(cuMemAlloc_v2(&mut a, 4096));
        ok(cuMemAlloc_v2(&mut b, 4096));
        let (mut s1, mut s2): (Handle, Handle) = (null_mut(), null_mut());
        ok(cuStreamCreateWithPriority(&mut s1, 1, 0));
        ok(cuStreamCreateWithPriority(&mut s2, 1, 0));

        // Correct use: ordered by an event, then by a synchronize.
        let mut ev: Handle = null_mut();
        ok(cuEventCreate(&mut ev, 2));
        let quiet = reports(|| {
            ok(cuMemsetD8Async(a, 1, 4096, s1));
            ok(cuEventRecord(ev, s1));
            ok(cuStreamWaitEvent(s2, ev, 0));
            ok(cuMemcpyAsync(b, a, 4096, s2));
            ok(cuStreamSynchronize(s2));
            ok(cuMemsetD8Async(a, 2, 4096, s1));
            ok(cuStreamSynchronize(s1));
        });
        assert_eq!(quiet, 0, "ordered work was reported");

        // The legacy stream orders itself with blocking streams: no report either.
        let mut blocking: Handle = null_mut();
        ok(cuStreamCreateWithPriority(&mut blocking, 0, 0));
        let quiet = reports(|| {
            ok(cuMemsetD8Async(a, 3, 4096, blocking));
            ok(cuMemsetD8Async(a, 4, 4096, STREAM_LEGACY as Handle));
            ok(cuMemsetD8Async(a, 5, 4096, blocking));
            ok(cuCtxSynchronize());
        });
        assert_eq!(quiet, 0, "legacy-stream ordering was reported");

        // Two non-blocking streams writing the same bytes with nothing between them.
        let hazard = reports(|| {
            ok(cuMemsetD8Async(a, 6, 4096, s1));
            ok(cuMemsetD8Async(a, 7, 16, s2));
            ok(cuCtxSynchronize());
        });
        assert_eq!(hazard, 1, "an unordered write-write overlap");
        // A read against a write, on other bytes of the same allocation: no overlap.
        let disjoint = reports(|| {
            ok(cuMemsetD8Async(a, 6, 64, s1));
            ok(cuMemcpyAsync(b, a + 64, 64, s2));
            ok(cuCtxSynchronize());
        });
        assert_eq!(disjoint, 0, "disjoint bytes are no hazard");

        // A destroyed stream leaves the clocks only once the host has seen its work
        // complete: before that its write is still unordered with another stream's...
        let mut gone: Handle = null_mut();
        ok(cuStreamCreateWithPriority(&mut gone, 1, 0));
        let unordered = reports(|| {
            ok(cuMemsetD8Async(a, 8, 4096, gone));
            ok(cuStreamDestroy_v2(gone));
            ok(cuMemsetD8Async(a, 9, 16, s2));
            ok(cuCtxSynchronize());
        });
        assert_eq!(unordered, 1, "a destroyed stream's write the host never waited for");
        // ...and after it, its recorded write counts as ordered before everything later.
        let mut synced: Handle = null_mut();
        ok(cuStreamCreateWithPriority(&mut synced, 1, 0));
        let quiet = reports(|| {
            ok(cuMemsetD8Async(b, 8, 4096, synced));
            ok(cuStreamSynchronize(synced));
            ok(cuStreamDestroy_v2(synced));
            ok(cuMemsetD8Async(b, 9, 4096, s2));
            ok(cuStreamSynchronize(s2));
        });
        assert_eq!(quiet, 0, "a write the host saw complete, on a stream destroyed since");

        // Ranges outside their allocation, and device addresses nobody allocated.
        assert_eq!(reports(|| assert_eq!(cuMemcpyAsync(b, a, 4097, s1), CUDA_ERROR_INVALID_VALUE)), 1);
        assert_eq!(reports(|| assert_eq!(cuMemsetD8Async(a + (1 << 20), 0, 8, s1), CUDA_ERROR_INVALID_VALUE)), 1);

        // 2D copies: rows land a pitch apart; a pitch below the width, a last row past the
        // allocation, and arrays (not unified addresses) are refused and reported.
        let rows =
            |dst: CUdeviceptr, dst_pitch: usize, src: CUdeviceptr, src_pitch: usize, width, height| CUDA_MEMCPY2D {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: MEMORYTYPE_UNIFIED,
                srcHost: std::ptr::null(),
                srcDevice: src,
                srcArray: null_mut(),
                srcPitch: src_pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: MEMORYTYPE_UNIFIED,
                dstHost: null_mut(),
                dstDevice: dst,
                dstArray: null_mut(),
                dstPitch: dst_pitch,
                WidthInBytes: width,
                Height: height,
            };
        let mut host = vec![0u8; 4096];
        let quiet = reports(|| {
            ok(cuMemsetD8Async(a, 0, 4096, s1));
            ok(cuMemsetD8Async(a + 100, 0xAB, 8, s1));
            ok(cuMemsetD8Async(a + 164, 0xCD, 8, s1));
            ok(cuMemcpy2DAsync_v2(&rows(b, 16, a + 100, 64, 8, 2), s1));
            ok(cuMemcpyAsync(host.as_mut_ptr() as CUdeviceptr, b, 32, s1));
            ok(cuStreamSynchronize(s1));
        });
        assert_eq!(quiet, 0, "a correct 2D copy was reported");
        assert_eq!(&host[..8], &[0xAB; 8]);
        assert_eq!(&host[16..24], &[0xCD; 8]);
        assert_eq!(
            reports(|| assert_eq!(cuMemcpy2DAsync_v2(&rows(b, 4, a, 8, 8, 2), s1), CUDA_ERROR_INVALID_VALUE)),
            1
        );
        let past = rows(b, 2048, a, 8, 8, 3);
        assert_eq!(reports(|| assert_eq!(cuMemcpy2DAsync_v2(&past, s1), CUDA_ERROR_INVALID_VALUE)), 1);
        let array = CUDA_MEMCPY2D { srcMemoryType: 3, ..rows(b, 8, a, 8, 8, 2) };
        assert_eq!(reports(|| assert_eq!(cuMemcpy2DAsync_v2(&array, s1), CUDA_ERROR_INVALID_VALUE)), 1);

        // Frees of unknown pointers, twice, and of an interior address.
        assert_eq!(reports(|| assert_eq!(cuMemFree_v2(a + 8), CUDA_ERROR_INVALID_VALUE)), 1);
        let mut c: CUdeviceptr = 0;
        ok(cuMemAlloc_v2(&mut c, 64));
        ok(cuMemFree_v2(c));
        assert_eq!(reports(|| assert_eq!(cuMemFree_v2(c), CUDA_ERROR_INVALID_VALUE)), 1);

        // Work queued after a stream-ordered free.
        let mut d: CUdeviceptr = 0;
        ok(cuMemAllocAsync(&mut d, 256, s1));
        ok(cuMemFreeAsync(d, s1));
        assert_eq!(reports(|| assert_eq!(cuMemsetD8Async(d, 0, 256, s1), CUDA_ERROR_INVALID_VALUE)), 1);
        ok(cuStreamSynchronize(s1));

        // Destroyed and foreign handles.
        let mut gone: Handle = null_mut();
        ok(cuStreamCreateWithPriority(&mut gone, 1, 0));
        ok(cuStreamDestroy_v2(gone));
        assert_eq!(reports(|| assert_eq!(cuStreamQuery(gone), CUDA_ERROR_INVALID_HANDLE)), 1);
        assert_eq!(reports(|| assert_eq!(cuStreamQuery(0x1234_5670 as Handle), CUDA_ERROR_INVALID_HANDLE)), 1);
        assert_eq!(reports(|| assert_eq!(cuEventQuery(s1), CUDA_ERROR_INVALID_HANDLE)), 1, "a stream as an event");

        // A driver call from inside a host function.
        static STATUS: AtomicU32 = AtomicU32::new(u32::MAX);
        // Cannot panic (an atomic store, and a call that runs inside `catch_unwind`).
        unsafe extern "C" fn calls_the_driver(stream: *mut c_void) {
            // SAFETY: a stream handle of the double (refused from here).
            STATUS.store(unsafe { cuStreamQuery(stream) }, Ordering::SeqCst);
        }
        let inside = reports(|| {
            ok(cuLaunchHostFunc(s2, Some(calls_the_driver), s2));
            ok(cuStreamSynchronize(s2));
        });
        assert_eq!(inside, 1);
        assert_eq!(STATUS.load(Ordering::SeqCst), CUDA_ERROR_NOT_PERMITTED);

        // The old ABI entry points are refused.
        assert_eq!(reports(|| assert_eq!(cuMemAlloc(), CUDA_ERROR_NOT_SUPPORTED)), 1);

        // The last release of a context that still holds objects reports them as leaked.
        let mut ctx1: Handle = null_mut();
        ok(cuDevicePrimaryCtxRetain(&mut ctx1, 1));
        ok(cuCtxSetCurrent(ctx1));
        let mut left: Handle = null_mut();
        ok(cuStreamCreateWithPriority(&mut left, 1, 0));
        assert_eq!(reports(|| ok(cuDevicePrimaryCtxRelease_v2(1))), 1);
        assert_eq!(reports(|| assert_eq!(cuStreamQuery(left), CUDA_ERROR_INVALID_HANDLE)), 1, "destroyed with it");

        // Device memory is not host memory: the host cannot read it (its pages are
        // PROT_NONE), while pinned memory is ordinary host memory.
        ok(cuCtxSetCurrent(ctx));
        let mut h: *mut c_void = null_mut();
        ok(cuMemHostAlloc(&mut h, 64, 0));
        ok(cuMemsetD8Async(h as CUdeviceptr, 9, 64, s1));
        ok(cuStreamSynchronize(s1));
        assert_eq!(*(h as *const u8).add(63), 9);
        // The protection of the page, read from /proc/self/maps (reading the page itself
        // would fault, which is the point).
        let page = (a as usize) & !4095;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                let range = l.split_whitespace().next().unwrap_or("");
                let (lo, hi) = range.split_once('-').unwrap_or(("0", "0"));
                let (lo, hi) = (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap());
                lo <= page && page < hi
            })
            .expect("device memory lies in a mapping");
        assert!(line.split_whitespace().nth(1).unwrap().starts_with("---"), "device memory is readable: {line}");

        // Error names as the driver gives them.
        let mut name = std::ptr::null();
        ok(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &mut name));
        assert_eq!(CStr::from_ptr(name).to_str().unwrap(), "CUDA_ERROR_ILLEGAL_ADDRESS");

        // Clean up, so the exit check has nothing to say.
        ok(cuMemFreeHost(h));
        for s in [s1, s2, blocking] {
            ok(cuStreamDestroy_v2(s));
        }
        ok(cuEventDestroy_v2(ev));
        ok(cuMemFree_v2(a));
        ok(cuMemFree_v2(b));
        ok(cuDevicePrimaryCtxRelease_v2(0));
    }
}
