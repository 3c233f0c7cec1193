//! Mapping raw vendor status codes to [`Error`]. HIP mirrors CUDA's numbering for the codes
//! used here, so one table serves both; each backend supplies its name and how to name a
//! status.

use gpuport_core::{BackendKind, DeviceId, Error, Result};

/// `CUDA_SUCCESS` / `hipSuccess`.
pub const SUCCESS: u32 = 0;
/// `…_INVALID_VALUE`.
pub const INVALID_VALUE: u32 = 1;
/// `…_OUT_OF_MEMORY`.
pub const OUT_OF_MEMORY: u32 = 2;
/// `…_NOT_READY`.
pub const NOT_READY: u32 = 600;

/// A vendor runtime that can name its status codes.
pub trait StatusNames {
    /// The backend name used in errors (`cuda`, `rocm`).
    const BACKEND: BackendKind;
    /// The status's name and description, in the vendor's words.
    fn describe(&self, status: u32) -> (String, String);
}

/// Fallbacks for a status the runtime could not name.
pub fn fallback_names(status: u32, name: Option<String>, text: Option<String>, kind: &str) -> (String, String) {
    (name.unwrap_or_else(|| format!("{kind}({status})")), text.unwrap_or_else(|| "unknown error".to_owned()))
}

/// The words for a "no device" reason: the status's name and description (once, when the
/// runtime describes a status by its name alone, as HIP 5 does) and the runtime version:
/// `hipErrorNoDevice: no ROCm-capable device is detected; runtime 5.2.21153`.
pub fn no_device_detail<N: StatusNames>(names: &N, status: u32, version: &str) -> String {
    let (name, message) = names.describe(status);
    if message.is_empty() || message == name {
        format!("{name}; {version}")
    } else {
        format!("{name}: {message}; {version}")
    }
}

/// A `Vendor` error for a failed call.
pub fn vendor_error<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Error {
    let (name, message) = names.describe(status);
    Error::Vendor { backend: N::BACKEND, call, code: i64::from(status), name, message }
}

/// `Ok` on success, else the vendor error.
pub fn check<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Result<()> {
    if status == SUCCESS {
        Ok(())
    } else {
        Err(vendor_error(names, status, call))
    }
}

/// For allocations: out-of-memory (and sizes rejected as invalid because no device could
/// ever give them) become `OutOfMemory`.
pub fn check_alloc<N: StatusNames>(
    names: &N,
    status: u32,
    call: &'static str,
    device: DeviceId,
    bytes: usize,
) -> Result<()> {
    match status {
        SUCCESS => Ok(()),
        OUT_OF_MEMORY => Err(Error::OutOfMemory { device, bytes }),
        INVALID_VALUE if bytes > isize::MAX as usize => Err(Error::OutOfMemory { device, bytes }),
        _ => Err(vendor_error(names, status, call)),
    }
}

/// For queries: `Ok(true)` when done, `Ok(false)` for not-ready.
pub fn check_ready<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Result<bool> {
    match status {
        SUCCESS => Ok(true),
        NOT_READY => Ok(false),
        _ => Err(vendor_error(names, status, call)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuport_core::BackendKind;

    struct Stub;
    impl StatusNames for Stub {
        const BACKEND: BackendKind = BackendKind::Plugin("stub");
        fn describe(&self, status: u32) -> (String, String) {
            fallback_names(status, (status == 1).then(|| "ERROR_INVALID_VALUE".into()), None, "Status")
        }
    }

    #[test]
    fn statuses_map_to_errors() {
        let dev = DeviceId::new(BackendKind::Cuda, 0);
        assert!(check(&Stub, SUCCESS, "x").is_ok());
        assert!(matches!(
            check(&Stub, 1, "copy"),
            Err(Error::Vendor { backend: BackendKind::Plugin("stub"), call: "copy", code: 1, ref name, .. }) if name == "ERROR_INVALID_VALUE"
        ));
        assert!(matches!(check_alloc(&Stub, 2, "alloc", dev, 64), Err(Error::OutOfMemory { bytes: 64, .. })));
        assert!(matches!(check_alloc(&Stub, 1, "alloc", dev, usize::MAX), Err(Error::OutOfMemory { .. })));
        assert!(matches!(check_alloc(&Stub, 1, "alloc", dev, 64), Err(Error::Vendor { .. })));
        assert!(check_ready(&Stub, SUCCESS, "q").unwrap());
        assert!(!check_ready(&Stub, NOT_READY, "q").unwrap());
        assert!(check_ready(&Stub, 700, "q").is_err());
        assert!(check(&Stub, 4242, "init").unwrap_err().to_string().contains("Status(4242)"));
    }
}
