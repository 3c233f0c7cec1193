//! The `result` layer of `device.rs` (the layers mirror each other by name, on purpose):
//! device queries and the primary context's retain count: one checked call each.

use std::ffi::{c_char, c_int};

use gpuport_core::Result;
use gpuport_vendor_kit::c_text::c_text;

use super::check;
use crate::sys::{self, Api, CUcontext, CUdevice, CUdevice_attribute, CUuuid};

/// `cuDeviceGetCount`.
pub fn count(api: &Api) -> Result<c_int> {
    let mut count: c_int = 0;
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.cuDeviceGetCount)(&mut count) }, "cuDeviceGetCount")?;
    Ok(count)
}

/// `cuDeviceGet` (the caller checked `ordinal` against [`count`]).
pub fn get(api: &Api, ordinal: c_int) -> Result<CUdevice> {
    let mut dev: CUdevice = 0;
    // SAFETY: valid out-pointer; the driver checks the ordinal.
    check(api, unsafe { (api.cuDeviceGet)(&mut dev, ordinal) }, "cuDeviceGet")?;
    Ok(dev)
}

/// `cuDeviceGetName`, as text.
pub fn name(api: &Api, dev: CUdevice) -> Result<String> {
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes; the driver checks the handle.
    check(api, unsafe { (api.cuDeviceGetName)(name.as_mut_ptr(), 256, dev) }, "cuDeviceGetName")?;
    Ok(c_text(&name))
}

/// `cuDeviceTotalMem`.
pub fn total_mem(api: &Api, dev: CUdevice) -> Result<usize> {
    let mut total = 0usize;
    // SAFETY: valid out-pointer; the driver checks the handle.
    check(api, unsafe { (api.cuDeviceTotalMem)(&mut total, dev) }, "cuDeviceTotalMem")?;
    Ok(total)
}

/// `cuDeviceGetPCIBusId`, as text; `None` where the driver cannot tell.
pub fn pci_bus_id(api: &Api, dev: CUdevice) -> Option<String> {
    let mut pci = [0 as c_char; 32];
    // SAFETY: the buffer holds 32 bytes (the id needs 13); the driver checks the handle.
    let ok = unsafe { (api.cuDeviceGetPCIBusId)(pci.as_mut_ptr(), 32, dev) } == sys::SUCCESS;
    ok.then(|| c_text(&pci))
}

/// `cuDeviceGetUuid`; `None` where the driver cannot tell.
pub fn uuid(api: &Api, dev: CUdevice) -> Option<[u8; 16]> {
    // SAFETY: CUuuid is plain bytes; zeroed is a valid value.
    let mut uuid: CUuuid = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer; the driver checks the handle.
    let ok = unsafe { (api.cuDeviceGetUuid)(&mut uuid, dev) } == sys::SUCCESS;
    ok.then(|| uuid.bytes.map(|b| b as u8))
}

/// `cuDeviceGetAttribute`.
pub fn attribute(api: &Api, dev: CUdevice, attr: CUdevice_attribute) -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer; the attribute id is from cuda.h.
    check(api, unsafe { (api.cuDeviceGetAttribute)(&mut v, attr as c_int, dev) }, "cuDeviceGetAttribute")?;
    Ok(v)
}

/// `cuDeviceCanAccessPeer`.
pub fn can_access_peer(api: &Api, dev: CUdevice, peer: CUdevice) -> Result<bool> {
    let mut can: c_int = 0;
    // SAFETY: valid out-pointer; the driver checks both handles.
    check(api, unsafe { (api.cuDeviceCanAccessPeer)(&mut can, dev, peer) }, "cuDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// `cuDevicePrimaryCtxRetain`: one retain, to be given back with [`primary_ctx_release`].
pub fn primary_ctx_retain(api: &Api, dev: CUdevice) -> Result<CUcontext> {
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the handle.
    check(api, unsafe { (api.cuDevicePrimaryCtxRetain)(&mut ctx, dev) }, "cuDevicePrimaryCtxRetain")?;
    Ok(ctx)
}

/// `cuDevicePrimaryCtxRelease`.
///
/// # Safety
/// Gives back one retain taken with [`primary_ctx_retain`]; nothing may use the context
/// through that retain afterwards.
pub unsafe fn primary_ctx_release(api: &Api, dev: CUdevice) -> Result<()> {
    // SAFETY: the caller gives back a retain it holds.
    check(api, unsafe { (api.cuDevicePrimaryCtxRelease)(dev) }, "cuDevicePrimaryCtxRelease")
}
