//! `CUresult` values, with the names and descriptions `cuGetErrorName` /
//! `cuGetErrorString` give (cuda.h, Error Handling).

use gpuport_double_sim::faults::StatusTable;
use gpuport_double_sim::Error;

/// A raw `CUresult`.
pub type CUresult = u32;

gpuport_double_sim::statuses! {
    CUresult;
    CUDA_SUCCESS = 0, "no error";
    CUDA_ERROR_INVALID_VALUE = 1, "invalid argument";
    CUDA_ERROR_OUT_OF_MEMORY = 2, "out of memory";
    CUDA_ERROR_NOT_INITIALIZED = 3, "initialization error";
    CUDA_ERROR_DEINITIALIZED = 4, "driver shutting down";
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46, "CUDA-capable device(s) is/are busy or unavailable";
    CUDA_ERROR_NO_DEVICE = 100, "no CUDA-capable device is detected";
    CUDA_ERROR_INVALID_DEVICE = 101, "invalid device ordinal";
    CUDA_ERROR_INVALID_IMAGE = 200, "device kernel image is invalid";
    CUDA_ERROR_INVALID_CONTEXT = 201, "invalid device context";
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209, "no kernel image is available for execution on the device";
    CUDA_ERROR_ECC_UNCORRECTABLE = 214, "uncorrectable ECC error encountered";
    CUDA_ERROR_INVALID_PTX = 218, "a PTX JIT compilation failed";
    CUDA_ERROR_INVALID_HANDLE = 400, "invalid resource handle";
    CUDA_ERROR_NOT_FOUND = 500, "named symbol not found";
    CUDA_ERROR_NOT_READY = 600, "device not ready";
    CUDA_ERROR_ILLEGAL_ADDRESS = 700, "an illegal memory access was encountered";
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701, "too many resources requested for launch";
    CUDA_ERROR_LAUNCH_TIMEOUT = 702, "the launch timed out and was terminated";
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704, "peer access is already enabled";
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705, "peer access has not been enabled";
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709, "context is destroyed";
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712, "part or all of the requested memory range is already mapped";
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713, "pointer does not correspond to a registered memory region";
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714, "an illegal memory access was encountered on the stack";
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715, "an illegal instruction was encountered";
    CUDA_ERROR_MISALIGNED_ADDRESS = 716, "misaligned address";
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717, "operation not supported on global/shared address space";
    CUDA_ERROR_INVALID_PC = 718, "invalid program counter";
    CUDA_ERROR_LAUNCH_FAILED = 719, "unspecified launch failure";
    CUDA_ERROR_NOT_PERMITTED = 800, "operation not permitted";
    CUDA_ERROR_NOT_SUPPORTED = 801, "operation not supported";
    CUDA_ERROR_UNKNOWN = 999, "unknown error";
}

/// The status for an error of the simulation.
pub fn code(e: Error) -> CUresult {
    match e {
        Error::InvalidValue => CUDA_ERROR_INVALID_VALUE,
        Error::OutOfMemory => CUDA_ERROR_OUT_OF_MEMORY,
        Error::NotInitialized => CUDA_ERROR_NOT_INITIALIZED,
        Error::NoDevice => CUDA_ERROR_NO_DEVICE,
        Error::InvalidDevice => CUDA_ERROR_INVALID_DEVICE,
        Error::InvalidImage => CUDA_ERROR_INVALID_IMAGE,
        Error::InvalidContext => CUDA_ERROR_INVALID_CONTEXT,
        Error::InvalidHandle => CUDA_ERROR_INVALID_HANDLE,
        Error::NotFound => CUDA_ERROR_NOT_FOUND,
        Error::NotReady => CUDA_ERROR_NOT_READY,
        Error::PeerAccessAlreadyEnabled => CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        Error::PeerAccessNotEnabled => CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        Error::HostMemoryAlreadyRegistered => CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        Error::HostMemoryNotRegistered => CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        Error::NotPermitted => CUDA_ERROR_NOT_PERMITTED,
        Error::NotSupported => CUDA_ERROR_NOT_SUPPORTED,
        Error::NoBinaryForGpu => CUDA_ERROR_NO_BINARY_FOR_GPU,
        Error::Raw(c) => c,
    }
}

/// Status names for fault injection (`OUT_OF_MEMORY`), and which poison the context: the
/// errors the Driver API marks as leaving the context unusable.
pub struct Table;

impl StatusTable for Table {
    fn code(&self, name: &str) -> Option<u32> {
        (0..1000u32).find(|&c| {
            self::name(c).is_some_and(|(n, _)| n.to_bytes().strip_prefix(b"CUDA_ERROR_") == Some(name.as_bytes()))
        })
    }
    fn sticky(&self, code: u32) -> bool {
        matches!(
            code,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ECC_UNCORRECTABLE
        )
    }
}
