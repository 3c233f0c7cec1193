//! The `result` layer (cudarc's): one checked function per runtime call, by area —
//! [`device`], [`stream`], [`event`], [`memory`], [`module`] — so the trait implementations
//! above it never touch `sys` directly. Every `hipError_t` is checked (the mapping itself
//! is shared, in `gpuport_vendor_kit::status`) and named with `hipGetErrorName` /
//! `hipGetErrorString`. Functions that take raw handles are `unsafe`: the caller keeps the
//! handles alive.

use gpuport_core::BackendKind;
pub use gpuport_vendor_kit::status::{check, check_alloc, check_ready, StatusNames};

use crate::sys::{Api, Status};

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
    gpuport_vendor_kit::status::fallback_names(status, text(n), text(t), "hipError_t")
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &Api, status: Status, call: &'static str) -> gpuport_core::Error {
    gpuport_vendor_kit::status::vendor_error(api, status, call)
}
