//! `hipError_t` values (hip_runtime_api.h), with the names `hipGetErrorName` gives and the
//! descriptions `hipGetErrorString` gives — on ROCm 6; ROCm 5.2's `hipGetErrorString`
//! answers with the name again.

use gpuport_double_sim::faults::StatusTable;
use gpuport_double_sim::Error;

/// A raw `hipError_t`.
pub type HipError = u32;

gpuport_double_sim::statuses! {
    HipError;
    hipSuccess = 0, "no error";
    hipErrorInvalidValue = 1, "invalid argument";
    hipErrorOutOfMemory = 2, "out of memory";
    hipErrorNotInitialized = 3, "initialization error";
    hipErrorInvalidConfiguration = 9, "invalid configuration argument";
    hipErrorInvalidMemcpyDirection = 21, "invalid copy direction for memcpy";
    hipErrorNoDevice = 100, "no ROCm-capable device is detected";
    hipErrorInvalidDevice = 101, "invalid device ordinal";
    hipErrorInvalidImage = 200, "device kernel image is invalid";
    hipErrorInvalidContext = 201, "invalid device context";
    hipErrorNoBinaryForGpu = 209, "no kernel image is available for execution on the device";
    hipErrorInvalidHandle = 400, "invalid resource handle";
    hipErrorNotFound = 500, "named symbol not found";
    hipErrorNotReady = 600, "device not ready";
    hipErrorIllegalAddress = 700, "an illegal memory access was encountered";
    hipErrorLaunchOutOfResources = 701, "too many resources requested for launch";
    hipErrorPeerAccessAlreadyEnabled = 704, "peer access is already enabled";
    hipErrorPeerAccessNotEnabled = 705, "peer access has not been enabled";
    hipErrorHostMemoryAlreadyRegistered = 712, "part or all of the requested memory range is already mapped";
    hipErrorHostMemoryNotRegistered = 713, "pointer does not correspond to a registered memory region";
    hipErrorLaunchFailure = 719, "unspecified launch failure";
    hipErrorNotSupported = 801, "operation not supported";
    hipErrorUnknown = 999, "unknown error";
}

/// The status for an error of the simulation (`NotPermitted` has no HIP status of its
/// own: a call from a host function is refused as not supported).
pub fn code(e: Error) -> HipError {
    match e {
        Error::InvalidValue => hipErrorInvalidValue,
        Error::OutOfMemory => hipErrorOutOfMemory,
        Error::NotInitialized => hipErrorNotInitialized,
        Error::NoDevice => hipErrorNoDevice,
        Error::InvalidDevice => hipErrorInvalidDevice,
        Error::InvalidImage => hipErrorInvalidImage,
        Error::InvalidContext => hipErrorInvalidContext,
        Error::InvalidHandle => hipErrorInvalidHandle,
        Error::NotFound => hipErrorNotFound,
        Error::NotReady => hipErrorNotReady,
        Error::PeerAccessAlreadyEnabled => hipErrorPeerAccessAlreadyEnabled,
        Error::PeerAccessNotEnabled => hipErrorPeerAccessNotEnabled,
        Error::HostMemoryAlreadyRegistered => hipErrorHostMemoryAlreadyRegistered,
        Error::HostMemoryNotRegistered => hipErrorHostMemoryNotRegistered,
        Error::NotPermitted | Error::NotSupported => hipErrorNotSupported,
        Error::NoBinaryForGpu => hipErrorNoBinaryForGpu,
        Error::Raw(c) => c,
    }
}

/// Status names for fault injection (`OutOfMemory`, `OUT_OF_MEMORY`) and the sticky ones.
pub struct Table;

impl StatusTable for Table {
    fn code(&self, name: &str) -> Option<u32> {
        (0..1000u32).find(|&c| {
            self::name(c).is_some_and(|(n, _)| {
                let bare = n.to_str().unwrap_or("").trim_start_matches("hipError");
                gpuport_double_sim::faults::upper_snake(bare) == name
            })
        })
    }
    fn sticky(&self, code: u32) -> bool {
        matches!(code, hipErrorIllegalAddress | hipErrorLaunchFailure)
    }
}
