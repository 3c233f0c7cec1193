//! ABI cross-check: gpuport's own HIP declarations against hip-sys's bindgen output. A
//! unit test module, because the declarations are private to this crate. Needs the
//! `hip-sys` feature (links amdhip64, needs the ROCm headers):
//! `HIP_PATH=/usr cargo test -p gpuport-rocm --features hip-sys --lib abi_check`.

use std::mem::{offset_of, size_of};

use crate::sys;
use gpuport_core::{EventFlags, HostAllocFlags};
use hip_sys::hiprt as hip;

#[test]
fn error_codes_match() {
    for (ours, theirs) in [
        (sys::SUCCESS, hip::hipError_t::hipSuccess),
        (sys::ERROR_INVALID_VALUE, hip::hipError_t::hipErrorInvalidValue),
        (sys::ERROR_OUT_OF_MEMORY, hip::hipError_t::hipErrorOutOfMemory),
        (sys::ERROR_NO_DEVICE, hip::hipError_t::hipErrorNoDevice),
        (sys::ERROR_INVALID_DEVICE, hip::hipError_t::hipErrorInvalidDevice),
        (sys::ERROR_NOT_FOUND, hip::hipError_t::hipErrorNotFound),
        (sys::ERROR_NOT_READY, hip::hipError_t::hipErrorNotReady),
        (sys::ERROR_PEER_ACCESS_ALREADY_ENABLED, hip::hipError_t::hipErrorPeerAccessAlreadyEnabled),
    ] {
        assert_eq!(ours, theirs as u32, "{theirs:?}");
    }
}

#[test]
fn enum_values_match() {
    assert_eq!(sys::MEMCPY_DEFAULT, hip::hipMemcpyKind::hipMemcpyDefault as i32);
    for (ours, theirs) in [
        (sys::ATTR_COMPUTE_CAPABILITY_MAJOR, hip::hipDeviceAttribute_t::hipDeviceAttributeComputeCapabilityMajor),
        (sys::ATTR_COMPUTE_CAPABILITY_MINOR, hip::hipDeviceAttribute_t::hipDeviceAttributeComputeCapabilityMinor),
        (sys::ATTR_MULTIPROCESSOR_COUNT, hip::hipDeviceAttribute_t::hipDeviceAttributeMultiprocessorCount),
    ] {
        assert_eq!(ours, theirs as i32, "{theirs:?}");
    }
    // hip-sys's bindings are ROCm 5's hipMemoryType numbering.
    use sys::memory_type_v5 as v5;
    assert_eq!(v5::HOST, hip::hipMemoryType::hipMemoryTypeHost as i32);
    assert_eq!(v5::DEVICE, hip::hipMemoryType::hipMemoryTypeDevice as i32);
    assert_eq!(v5::ARRAY, hip::hipMemoryType::hipMemoryTypeArray as i32);
    assert_eq!(v5::UNIFIED, hip::hipMemoryType::hipMemoryTypeUnified as i32);
    assert_eq!(v5::MANAGED, hip::hipMemoryType::hipMemoryTypeManaged as i32);
}

#[test]
fn flag_bits_match() {
    assert_eq!(sys::STREAM_NON_BLOCKING, hip::hipStreamNonBlocking);
    assert_eq!(sys::MEM_ATTACH_GLOBAL, hip::hipMemAttachGlobal);
    assert_eq!(EventFlags::BLOCKING_SYNC.bits(), hip::hipEventBlockingSync);
    assert_eq!(EventFlags::DISABLE_TIMING.bits(), hip::hipEventDisableTiming);
    assert_eq!(EventFlags::INTERPROCESS.bits(), hip::hipEventInterprocess);
    assert_eq!(HostAllocFlags::PORTABLE.bits(), hip::hipHostMallocPortable);
    assert_eq!(HostAllocFlags::DEVICE_MAP.bits(), hip::hipHostMallocMapped);
    assert_eq!(HostAllocFlags::WRITE_COMBINED.bits(), hip::hipHostMallocWriteCombined);
    assert_eq!(sys::HOST_REGISTER_PORTABLE, hip::hipHostRegisterPortable);
}

#[test]
fn device_properties_layout_matches() {
    // hip-sys is generated from ROCm 5 headers: the layout `hipGetDeviceProperties` writes.
    assert_eq!(offset_of!(hip::hipDeviceProp_t, gcnArchName), sys::GCN_ARCH_NAME_OFFSET_R0000);
    assert!(size_of::<hip::hipDeviceProp_t>() <= sys::DEVICE_PROP_BUFFER);
}

#[test]
fn struct_layouts_match() {
    use hip::hipPointerAttribute_t as Theirs;
    use sys::hipPointerAttribute_t as Ours;
    assert_eq!(size_of::<Ours>(), size_of::<Theirs>());
    assert_eq!(offset_of!(Ours, memoryType), offset_of!(Theirs, memoryType));
    assert_eq!(offset_of!(Ours, device), offset_of!(Theirs, device));
    assert_eq!(offset_of!(Ours, devicePointer), offset_of!(Theirs, devicePointer));
    assert_eq!(offset_of!(Ours, hostPointer), offset_of!(Theirs, hostPointer));
    assert_eq!(offset_of!(Ours, isManaged), offset_of!(Theirs, isManaged));
    assert_eq!(offset_of!(Ours, allocationFlags), offset_of!(Theirs, allocationFlags));
    assert_eq!(size_of::<sys::hipUUID>(), size_of::<hip::hipUUID_t>());
}
