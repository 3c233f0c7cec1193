//! The `result` layer of `event.rs` (the layers mirror each other by name, on purpose):
//! events: one checked call each; handles are raw, so all but creation are `unsafe` (the
//! caller keeps them alive).

use std::ffi::c_uint;

use gpuport_core::{Error, Result};

use super::{check, check_ready};
use crate::sys::{self, hipEvent_t, hipStream_t, Api};

/// `hipEventCreateWithFlags` on the current device; `flags` are `hipEvent*`.
pub fn create(api: &Api, flags: c_uint) -> Result<hipEvent_t> {
    let mut raw: hipEvent_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the runtime checks the flags.
    check(api, unsafe { (api.hipEventCreateWithFlags)(&mut raw, flags) }, "hipEventCreateWithFlags")?;
    Ok(raw)
}

/// `hipEventDestroy`.
///
/// # Safety
/// `event` must be an event created by gpuport, destroyed once.
pub unsafe fn destroy(api: &Api, event: hipEvent_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipEventDestroy)(event) }, "hipEventDestroy")
}

/// `hipEventRecord` on `stream`.
///
/// # Safety
/// Both handles must be live.
pub unsafe fn record(api: &Api, event: hipEvent_t, stream: hipStream_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipEventRecord)(event, stream) }, "hipEventRecord")
}

/// `hipEventQuery`: whether the latest record has completed.
///
/// # Safety
/// `event` must be live.
pub unsafe fn query(api: &Api, event: hipEvent_t) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.hipEventQuery)(event) }, "hipEventQuery")
}

/// `hipEventSynchronize`.
///
/// # Safety
/// `event` must be live.
pub unsafe fn synchronize(api: &Api, event: hipEvent_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipEventSynchronize)(event) }, "hipEventSynchronize")
}

/// `hipEventElapsedTime` in milliseconds; `NotReady` while either record is pending.
///
/// # Safety
/// Both events must be live.
pub unsafe fn elapsed_time(api: &Api, start: hipEvent_t, end: hipEvent_t) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: valid out-pointer; the caller's contract for the events.
    let status = unsafe { (api.hipEventElapsedTime)(&mut ms, start, end) };
    if status == sys::ERROR_NOT_READY {
        return Err(Error::NotReady { what: "an event's recorded work has not completed".into() });
    }
    check(api, status, "hipEventElapsedTime")?;
    Ok(ms)
}
