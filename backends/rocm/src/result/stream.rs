//! The `result` layer of `stream.rs` (the layers mirror each other by name, on purpose):
//! streams and the work queued on them: one checked call each. Every function that takes
//! a raw handle is `unsafe`: the caller keeps it (and the memory a copy touches) alive for
//! as long as the runtime may use it.

use std::ffi::{c_int, c_uint, c_void};

use gpuport_core::{Error, Result};

use super::{check, check_ready};
use crate::sys::{self, hipEvent_t, hipFunction_t, hipHostFn_t, hipStreamCallback_t, hipStream_t, Api, Runtime};

/// `hipStreamCreateWithPriority` on the current device.
pub fn create_with_priority(api: &Api, flags: c_uint, priority: c_int) -> Result<hipStream_t> {
    let mut raw: hipStream_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the runtime checks flags and clamps the priority.
    check(api, unsafe { (api.hipStreamCreateWithPriority)(&mut raw, flags, priority) }, "hipStreamCreateWithPriority")?;
    Ok(raw)
}

/// `hipStreamDestroy`.
///
/// # Safety
/// `stream` must be a stream created by gpuport, destroyed once.
pub unsafe fn destroy(api: &Api, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipStreamDestroy)(stream) }, "hipStreamDestroy")
}

/// `hipStreamSynchronize`.
///
/// # Safety
/// `stream` must be live (or null: the null stream).
pub unsafe fn synchronize(api: &Api, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipStreamSynchronize)(stream) }, "hipStreamSynchronize")
}

/// `hipStreamQuery`: whether everything queued has completed.
///
/// # Safety
/// As for [`synchronize`].
pub unsafe fn query(api: &Api, stream: hipStream_t) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.hipStreamQuery)(stream) }, "hipStreamQuery")
}

/// `hipStreamWaitEvent`: later work on `stream` waits for `event`'s latest record.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn wait_event(api: &Api, stream: hipStream_t, event: hipEvent_t) -> Result<()> {
    // SAFETY: the caller's contract; flags must be 0.
    check(api, unsafe { (api.hipStreamWaitEvent)(stream, event, 0) }, "hipStreamWaitEvent")
}

/// A host function on `stream`: `hipLaunchHostFunc` where the runtime has it, else the
/// older `hipStreamAddCallback` with `fallback`.
///
/// # Safety
/// `stream` must be live; `f` and `fallback` must each take ownership of `user` when the
/// stream reaches them (only one runs) and never unwind.
pub unsafe fn launch_host_func(
    rt: &Runtime,
    stream: hipStream_t,
    f: hipHostFn_t,
    fallback: hipStreamCallback_t,
    user: *mut c_void,
) -> Result<()> {
    let (status, call) = match rt.launch_host_func() {
        // SAFETY: the caller's contract.
        Some(launch) => (unsafe { launch(stream, f, user) }, "hipLaunchHostFunc"),
        // SAFETY: as above, through the older callback API (flags must be 0).
        None => (unsafe { (rt.api.hipStreamAddCallback)(stream, fallback, user, 0) }, "hipStreamAddCallback"),
    };
    check(&rt.api, status, call)
}

/// `hipMemcpyAsync` with `hipMemcpyDefault` (unified addressing infers the direction).
///
/// # Safety
/// `stream` must be live and both ranges valid for `len` bytes until the copy has run.
pub unsafe fn memcpy_async(
    api: &Api,
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    stream: hipStream_t,
) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipMemcpyAsync)(dst, src, len, sys::MEMCPY_DEFAULT, stream) }, "hipMemcpyAsync")
}

/// `hipMemcpy2DAsync` with `hipMemcpyDefault`: `height` rows of `width` bytes, each
/// side's rows its pitch apart (unified addressing infers the direction).
///
/// # Safety
/// `stream` must be live and every row of both sides valid until the copy has run.
#[allow(clippy::too_many_arguments)] // the runtime call's own shape
pub unsafe fn memcpy_2d_async(
    api: &Api,
    dst: *mut c_void,
    dst_pitch: usize,
    src: *const c_void,
    src_pitch: usize,
    width: usize,
    height: usize,
    stream: hipStream_t,
) -> Result<()> {
    let kind = sys::MEMCPY_DEFAULT;
    // SAFETY: the caller's contract.
    let status = unsafe { (api.hipMemcpy2DAsync)(dst, dst_pitch, src, src_pitch, width, height, kind, stream) };
    check(api, status, "hipMemcpy2DAsync")
}

/// `hipMemcpyPeerAsync` between two devices' memory.
///
/// # Safety
/// As for [`memcpy_async`]; both ordinals must exist.
pub unsafe fn memcpy_peer_async(
    api: &Api,
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    len: usize,
    stream: hipStream_t,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let status = unsafe { (api.hipMemcpyPeerAsync)(dst, dst_device, src, src_device, len, stream) };
    check(api, status, "hipMemcpyPeerAsync")
}

/// `hipMemsetAsync`.
///
/// # Safety
/// `stream` must be live and `dst` valid for `len` bytes of device memory until it has run.
pub unsafe fn memset_async(api: &Api, dst: *mut c_void, value: u8, len: usize, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipMemsetAsync)(dst, c_int::from(value), len, stream) }, "hipMemsetAsync")
}

/// `hipMemset`, queued on the null stream (it may return before the bytes land).
///
/// # Safety
/// `dst` must be valid for `len` bytes of device memory of the current device.
pub unsafe fn memset(api: &Api, dst: *mut c_void, value: u8, len: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipMemset)(dst, c_int::from(value), len) }, "hipMemset")
}

/// `hipModuleLaunchKernel` with a grid, a block and dynamic shared memory.
///
/// # Safety
/// `func` must belong to the current device, `stream` must be live, and `params` must
/// point at one value per kernel parameter, alive for the call (the runtime copies them).
pub unsafe fn launch_kernel(
    api: &Api,
    func: hipFunction_t,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem_bytes: c_uint,
    stream: hipStream_t,
    params: *mut *mut c_void,
) -> Result<()> {
    let ([gx, gy, gz], [bx, by, bz]) = (grid, block);
    // SAFETY: the caller's contract; no `extra` arguments.
    let status = unsafe {
        (api.hipModuleLaunchKernel)(
            func,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            shared_mem_bytes,
            stream,
            params,
            std::ptr::null_mut(),
        )
    };
    match status {
        // A launch the runtime refuses for its geometry or arguments: HIP 7 answers a
        // configuration out of range with hipErrorInvalidConfiguration where earlier
        // runtimes said hipErrorInvalidValue. Either is the caller's argument, whatever the
        // version.
        sys::ERROR_INVALID_VALUE | sys::ERROR_INVALID_CONFIGURATION => {
            let (name, text) = super::describe(api, status);
            Err(Error::invalid_argument(format!(
                "hipModuleLaunchKernel refused the launch (grid {grid:?}, block {block:?}, {shared_mem_bytes} bytes of shared memory): {name}: {text}"
            )))
        }
        _ => check(api, status, "hipModuleLaunchKernel"),
    }
}
