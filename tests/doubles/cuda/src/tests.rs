//! The double's ABI against cudarc's bindgen output of cuda.h: struct layouts, status
//! codes, attribute numbers and special handles.

use std::mem::{offset_of, size_of};

use cudarc::driver::sys;

use super::*;

#[test]
fn structs_match_cuda_h() {
    assert_eq!(size_of::<CUuuid>(), size_of::<sys::CUuuid>());
    assert_eq!(offset_of!(CUuuid, bytes), offset_of!(sys::CUuuid, bytes));
    assert_eq!(size_of::<CUdeviceptr>(), size_of::<sys::CUdeviceptr>());
    assert_eq!(size_of::<CUdevice>(), size_of::<sys::CUdevice>());
}

#[test]
fn status_codes_match_cuda_h() {
    use sys::cudaError_enum as E;
    for (ours, theirs) in [
        (CUDA_ERROR_INVALID_VALUE, E::CUDA_ERROR_INVALID_VALUE),
        (CUDA_ERROR_OUT_OF_MEMORY, E::CUDA_ERROR_OUT_OF_MEMORY),
        (CUDA_ERROR_NOT_INITIALIZED, E::CUDA_ERROR_NOT_INITIALIZED),
        (CUDA_ERROR_DEVICE_UNAVAILABLE, E::CUDA_ERROR_DEVICE_UNAVAILABLE),
        (CUDA_ERROR_NO_DEVICE, E::CUDA_ERROR_NO_DEVICE),
        (CUDA_ERROR_INVALID_DEVICE, E::CUDA_ERROR_INVALID_DEVICE),
        (CUDA_ERROR_INVALID_IMAGE, E::CUDA_ERROR_INVALID_IMAGE),
        (CUDA_ERROR_INVALID_CONTEXT, E::CUDA_ERROR_INVALID_CONTEXT),
        (CUDA_ERROR_NO_BINARY_FOR_GPU, E::CUDA_ERROR_NO_BINARY_FOR_GPU),
        (CUDA_ERROR_ECC_UNCORRECTABLE, E::CUDA_ERROR_ECC_UNCORRECTABLE),
        (CUDA_ERROR_INVALID_PTX, E::CUDA_ERROR_INVALID_PTX),
        (CUDA_ERROR_INVALID_HANDLE, E::CUDA_ERROR_INVALID_HANDLE),
        (CUDA_ERROR_NOT_FOUND, E::CUDA_ERROR_NOT_FOUND),
        (CUDA_ERROR_NOT_READY, E::CUDA_ERROR_NOT_READY),
        (CUDA_ERROR_ILLEGAL_ADDRESS, E::CUDA_ERROR_ILLEGAL_ADDRESS),
        (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, E::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        (CUDA_ERROR_LAUNCH_TIMEOUT, E::CUDA_ERROR_LAUNCH_TIMEOUT),
        (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, E::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED),
        (CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, E::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED),
        (CUDA_ERROR_CONTEXT_IS_DESTROYED, E::CUDA_ERROR_CONTEXT_IS_DESTROYED),
        (CUDA_ERROR_HARDWARE_STACK_ERROR, E::CUDA_ERROR_HARDWARE_STACK_ERROR),
        (CUDA_ERROR_ILLEGAL_INSTRUCTION, E::CUDA_ERROR_ILLEGAL_INSTRUCTION),
        (CUDA_ERROR_MISALIGNED_ADDRESS, E::CUDA_ERROR_MISALIGNED_ADDRESS),
        (CUDA_ERROR_INVALID_ADDRESS_SPACE, E::CUDA_ERROR_INVALID_ADDRESS_SPACE),
        (CUDA_ERROR_INVALID_PC, E::CUDA_ERROR_INVALID_PC),
        (CUDA_ERROR_LAUNCH_FAILED, E::CUDA_ERROR_LAUNCH_FAILED),
        (CUDA_ERROR_NOT_PERMITTED, E::CUDA_ERROR_NOT_PERMITTED),
        (CUDA_ERROR_NOT_SUPPORTED, E::CUDA_ERROR_NOT_SUPPORTED),
        (CUDA_ERROR_UNKNOWN, E::CUDA_ERROR_UNKNOWN),
    ] {
        assert_eq!(ours, theirs as u32, "{theirs:?}");
        let (name, _) = status::name(ours).expect("named");
        assert_eq!(name.to_str().unwrap(), format!("{theirs:?}"), "the name cuGetErrorName gives");
    }
}

#[test]
fn attribute_numbers_match_cuda_h() {
    use sys::CUdevice_attribute_enum as A;
    use sys::CUpointer_attribute_enum as P;
    for (ours, theirs) in [
        (attribute::MAX_THREADS_PER_BLOCK, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK as i32),
        (attribute::WARP_SIZE, A::CU_DEVICE_ATTRIBUTE_WARP_SIZE as i32),
        (attribute::MULTIPROCESSOR_COUNT, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT as i32),
        (attribute::CAN_MAP_HOST_MEMORY, A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY as i32),
        (attribute::PCI_BUS_ID, A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID as i32),
        (attribute::PCI_DEVICE_ID, A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID as i32),
        (attribute::UNIFIED_ADDRESSING, A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING as i32),
        (attribute::PCI_DOMAIN_ID, A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID as i32),
        (attribute::COMPUTE_CAPABILITY_MAJOR, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR as i32),
        (attribute::COMPUTE_CAPABILITY_MINOR, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR as i32),
        (attribute::MANAGED_MEMORY, A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY as i32),
        (attribute::CONCURRENT_MANAGED_ACCESS, A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS as i32),
        (attribute::MEMORY_POOLS_SUPPORTED, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED as i32),
        (pointer::CONTEXT, P::CU_POINTER_ATTRIBUTE_CONTEXT as i32),
        (pointer::MEMORY_TYPE, P::CU_POINTER_ATTRIBUTE_MEMORY_TYPE as i32),
        (pointer::DEVICE_POINTER, P::CU_POINTER_ATTRIBUTE_DEVICE_POINTER as i32),
        (pointer::HOST_POINTER, P::CU_POINTER_ATTRIBUTE_HOST_POINTER as i32),
        (pointer::IS_MANAGED, P::CU_POINTER_ATTRIBUTE_IS_MANAGED as i32),
        (pointer::DEVICE_ORDINAL, P::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as i32),
        (pointer::RANGE_START_ADDR, P::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR as i32),
        (pointer::RANGE_SIZE, P::CU_POINTER_ATTRIBUTE_RANGE_SIZE as i32),
    ] {
        assert_eq!(ours, theirs);
    }
    assert_eq!(pointer::MEMORYTYPE_HOST, sys::CUmemorytype_enum::CU_MEMORYTYPE_HOST as u32);
    assert_eq!(pointer::MEMORYTYPE_DEVICE, sys::CUmemorytype_enum::CU_MEMORYTYPE_DEVICE as u32);
}

#[test]
fn error_names_answer_as_documented() {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cuGetErrorName(CUDA_ERROR_NOT_READY, &mut p) }, CUDA_SUCCESS);
    // SAFETY: the driver's static string.
    assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "CUDA_ERROR_NOT_READY");
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { cuGetErrorString(12345, &mut p) }, CUDA_ERROR_INVALID_VALUE);
    assert!(p.is_null(), "an unknown status leaves NULL");
}
