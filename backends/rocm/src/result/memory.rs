//! The `result` layer of `memory.rs` (the layers mirror each other by name, on purpose):
//! allocations and pointer attributes: one checked call each. Allocation failures are
//! `OutOfMemory` for `device` (`check_alloc`).

use std::ffi::{c_uint, c_void};

use gpuport_core::{BackendKind, DeviceId, Error, Result};

use super::{check, check_alloc};
use crate::sys::{self, hipPointerAttribute_t, hipStream_t, Api, Runtime};

/// `hipMalloc` on the current device.
pub fn malloc(api: &Api, bytes: usize, device: DeviceId) -> Result<*mut c_void> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    check_alloc(api, unsafe { (api.hipMalloc)(&mut ptr, bytes) }, "hipMalloc", device, bytes)?;
    Ok(ptr)
}

/// `hipFree`.
///
/// # Safety
/// `ptr` must come from [`malloc`] or [`malloc_managed`], freed once, unused afterwards.
pub unsafe fn free(api: &Api, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipFree)(ptr) }, "hipFree")
}

/// `hipHostMalloc`; `flags` are HIP's (`Portable` 1, `Mapped` 2, `WriteCombined` 4).
pub fn host_malloc(api: &Api, bytes: usize, flags: c_uint, device: DeviceId) -> Result<*mut c_void> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the runtime checks the flags.
    check_alloc(api, unsafe { (api.hipHostMalloc)(&mut ptr, bytes, flags) }, "hipHostMalloc", device, bytes)?;
    Ok(ptr)
}

/// `hipHostFree`.
///
/// # Safety
/// `ptr` must come from [`host_malloc`], freed once, unused afterwards.
pub unsafe fn host_free(api: &Api, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipHostFree)(ptr) }, "hipHostFree")
}

/// `hipHostRegister`, portable (`hipHostRegisterPortable`): every device copies to and
/// from the range as page-locked memory.
///
/// # Safety
/// `[ptr, ptr + bytes)` is host memory that stays allocated until [`host_unregister`].
pub unsafe fn host_register(api: &Api, ptr: *mut c_void, bytes: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipHostRegister)(ptr, bytes, sys::HOST_REGISTER_PORTABLE) }, "hipHostRegister")
}

/// `hipHostUnregister`.
///
/// # Safety
/// `ptr` was registered by [`host_register`], is unregistered once, and no queued work
/// uses it.
pub unsafe fn host_unregister(api: &Api, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipHostUnregister)(ptr) }, "hipHostUnregister")
}

/// `hipMallocManaged`, attached globally.
pub fn malloc_managed(api: &Api, bytes: usize, device: DeviceId) -> Result<*mut c_void> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    let status = unsafe { (api.hipMallocManaged)(&mut ptr, bytes, sys::MEM_ATTACH_GLOBAL) };
    check_alloc(api, status, "hipMallocManaged", device, bytes)?;
    Ok(ptr)
}

/// Whether the runtime has both stream-ordered calls (checked before allocating).
pub fn has_stream_ordered(rt: &Runtime) -> Result<()> {
    rt.malloc_async()
        .ok_or_else(|| Error::unsupported(BackendKind::Rocm, "stream-ordered allocation (hipMallocAsync)"))?;
    rt.free_async().ok_or_else(|| Error::unsupported(BackendKind::Rocm, "hipFreeAsync"))?;
    Ok(())
}

/// `hipMallocAsync` on `stream` (resolved on first use).
///
/// # Safety
/// `stream` must be live.
pub unsafe fn malloc_async(rt: &Runtime, bytes: usize, stream: hipStream_t, device: DeviceId) -> Result<*mut c_void> {
    let malloc = rt
        .malloc_async()
        .ok_or_else(|| Error::unsupported(BackendKind::Rocm, "stream-ordered allocation (hipMallocAsync)"))?;
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the caller's contract for `stream`.
    check_alloc(&rt.api, unsafe { malloc(&mut ptr, bytes, stream) }, "hipMallocAsync", device, bytes)?;
    Ok(ptr)
}

/// `hipFreeAsync` on `stream` (null: the null stream).
///
/// # Safety
/// `ptr` must come from [`malloc_async`], freed once and unused by work queued after this;
/// `stream` must be live or null.
pub unsafe fn free_async(rt: &Runtime, ptr: *mut c_void, stream: hipStream_t) -> Result<()> {
    let free = rt.free_async().ok_or_else(|| Error::unsupported(BackendKind::Rocm, "hipFreeAsync"))?;
    // SAFETY: the caller's contract.
    check(&rt.api, unsafe { free(ptr, stream) }, "hipFreeAsync")
}

/// `hipPointerGetAttributes` for `addr`; `None` for memory the runtime does not know
/// (unregistered host memory, or an address nobody allocated).
pub fn pointer_attributes(api: &Api, addr: *const c_void) -> Result<Option<hipPointerAttribute_t>> {
    let mut attrs = hipPointerAttribute_t {
        memoryType: -1,
        device: -1,
        devicePointer: std::ptr::null_mut(),
        hostPointer: std::ptr::null_mut(),
        isManaged: 0,
        allocationFlags: 0,
    };
    // SAFETY: valid out-pointer of the declared layout; the address is only inspected.
    let status = unsafe { (api.hipPointerGetAttributes)(&mut attrs, addr) };
    match status {
        sys::SUCCESS => Ok(Some(attrs)),
        sys::ERROR_INVALID_VALUE => Ok(None),
        _ => check(api, status, "hipPointerGetAttributes").map(|_| None),
    }
}

/// `hipMemGetAddressRange` for `addr`: the start and size of the allocation holding it;
/// `None` where the runtime lacks the call or knows no allocation there.
pub fn address_range(rt: &Runtime, addr: *const c_void) -> Option<(u64, usize)> {
    let range = rt.mem_get_address_range()?;
    let (mut base, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: valid out-pointers; the address is only looked up.
    let status = unsafe { range(&mut base, &mut size, addr.cast_mut()) };
    (status == sys::SUCCESS && !base.is_null() && size > 0).then_some((base as u64, size))
}
