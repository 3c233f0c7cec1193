//! The `result` layer: every driver status checked (the mapping itself is shared, in
//! `gpuport_driver::status`), named with the driver's `cuGetErrorName` /
//! `cuGetErrorString`; and the calls the shared stream machinery makes
//! (`gpuport_driver::vendor_stream`), one checked driver call each.

use std::ffi::c_void;

pub use gpuport_driver::status::{check, check_alloc, check_ready, StatusNames};
use gpuport_driver::vendor_stream::{run_host_callback, DeviceStreams, VendorStreams};

use crate::context::DeviceCtx;
use crate::sys::{self, Api, CUevent, CUstream, Status};

impl StatusNames for Api {
    const BACKEND: &'static str = "cuda";
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
    fn fence_event(&self, stream: CUstream) -> gpuport_core::Result<CUevent> {
        let api = &self.driver.api;
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 2 = CU_EVENT_DISABLE_TIMING; the context is current.
        check(api, unsafe { (api.cuEventCreate)(&mut ev, 2) }, "cuEventCreate")?;
        // SAFETY: both handles are live.
        if let Err(e) = check(api, unsafe { (api.cuEventRecord)(ev, stream) }, "cuEventRecord") {
            let _ = self.event_destroy(ev);
            return Err(e);
        }
        Ok(ev)
    }
    fn event_done(&self, event: CUevent) -> gpuport_core::Result<bool> {
        let api = &self.driver.api;
        // SAFETY: a live event.
        check_ready(api, unsafe { (api.cuEventQuery)(event) }, "cuEventQuery")
    }
    fn event_destroy(&self, event: CUevent) -> gpuport_core::Result<()> {
        let api = &self.driver.api;
        // SAFETY: an event created by gpuport, destroyed once.
        check(api, unsafe { (api.cuEventDestroy)(event) }, "cuEventDestroy")
    }
    fn stream_done(&self, stream: CUstream) -> gpuport_core::Result<bool> {
        let api = &self.driver.api;
        // SAFETY: a live stream handle.
        check_ready(api, unsafe { (api.cuStreamQuery)(stream) }, "cuStreamQuery")
    }
    fn stream_synchronize(&self, stream: CUstream) -> gpuport_core::Result<()> {
        let api = &self.driver.api;
        // SAFETY: a live stream handle.
        check(api, unsafe { (api.cuStreamSynchronize)(stream) }, "cuStreamSynchronize")
    }
    fn device_synchronize(&self) -> gpuport_core::Result<()> {
        let api = &self.driver.api;
        // SAFETY: the context is current (the caller bound it).
        check(api, unsafe { (api.cuCtxSynchronize)() }, "cuCtxSynchronize")
    }
    fn stream_destroy(&self, stream: CUstream) -> gpuport_core::Result<()> {
        let api = &self.driver.api;
        // SAFETY: a stream created by gpuport, destroyed once; queued work still completes.
        check(api, unsafe { (api.cuStreamDestroy)(stream) }, "cuStreamDestroy")
    }
    fn launch_host_callback(&self, stream: CUstream, user: *mut c_void) -> gpuport_core::Result<()> {
        let api = &self.driver.api;
        // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it.
        check(api, unsafe { (api.cuLaunchHostFunc)(stream, Some(host_fn), user) }, "cuLaunchHostFunc")
    }
    fn streams(&self) -> &DeviceStreams<Self> {
        &self.streams
    }
}
