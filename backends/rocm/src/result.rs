//! The `result` layer (cudarc's): one checked function per runtime call, by area —
//! [`device`], [`stream`], [`event`], [`memory`], [`module`] — so the trait implementations
//! above it never touch `sys` directly. Every `hipError_t` is checked (the mapping itself
//! is shared, in `gpuport_driver::status`) and named with `hipGetErrorName` /
//! `hipGetErrorString`. Functions that take raw handles are `unsafe`: the caller keeps the
//! handles alive. Here too: the calls the shared stream machinery makes
//! (`gpuport_driver::vendor_stream`).

use std::ffi::c_void;

use gpuport_core::BackendKind;
pub use gpuport_driver::status::{check, check_alloc, check_ready, StatusNames};
use gpuport_driver::vendor_stream::{run_host_callback, DeviceStreams, VendorStreams};

use crate::context::DeviceCtx;
use crate::sys::{hipEvent_t, hipStream_t, Api, Status};

pub mod device;
pub mod event;
pub mod memory;
pub mod module;
pub mod stream;

impl StatusNames for Api {
    const BACKEND: BackendKind = BackendKind::Rocm;
    fn describe(&self, status: Status) -> (String, String) {
        describe(self, status)
    }
}

/// The runtime's name and description of `status`.
pub fn describe(api: &Api, status: Status) -> (String, String) {
    // SAFETY: both return pointers to static strings for any status value.
    let (n, t) = unsafe { ((api.hipGetErrorName)(status), (api.hipGetErrorString)(status)) };
    let text = |p: *const std::ffi::c_char| {
        // SAFETY: null or a static NUL-terminated string.
        (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    gpuport_driver::status::fallback_names(status, text(n), text(t), "hipError_t")
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &Api, status: Status, call: &'static str) -> gpuport_core::Error {
    gpuport_driver::status::vendor_error(api, status, call)
}

/// For `hipLaunchHostFunc`: the shared trampoline, which runs the callback inside
/// `catch_unwind` and so never unwinds into the runtime.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    // SAFETY: the runtime calls this once with the pointer `launch_host_callback` gave it.
    unsafe { run_host_callback(user) }
}

/// For `hipStreamAddCallback` (ROCm 5.2 has no `hipLaunchHostFunc`): the same trampoline.
unsafe extern "C" fn stream_callback(_stream: hipStream_t, _status: Status, user: *mut c_void) {
    // SAFETY: as for `host_fn`.
    unsafe { run_host_callback(user) }
}

impl VendorStreams for DeviceCtx {
    const KIND: gpuport_core::BackendKind = gpuport_core::BackendKind::Rocm;
    type Stream = hipStream_t;
    type Event = hipEvent_t;

    fn device_id(&self) -> gpuport_core::DeviceId {
        self.id
    }
    fn bind(&self) -> gpuport_core::Result<()> {
        DeviceCtx::bind(self)
    }
    fn stream_raw(stream: hipStream_t) -> usize {
        stream as usize
    }
    fn event_raw(ev: hipEvent_t) -> usize {
        ev as usize
    }
    fn event_create(&self, flags: gpuport_core::EventFlags) -> gpuport_core::Result<hipEvent_t> {
        // EventFlags' bits are HIP's: BlockingSync 1, DisableTiming 2, Interprocess 4.
        event::create(&self.rt.api, flags.bits() as std::ffi::c_uint)
    }
    fn event_synchronize(&self, ev: hipEvent_t) -> gpuport_core::Result<()> {
        // SAFETY: a live event (its handle holds it).
        unsafe { event::synchronize(&self.rt.api, ev) }
    }
    fn event_elapsed_ms(&self, start: hipEvent_t, end: hipEvent_t) -> gpuport_core::Result<f32> {
        // SAFETY: both events are live (each handle holds its event).
        unsafe { event::elapsed_time(&self.rt.api, start, end) }
    }
    fn event_record(&self, ev: hipEvent_t, s: hipStream_t) -> gpuport_core::Result<()> {
        // SAFETY: both handles are live (the caller's stream state holds them).
        unsafe { event::record(&self.rt.api, ev, s) }
    }
    fn event_done(&self, ev: hipEvent_t) -> gpuport_core::Result<bool> {
        // SAFETY: a live event.
        unsafe { event::query(&self.rt.api, ev) }
    }
    fn event_destroy(&self, ev: hipEvent_t) -> gpuport_core::Result<()> {
        // SAFETY: an event created by gpuport, destroyed once.
        unsafe { event::destroy(&self.rt.api, ev) }
    }
    fn stream_done(&self, s: hipStream_t) -> gpuport_core::Result<bool> {
        // SAFETY: a live stream handle.
        unsafe { stream::query(&self.rt.api, s) }
    }
    fn stream_synchronize(&self, s: hipStream_t) -> gpuport_core::Result<()> {
        // SAFETY: a live stream handle.
        unsafe { stream::synchronize(&self.rt.api, s) }
    }
    fn device_synchronize(&self) -> gpuport_core::Result<()> {
        // The caller bound the device.
        device::synchronize(&self.rt.api)
    }
    fn stream_destroy(&self, s: hipStream_t) -> gpuport_core::Result<()> {
        // SAFETY: a stream created by gpuport, destroyed once.
        unsafe { stream::destroy(&self.rt.api, s) }
    }
    fn launch_host_callback(&self, s: hipStream_t, user: *mut c_void) -> gpuport_core::Result<()> {
        // SAFETY: `host_fn` / `stream_callback` take ownership of `user` when the stream
        // reaches them (only one is queued), and never unwind (the shared trampoline
        // catches panics).
        unsafe { stream::launch_host_func(&self.rt, s, Some(host_fn), Some(stream_callback), user) }
    }
    fn streams(&self) -> &DeviceStreams<Self> {
        &self.streams
    }
}
