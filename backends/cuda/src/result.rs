//! The `result` layer: every driver status checked, mapped to `gpuport_core::Error` with
//! the driver's own error name and description.

use gpuport_core::{DeviceId, Error, Result};

use crate::sys::{self, Api, Status};

/// Something that can name a status: the loaded driver, or a stub in tests.
pub trait Names {
    /// The status's name and description.
    fn describe(&self, status: Status) -> (String, String);
}

impl Names for Api {
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
    names(status, n, t)
}

/// Fallbacks for a status the driver could not name.
pub fn names(status: Status, name: Option<String>, text: Option<String>) -> (String, String) {
    (name.unwrap_or_else(|| format!("CUresult({status})")), text.unwrap_or_else(|| "unknown CUDA error".to_owned()))
}

/// A `Vendor` error for a failed call.
pub fn vendor(api: &impl Names, status: Status, call: &'static str) -> Error {
    let (name, message) = api.describe(status);
    Error::Vendor { backend: "cuda", call, code: i64::from(status), name, message }
}

/// `Ok` on success, else the vendor error.
pub fn check(api: &impl Names, status: Status, call: &'static str) -> Result<()> {
    if status == sys::SUCCESS {
        Ok(())
    } else {
        Err(vendor(api, status, call))
    }
}

/// For allocations: out-of-memory (and sizes the driver rejects as invalid because they
/// exceed what it can ever give) become `OutOfMemory`.
pub fn check_alloc(api: &impl Names, status: Status, call: &'static str, device: DeviceId, bytes: usize) -> Result<()> {
    match status {
        sys::SUCCESS => Ok(()),
        sys::ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory { device, bytes }),
        sys::ERROR_INVALID_VALUE if bytes > isize::MAX as usize => Err(Error::OutOfMemory { device, bytes }),
        _ => Err(vendor(api, status, call)),
    }
}

/// For queries: `Ok(true)` when done, `Ok(false)` for `CUDA_ERROR_NOT_READY`.
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
            names(status, (status == 1).then(|| "CUDA_ERROR_INVALID_VALUE".into()), None)
        }
    }

    #[test]
    fn statuses_map_to_errors() {
        let dev = DeviceId::new(BackendKind::Cuda, 0);
        assert!(check(&Stub, sys::SUCCESS, "cuX").is_ok());
        match check(&Stub, 1, "cuMemcpyAsync") {
            Err(Error::Vendor { backend: "cuda", call: "cuMemcpyAsync", code: 1, name, .. }) => {
                assert_eq!(name, "CUDA_ERROR_INVALID_VALUE")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(check_alloc(&Stub, 2, "cuMemAlloc", dev, 64), Err(Error::OutOfMemory { bytes: 64, .. })));
        assert!(matches!(check_alloc(&Stub, 1, "cuMemAlloc", dev, usize::MAX), Err(Error::OutOfMemory { .. })));
        assert!(matches!(check_alloc(&Stub, 1, "cuMemAlloc", dev, 64), Err(Error::Vendor { .. })));
        assert!(check_ready(&Stub, sys::SUCCESS, "cuStreamQuery").unwrap());
        assert!(!check_ready(&Stub, sys::ERROR_NOT_READY, "cuStreamQuery").unwrap());
        assert!(check_ready(&Stub, 700, "cuStreamQuery").is_err());
        let msg = check(&Stub, 12345, "cuInit").unwrap_err().to_string();
        assert!(msg.contains("CUresult(12345)") && msg.contains("cuInit"), "{msg}");
    }

    #[test]
    fn unnamed_statuses_get_a_generic_rendering() {
        assert_eq!(names(999, None, None), ("CUresult(999)".to_owned(), "unknown CUDA error".to_owned()));
        assert_eq!(
            names(2, Some("CUDA_ERROR_OUT_OF_MEMORY".into()), Some("out of memory".into())),
            ("CUDA_ERROR_OUT_OF_MEMORY".to_owned(), "out of memory".to_owned())
        );
    }
}
