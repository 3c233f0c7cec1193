//! The `result` layer: every `hipError_t` checked (the mapping itself is shared, in
//! `gpuport_driver::status`), named with `hipGetErrorName` / `hipGetErrorString`; and the
//! calls the shared stream machinery makes (`gpuport_driver::vendor_stream`), one checked
//! runtime call each.

use std::ffi::c_void;

pub use gpuport_driver::status::{check, check_alloc, check_ready, StatusNames};
use gpuport_driver::vendor_stream::{run_host_callback, DeviceStreams, VendorStreams};

use crate::context::DeviceCtx;
use crate::sys::{hipEvent_t, hipStream_t, Api, Status};

impl StatusNames for Api {
    const BACKEND: &'static str = "rocm";
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
    fn fence_event(&self, stream: hipStream_t) -> gpuport_core::Result<hipEvent_t> {
        let api = &self.rt.api;
        let mut ev: hipEvent_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 2 = hipEventDisableTiming.
        check(api, unsafe { (api.hipEventCreateWithFlags)(&mut ev, 2) }, "hipEventCreateWithFlags")?;
        // SAFETY: both handles are live.
        if let Err(e) = check(api, unsafe { (api.hipEventRecord)(ev, stream) }, "hipEventRecord") {
            let _ = self.event_destroy(ev);
            return Err(e);
        }
        Ok(ev)
    }
    fn event_done(&self, event: hipEvent_t) -> gpuport_core::Result<bool> {
        let api = &self.rt.api;
        // SAFETY: a live event.
        check_ready(api, unsafe { (api.hipEventQuery)(event) }, "hipEventQuery")
    }
    fn event_destroy(&self, event: hipEvent_t) -> gpuport_core::Result<()> {
        let api = &self.rt.api;
        // SAFETY: an event created by gpuport, destroyed once.
        check(api, unsafe { (api.hipEventDestroy)(event) }, "hipEventDestroy")
    }
    fn stream_done(&self, stream: hipStream_t) -> gpuport_core::Result<bool> {
        let api = &self.rt.api;
        // SAFETY: a live stream handle.
        check_ready(api, unsafe { (api.hipStreamQuery)(stream) }, "hipStreamQuery")
    }
    fn stream_synchronize(&self, stream: hipStream_t) -> gpuport_core::Result<()> {
        let api = &self.rt.api;
        // SAFETY: a live stream handle.
        check(api, unsafe { (api.hipStreamSynchronize)(stream) }, "hipStreamSynchronize")
    }
    fn device_synchronize(&self) -> gpuport_core::Result<()> {
        let api = &self.rt.api;
        // SAFETY: the device is current (the caller bound it).
        check(api, unsafe { (api.hipDeviceSynchronize)() }, "hipDeviceSynchronize")
    }
    fn stream_destroy(&self, stream: hipStream_t) -> gpuport_core::Result<()> {
        let api = &self.rt.api;
        // SAFETY: a stream created by gpuport, destroyed once.
        check(api, unsafe { (api.hipStreamDestroy)(stream) }, "hipStreamDestroy")
    }
    fn launch_host_callback(&self, stream: hipStream_t, user: *mut c_void) -> gpuport_core::Result<()> {
        let rt = &self.rt;
        let (status, call) = match rt.launch_host_func() {
            // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it.
            Some(launch) => (unsafe { launch(stream, Some(host_fn), user) }, "hipLaunchHostFunc"),
            // SAFETY: as above, through the older callback API.
            None => (
                unsafe { (rt.api.hipStreamAddCallback)(stream, Some(stream_callback), user, 0) },
                "hipStreamAddCallback",
            ),
        };
        check(&rt.api, status, call)
    }
    fn streams(&self) -> &DeviceStreams<Self> {
        &self.streams
    }
}
