//! The `result` layer: every `hipError_t` checked, mapped to `gpuport_core::Error` with
//! `hipGetErrorName` / `hipGetErrorString`.

use gpuport_core::{DeviceId, Error, Result};

use crate::sys::{self, Api, Status};

/// Something that can name a status: the loaded runtime, or a stub in tests.
pub trait Names {
    /// The status's name and description.
    fn describe(&self, status: Status) -> (String, String);
}

impl Names for Api {
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
    names(status, text(n), text(t))
}

/// Fallbacks for a status the runtime could not name.
pub fn names(status: Status, name: Option<String>, text: Option<String>) -> (String, String) {
    (name.unwrap_or_else(|| format!("hipError_t({status})")), text.unwrap_or_else(|| "unknown HIP error".to_owned()))
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &impl Names, status: Status, call: &'static str) -> Error {
    let (name, message) = api.describe(status);
    Error::Vendor { backend: "rocm", call, code: i64::from(status), name, message }
}

/// `Ok` on success, else the vendor error.
pub fn check(api: &impl Names, status: Status, call: &'static str) -> Result<()> {
    if status == sys::SUCCESS {
        Ok(())
    } else {
        Err(vendor(api, status, call))
    }
}

/// For allocations: out-of-memory (and sizes rejected as invalid because no device could
/// ever give them) become `OutOfMemory`.
pub fn check_alloc(api: &impl Names, status: Status, call: &'static str, device: DeviceId, bytes: usize) -> Result<()> {
    match status {
        sys::SUCCESS => Ok(()),
        sys::ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory { device, bytes }),
        sys::ERROR_INVALID_VALUE if bytes > isize::MAX as usize => Err(Error::OutOfMemory { device, bytes }),
        _ => Err(vendor(api, status, call)),
    }
}

/// For queries: `Ok(true)` when done, `Ok(false)` for `hipErrorNotReady`.
pub fn check_ready(api: &impl Names, status: Status, call: &'static str) -> Result<bool> {
    match status {
        sys::SUCCESS => Ok(true),
        sys::ERROR_NOT_READY => Ok(false),
        _ => Err(vendor(api, status, call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuport_core::BackendKind;

    struct Stub;
    impl Names for Stub {
        fn describe(&self, status: Status) -> (String, String) {
            names(status, (status == 1).then(|| "hipErrorInvalidValue".into()), None)
        }
    }

    #[test]
    fn statuses_map_to_errors() {
        let dev = DeviceId::new(BackendKind::Rocm, 0);
        assert!(check(&Stub, sys::SUCCESS, "hipX").is_ok());
        assert!(matches!(
            check(&Stub, 1, "hipMemcpyAsync"),
            Err(Error::Vendor { backend: "rocm", call: "hipMemcpyAsync", code: 1, ref name, .. }) if name == "hipErrorInvalidValue"
        ));
        assert!(matches!(check_alloc(&Stub, 2, "hipMalloc", dev, 64), Err(Error::OutOfMemory { bytes: 64, .. })));
        assert!(matches!(check_alloc(&Stub, 1, "hipMalloc", dev, usize::MAX), Err(Error::OutOfMemory { .. })));
        assert!(check_ready(&Stub, sys::SUCCESS, "hipStreamQuery").unwrap());
        assert!(!check_ready(&Stub, sys::ERROR_NOT_READY, "hipStreamQuery").unwrap());
        assert!(check(&Stub, 4242, "hipInit").unwrap_err().to_string().contains("hipError_t(4242)"));
    }
}
