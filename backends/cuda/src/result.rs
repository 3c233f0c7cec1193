//! The `result` layer (cudarc's): one checked function per driver call, by area —
//! [`device`], [`ctx`], [`stream`], [`event`], [`memory`], [`module`] — so the trait
//! implementations above it never touch `sys` directly. Every status is checked (the
//! mapping itself is shared, in `gpuport_vendor_kit::status`) and named with the driver's
//! `cuGetErrorName` / `cuGetErrorString`. Functions that take raw handles are `unsafe`:
//! the caller keeps the handles alive.

use gpuport_core::BackendKind;
pub use gpuport_vendor_kit::status::{check, check_alloc, check_ready, StatusNames};

use crate::sys::{self, Api, Status};

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
    gpuport_vendor_kit::status::fallback_names(status, n, t, "CUresult")
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &Api, status: Status, call: &'static str) -> gpuport_core::Error {
    gpuport_vendor_kit::status::vendor_error(api, status, call)
}
