//! `fvStatus` values (`fakevendor.h`), their names and descriptions, and the mapping from
//! the simulated machine's errors.

use gpuport_double_sim::faults::StatusTable;
use gpuport_double_sim::Error;

/// A raw `fvStatus`.
pub type FvStatus = u32;

gpuport_double_sim::statuses! {
    FvStatus;
    FV_SUCCESS = 0, "no error";
    FV_ERROR_INVALID_VALUE = 1, "invalid argument";
    FV_ERROR_OUT_OF_MEMORY = 2, "out of memory";
    FV_ERROR_NOT_INITIALIZED = 3, "the runtime is not initialized";
    FV_ERROR_NO_DEVICE = 100, "no fakevendor device";
    FV_ERROR_INVALID_DEVICE = 101, "invalid device ordinal";
    FV_ERROR_INVALID_IMAGE = 200, "the module image is invalid";
    FV_ERROR_INVALID_CONTEXT = 201, "no device is current";
    FV_ERROR_INVALID_HANDLE = 400, "invalid handle";
    FV_ERROR_NOT_FOUND = 500, "named symbol not found";
    FV_ERROR_NOT_READY = 600, "work is still pending";
    FV_ERROR_ILLEGAL_ADDRESS = 700, "an illegal memory access was encountered";
    FV_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704, "peer access is already enabled";
    FV_ERROR_PEER_ACCESS_NOT_ENABLED = 705, "peer access has not been enabled";
    FV_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712, "the host memory is already registered";
    FV_ERROR_HOST_MEMORY_NOT_REGISTERED = 713, "the host memory is not registered";
    FV_ERROR_LAUNCH_FAILURE = 719, "the kernel failed";
    FV_ERROR_NOT_PERMITTED = 800, "operation not permitted";
    FV_ERROR_NOT_SUPPORTED = 801, "operation not supported";
    FV_ERROR_UNKNOWN = 999, "unknown error";
}

/// The status for an error of the simulation.
pub fn code(e: Error) -> FvStatus {
    match e {
        Error::InvalidValue => FV_ERROR_INVALID_VALUE,
        Error::OutOfMemory => FV_ERROR_OUT_OF_MEMORY,
        Error::NotInitialized => FV_ERROR_NOT_INITIALIZED,
        Error::NoDevice => FV_ERROR_NO_DEVICE,
        Error::InvalidDevice => FV_ERROR_INVALID_DEVICE,
        Error::InvalidImage | Error::NoBinaryForGpu => FV_ERROR_INVALID_IMAGE,
        Error::InvalidContext => FV_ERROR_INVALID_CONTEXT,
        Error::InvalidHandle => FV_ERROR_INVALID_HANDLE,
        Error::NotFound => FV_ERROR_NOT_FOUND,
        Error::NotReady => FV_ERROR_NOT_READY,
        Error::PeerAccessAlreadyEnabled => FV_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        Error::PeerAccessNotEnabled => FV_ERROR_PEER_ACCESS_NOT_ENABLED,
        Error::HostMemoryAlreadyRegistered => FV_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        Error::HostMemoryNotRegistered => FV_ERROR_HOST_MEMORY_NOT_REGISTERED,
        Error::NotPermitted => FV_ERROR_NOT_PERMITTED,
        Error::NotSupported => FV_ERROR_NOT_SUPPORTED,
        Error::Raw(c) => c,
    }
}

/// Status names for fault injection (`OUT_OF_MEMORY`) and the sticky ones.
pub struct Table;

impl StatusTable for Table {
    fn code(&self, name: &str) -> Option<u32> {
        (0..1000u32).find(|&c| {
            self::name(c).is_some_and(|(n, _)| n.to_str().unwrap_or("").trim_start_matches("FV_ERROR_") == name)
        })
    }
    fn sticky(&self, code: u32) -> bool {
        matches!(code, FV_ERROR_ILLEGAL_ADDRESS | FV_ERROR_LAUNCH_FAILURE)
    }
}
