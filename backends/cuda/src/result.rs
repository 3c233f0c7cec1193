//! The `result` layer: every driver status checked (the mapping itself is shared, in
//! `gpuport_driver::status`), named with the driver's `cuGetErrorName` / `cuGetErrorString`.

pub use gpuport_driver::status::{check, check_alloc, check_ready, StatusNames};

use crate::sys::{self, Api, Status};

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
