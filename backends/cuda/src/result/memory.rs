//! The `result` layer of `memory.rs` (the layers mirror each other by name, on purpose):
//! allocations and pointer attributes: one checked call each. Allocation failures are
//! `OutOfMemory` for `device` (`check_alloc`).

use std::ffi::{c_int, c_uint, c_void};

use gpuport_core::{BackendKind, DeviceId, Error, Result};

use super::{check, check_alloc};
use crate::sys::{self, Api, CUdeviceptr, CUpointer_attribute, CUstream, Driver};

/// `cuMemAlloc` in the current context.
pub fn alloc(api: &Api, bytes: usize, device: DeviceId) -> Result<CUdeviceptr> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    check_alloc(api, unsafe { (api.cuMemAlloc)(&mut ptr, bytes) }, "cuMemAlloc", device, bytes)?;
    Ok(ptr)
}

/// `cuMemFree`.
///
/// # Safety
/// `ptr` must come from [`alloc`] or [`alloc_managed`], freed once, unused afterwards.
pub unsafe fn free(api: &Api, ptr: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemFree)(ptr) }, "cuMemFree")
}

/// `cuMemHostAlloc`; `flags` are `CU_MEMHOSTALLOC_*` (PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4).
pub fn host_alloc(api: &Api, bytes: usize, flags: c_uint, device: DeviceId) -> Result<*mut c_void> {
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags.
    check_alloc(api, unsafe { (api.cuMemHostAlloc)(&mut ptr, bytes, flags) }, "cuMemHostAlloc", device, bytes)?;
    Ok(ptr)
}

/// `cuMemFreeHost`.
///
/// # Safety
/// `ptr` must come from [`host_alloc`], freed once, unused afterwards.
pub unsafe fn free_host(api: &Api, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemFreeHost)(ptr) }, "cuMemFreeHost")
}

/// `cuMemHostRegister`, portable (`CU_MEMHOSTREGISTER_PORTABLE`): every context copies
/// to and from the range as page-locked memory.
///
/// # Safety
/// `[ptr, ptr + bytes)` is host memory that stays allocated until [`host_unregister`].
pub unsafe fn host_register(api: &Api, ptr: *mut c_void, bytes: usize) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemHostRegister)(ptr, bytes, sys::MEMHOSTREGISTER_PORTABLE) }, "cuMemHostRegister")
}

/// `cuMemHostUnregister`.
///
/// # Safety
/// `ptr` was registered by [`host_register`], is unregistered once, and no queued work
/// uses it.
pub unsafe fn host_unregister(api: &Api, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuMemHostUnregister)(ptr) }, "cuMemHostUnregister")
}

/// `cuMemAllocManaged`, attached globally.
pub fn alloc_managed(api: &Api, bytes: usize, device: DeviceId) -> Result<CUdeviceptr> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    let status = unsafe { (api.cuMemAllocManaged)(&mut ptr, bytes, sys::MEM_ATTACH_GLOBAL) };
    check_alloc(api, status, "cuMemAllocManaged", device, bytes)?;
    Ok(ptr)
}

/// Whether the driver has `cuMemAllocAsync` (driver ≥ 11.2, resolved on first use).
pub fn has_alloc_async(driver: &Driver) -> Result<()> {
    driver.mem_alloc_async().map(|_| ()).ok_or_else(|| {
        Error::unsupported(
            BackendKind::Cuda,
            format!("stream-ordered allocation (driver {})", crate::sys::format_version(driver.driver_version)),
        )
    })
}

/// `cuMemAllocAsync`: `Unsupported` where the driver lacks it or the device has no memory
/// pools.
///
/// # Safety
/// `stream` must be live.
pub unsafe fn alloc_async(driver: &Driver, bytes: usize, stream: CUstream, device: DeviceId) -> Result<CUdeviceptr> {
    has_alloc_async(driver)?;
    let alloc = driver.mem_alloc_async().ok_or_else(|| Error::unsupported(BackendKind::Cuda, "cuMemAllocAsync"))?;
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the caller's contract for `stream`.
    let status = unsafe { alloc(&mut ptr, bytes, stream) };
    if status == sys::ERROR_NOT_SUPPORTED {
        // A driver that has the call, on a device without memory pools.
        return Err(Error::unsupported(
            BackendKind::Cuda,
            format!("stream-ordered allocation on {device} (no memory pools)"),
        ));
    }
    check_alloc(&driver.api, status, "cuMemAllocAsync", device, bytes)?;
    Ok(ptr)
}

/// Whether the driver has `cuMemFreeAsync` (checked before allocating stream-ordered).
pub fn has_free_async(driver: &Driver) -> Result<()> {
    driver.mem_free_async().map(|_| ()).ok_or_else(|| Error::unsupported(BackendKind::Cuda, "cuMemFreeAsync"))
}

/// `cuMemFreeAsync` on `stream` (null: the null stream).
///
/// # Safety
/// `ptr` must come from [`alloc_async`], freed once and unused by work queued after this;
/// `stream` must be live or null.
pub unsafe fn free_async(driver: &Driver, ptr: CUdeviceptr, stream: CUstream) -> Result<()> {
    let free = driver.mem_free_async().ok_or_else(|| Error::unsupported(BackendKind::Cuda, "cuMemFreeAsync"))?;
    // SAFETY: the caller's contract.
    check(&driver.api, unsafe { free(ptr, stream) }, "cuMemFreeAsync")
}

/// The answers of `cuPointerGetAttributes` gpuport asks for.
pub struct PointerInfo {
    /// `CU_MEMORYTYPE_*`.
    pub memory_type: c_uint,
    /// The device ordinal (−1: none).
    pub ordinal: c_int,
    /// Allocated with `cuMemAllocManaged`.
    pub managed: bool,
    /// The allocation's start.
    pub start: CUdeviceptr,
    /// The allocation's size.
    pub size: usize,
}

/// What `cuPointerGetAttributes` says of `addr`; `None` for memory the driver does not
/// know (unregistered host memory, or an address nobody allocated).
pub fn pointer_attributes(api: &Api, addr: CUdeviceptr) -> Result<Option<PointerInfo>> {
    let mut memory_type: c_uint = 0;
    let mut ordinal: c_int = -1;
    let mut managed: c_uint = 0;
    let mut start: CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attrs = [
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE as c_int,
    ];
    let mut data: [*mut c_void; 5] = [
        (&mut memory_type as *mut c_uint).cast(),
        (&mut ordinal as *mut c_int).cast(),
        (&mut managed as *mut c_uint).cast(),
        (&mut start as *mut CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: five attributes, each with a pointer to storage of the documented type.
    let status = unsafe { (api.cuPointerGetAttributes)(5, attrs.as_mut_ptr(), data.as_mut_ptr(), addr) };
    match status {
        sys::SUCCESS => Ok(Some(PointerInfo { memory_type, ordinal, managed: managed != 0, start, size })),
        sys::ERROR_INVALID_VALUE => Ok(None),
        _ => check(api, status, "cuPointerGetAttributes").map(|_| None),
    }
}
