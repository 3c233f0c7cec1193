//! The `result` layer of `stream.rs` (the layers mirror each other by name, on purpose):
//! streams and the work queued on them: one checked call each. Every function takes raw
//! handles, so each is `unsafe`: the caller keeps them (and the memory a copy touches)
//! alive for as long as the driver may use them.

use std::ffi::{c_int, c_uint, c_void};

use gpuport_core::Result;

use super::{check, check_ready};
use crate::sys::{Api, CUcontext, CUdeviceptr, CUevent, CUfunction, CUhostFn, CUstream, Memcpy2d};

/// `cuStreamCreateWithPriority` in the current context.
pub fn create_with_priority(api: &Api, flags: c_uint, priority: c_int) -> Result<CUstream> {
    let mut raw: CUstream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks flags and clamps the priority.
    check(api, unsafe { (api.cuStreamCreateWithPriority)(&mut raw, flags, priority) }, "cuStreamCreateWithPriority")?;
    Ok(raw)
}

/// `cuStreamDestroy` (queued work still completes).
///
/// # Safety
/// `stream` must be a stream created by gpuport, destroyed once.
pub unsafe fn destroy(api: &Api, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuStreamDestroy)(stream) }, "cuStreamDestroy")
}

/// `cuStreamSynchronize`.
///
/// # Safety
/// `stream` must be live (or a special handle: legacy, per-thread).
pub unsafe fn synchronize(api: &Api, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuStreamSynchronize)(stream) }, "cuStreamSynchronize")
}

/// `cuStreamQuery`: whether everything queued has completed.
///
/// # Safety
/// As for [`synchronize`].
pub unsafe fn query(api: &Api, stream: CUstream) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.cuStreamQuery)(stream) }, "cuStreamQuery")
}

/// `cuStreamWaitEvent`: later work on `stream` waits for `event`'s latest record.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn wait_event(api: &Api, stream: CUstream, event: CUevent) -> Result<()> {
    // SAFETY: the caller's contract; flags must be 0.
    check(api, unsafe { (api.cuStreamWaitEvent)(stream, event, 0) }, "cuStreamWaitEvent")
}

/// `cuLaunchHostFunc`.
///
/// # Safety
/// `stream` must be live, and `f` must take ownership of `user` when the stream reaches it
/// (and never unwind).
pub unsafe fn launch_host_func(api: &Api, stream: CUstream, f: CUhostFn, user: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuLaunchHostFunc)(stream, f, user) }, "cuLaunchHostFunc")
}

/// `cuMemcpyAsync` (unified addressing picks the direction).
///
/// # Safety
/// `stream` must be live and both ranges valid for `len` bytes until the copy has run.
pub unsafe fn memcpy_async(api: &Api, dst: CUdeviceptr, src: CUdeviceptr, len: usize, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemcpyAsync)(dst, src, len, stream) }, "cuMemcpyAsync")
}

/// `cuMemcpy2DAsync` between unified addresses: `height` rows of `width` bytes, each
/// side's rows its pitch apart (unified addressing picks the direction).
///
/// # Safety
/// `stream` must be live and every row of both sides valid until the copy has run.
#[allow(clippy::too_many_arguments)] // the driver call's own shape
pub unsafe fn memcpy_2d_async(
    api: &Api,
    dst: CUdeviceptr,
    dst_pitch: usize,
    src: CUdeviceptr,
    src_pitch: usize,
    width: usize,
    height: usize,
    stream: CUstream,
) -> Result<()> {
    let copy = Memcpy2d::unified(dst, dst_pitch, src, src_pitch, width, height);
    // SAFETY: the caller's contract; the description lives across the call (the driver
    // reads it before returning).
    check(api, unsafe { (api.cuMemcpy2DAsync)(&copy, stream) }, "cuMemcpy2DAsync")
}

/// `cuMemcpyPeerAsync` between two devices' memory.
///
/// # Safety
/// As for [`memcpy_async`], and both contexts must be retained.
pub unsafe fn memcpy_peer_async(
    api: &Api,
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    len: usize,
    stream: CUstream,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let status = unsafe { (api.cuMemcpyPeerAsync)(dst, dst_ctx, src, src_ctx, len, stream) };
    check(api, status, "cuMemcpyPeerAsync")
}

/// `cuMemsetD8Async`.
///
/// # Safety
/// `stream` must be live and `dst` valid for `len` bytes of device memory until it has run.
pub unsafe fn memset_d8_async(api: &Api, dst: CUdeviceptr, value: u8, len: usize, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemsetD8Async)(dst, value, len, stream) }, "cuMemsetD8Async")
}

/// `cuMemsetD8`, queued on the legacy default stream (it may return before the bytes land).
///
/// # Safety
/// `dst` must be valid for `len` bytes of device memory of the current context.
pub unsafe fn memset_d8(api: &Api, dst: CUdeviceptr, value: u8, len: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemsetD8)(dst, value, len) }, "cuMemsetD8")
}

/// `cuLaunchKernel` with a grid, a block and dynamic shared memory.
///
/// # Safety
/// `func` must belong to the current context, `stream` must be live, and `params` must
/// point at one value per kernel parameter, alive for the call (the driver copies them).
pub unsafe fn launch_kernel(
    api: &Api,
    func: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    let ([gx, gy, gz], [bx, by, bz]) = (grid, block);
    // SAFETY: the caller's contract; no `extra` arguments.
    let status = unsafe {
        (api.cuLaunchKernel)(func, gx, gy, gz, bx, by, bz, shared_mem_bytes, stream, params, std::ptr::null_mut())
    };
    check(api, status, "cuLaunchKernel")
}
