//! The `result` layer of `event.rs` (the layers mirror each other by name, on purpose):
//! events: one checked call each; handles are raw, so all but creation are `unsafe` (the
//! caller keeps them alive).

use std::ffi::c_uint;

use gpuport_core::{Error, Result};

use super::{check, check_ready};
use crate::sys::{self, Api, CUevent, CUstream};

/// `cuEventCreate` in the current context; `flags` are `CU_EVENT_*`.
pub fn create(api: &Api, flags: c_uint) -> Result<CUevent> {
    let mut raw: CUevent = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the driver checks the flags.
    check(api, unsafe { (api.cuEventCreate)(&mut raw, flags) }, "cuEventCreate")?;
    Ok(raw)
}

/// `cuEventDestroy`.
///
/// # Safety
/// `event` must be an event created by gpuport, destroyed once.
pub unsafe fn destroy(api: &Api, event: CUevent) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuEventDestroy)(event) }, "cuEventDestroy")
}

/// `cuEventRecord` on `stream`.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn record(api: &Api, event: CUevent, stream: CUstream) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuEventRecord)(event, stream) }, "cuEventRecord")
}

/// `cuEventQuery`: whether the latest record has completed.
///
/// # Safety
/// `event` must be live.
pub unsafe fn query(api: &Api, event: CUevent) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.cuEventQuery)(event) }, "cuEventQuery")
}

/// `cuEventSynchronize`.
///
/// # Safety
/// `event` must be live.
pub unsafe fn synchronize(api: &Api, event: CUevent) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuEventSynchronize)(event) }, "cuEventSynchronize")
}

/// `cuEventElapsedTime` in milliseconds; `NotReady` while either record is pending.
///
/// # Safety
/// Both events must be live.
pub unsafe fn elapsed_time(api: &Api, start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: valid out-pointer; the caller's contract for the events.
    let status = unsafe { (api.cuEventElapsedTime)(&mut ms, start, end) };
    if status == sys::ERROR_NOT_READY {
        return Err(Error::NotReady { what: "an event's recorded work has not completed".into() });
    }
    check(api, status, "cuEventElapsedTime")?;
    Ok(ms)
}
