//! The `result` layer (cudarc's): one checked function per driver call, by area —
//! [`device`], [`ctx`], [`stream`], [`event`], [`memory`], [`module`] — so the trait
//! implementations above it never touch `sys` directly. Every status is checked (the
//! mapping itself is shared, in `gpuport_driver::status`) and named with the driver's
//! `cuGetErrorName` / `cuGetErrorString`. Functions that take raw handles are `unsafe`:
//! the caller keeps the handles alive. Here too: the calls the shared stream machinery
//! makes (`gpuport_driver::vendor_stream`).

use std::ffi::c_void;

use gpuport_core::BackendKind;
pub use gpuport_driver::status::{check, check_alloc, check_ready, StatusNames};
use gpuport_driver::vendor_stream::{run_host_callback, DeviceStreams, VendorStreams};

use crate::context::DeviceCtx;
use crate::sys::{self, Api, CUevent, CUstream, Status};

pub mod ctx;
pub mod device;
pub mod event;
pub mod memory;
pub mod module;
pub mod stream;

impl StatusNames for Api {
    const BACKEND: BackendKind = BackendKind::Cuda;
    fn describe(&self, status: Status) -> (String, String) {
        describe(self, status)
    }
}

/// The driver's name and description of `status` (`CUDA_ERROR_…`, "…"), or a generic
/// rendering when the driver does not know it.
pub fn describe(api: &Api, status: Status) -> (String, String) {
    let mut name = std::ptr::null();
    let mut text = std::ptr::null();
    // SAFETY: both calls write a pointer to a static string (or leave null) and accept any
    // status value.
    let (n, t) = unsafe {
        let _ = (api.cuGetErrorName)(status, &mut name);
        let _ = (api.cuGetErrorString)(status, &mut text);
        (sys::static_str(name), sys::static_str(text))
    };
    gpuport_driver::status::fallback_names(status, n, t, "CUresult")
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &Api, status: Status, call: &'static str) -> gpuport_core::Error {
    gpuport_driver::status::vendor_error(api, status, call)
}

/// The host function handed to `cuLaunchHostFunc`: the shared trampoline, which runs the
/// callback inside `catch_unwind` and so never unwinds into the driver.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    // SAFETY: the driver calls this once with the pointer `launch_host_callback` gave it.
    unsafe { run_host_callback(user) }
}

impl VendorStreams for DeviceCtx {
    const KIND: gpuport_core::BackendKind = gpuport_core::BackendKind::Cuda;
    type Stream = CUstream;
    type Event = CUevent;

    fn device_id(&self) -> gpuport_core::DeviceId {
        self.id
    }
    fn bind(&self) -> gpuport_core::Result<()> {
        DeviceCtx::bind(self)
    }
    fn stream_raw(stream: CUstream) -> usize {
        stream as usize
    }
    fn event_raw(ev: CUevent) -> usize {
        ev as usize
    }
    fn event_create(&self, flags: gpuport_core::EventFlags) -> gpuport_core::Result<CUevent> {
        // EventFlags' bits are the driver's: BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4.
        event::create(&self.driver.api, flags.bits() as std::ffi::c_uint)
    }
    fn event_synchronize(&self, ev: CUevent) -> gpuport_core::Result<()> {
        // SAFETY: a live event (its handle holds it).
        unsafe { event::synchronize(&self.driver.api, ev) }
    }
    fn event_elapsed_ms(&self, start: CUevent, end: CUevent) -> gpuport_core::Result<f32> {
        // SAFETY: both events are live (each handle holds its event).
        unsafe { event::elapsed_time(&self.driver.api, start, end) }
    }
    fn event_record(&self, ev: CUevent, s: CUstream) -> gpuport_core::Result<()> {
        // SAFETY: both handles are live (the caller's stream state holds them).
        unsafe { event::record(&self.driver.api, ev, s) }
    }
    fn event_done(&self, ev: CUevent) -> gpuport_core::Result<bool> {
        // SAFETY: a live event.
        unsafe { event::query(&self.driver.api, ev) }
    }
    fn event_destroy(&self, ev: CUevent) -> gpuport_core::Result<()> {
        // SAFETY: an event created by gpuport, destroyed once.
        unsafe { event::destroy(&self.driver.api, ev) }
    }
    fn stream_done(&self, s: CUstream) -> gpuport_core::Result<bool> {
        // SAFETY: a live stream handle.
        unsafe { stream::query(&self.driver.api, s) }
    }
    fn stream_synchronize(&self, s: CUstream) -> gpuport_core::Result<()> {
        // SAFETY: a live stream handle.
        unsafe { stream::synchronize(&self.driver.api, s) }
    }
    fn device_synchronize(&self) -> gpuport_core::Result<()> {
        // The caller bound the context.
        ctx::synchronize(&self.driver.api)
    }
    fn stream_destroy(&self, s: CUstream) -> gpuport_core::Result<()> {
        // SAFETY: a stream created by gpuport, destroyed once; queued work still completes.
        unsafe { stream::destroy(&self.driver.api, s) }
    }
    fn launch_host_callback(&self, s: CUstream, user: *mut c_void) -> gpuport_core::Result<()> {
        // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it, and never
        // unwinds (the shared trampoline catches panics).
        unsafe { stream::launch_host_func(&self.driver.api, s, Some(host_fn), user) }
    }
    fn streams(&self) -> &DeviceStreams<Self> {
        &self.streams
    }
}
