//! The current context and context-wide calls: one checked call each.

use std::ffi::c_int;

use gpuport_core::Result;

use super::check;
use crate::sys::{self, Api, CUcontext};

/// `cuCtxGetCurrent` (null when none is current).
pub fn get_current(api: &Api) -> Result<CUcontext> {
    let mut current: CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.cuCtxGetCurrent)(&mut current) }, "cuCtxGetCurrent")?;
    Ok(current)
}

/// `cuCtxSetCurrent`.
///
/// # Safety
/// `ctx` must be a live (retained) context.
pub unsafe fn set_current(api: &Api, ctx: CUcontext) -> Result<()> {
    // SAFETY: the caller keeps `ctx` retained.
    check(api, unsafe { (api.cuCtxSetCurrent)(ctx) }, "cuCtxSetCurrent")
}

/// `cuCtxSynchronize` on the current context.
pub fn synchronize(api: &Api) -> Result<()> {
    // SAFETY: no arguments; without a current context the driver returns an error.
    check(api, unsafe { (api.cuCtxSynchronize)() }, "cuCtxSynchronize")
}

/// `cuCtxGetStreamPriorityRange` of the current context: (least, greatest).
pub fn stream_priority_range(api: &Api) -> Result<(c_int, c_int)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    let status = unsafe { (api.cuCtxGetStreamPriorityRange)(&mut least, &mut greatest) };
    check(api, status, "cuCtxGetStreamPriorityRange")?;
    Ok((least, greatest))
}

/// `cuCtxEnablePeerAccess` from the current context to `peer`; already enabled is success.
///
/// # Safety
/// `peer` must be a live (retained) context.
pub unsafe fn enable_peer_access(api: &Api, peer: CUcontext) -> Result<()> {
    // SAFETY: the caller keeps `peer` retained; flags must be 0.
    let status = unsafe { (api.cuCtxEnablePeerAccess)(peer, 0) };
    if status == sys::ERROR_PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    check(api, status, "cuCtxEnablePeerAccess")
}
