//! The two layouts of `hipDeviceProp_t`, as the headers declare them: ROCm 5's
//! (`hipGetDeviceProperties`, and the unversioned export of ROCm 6) and ROCm 6's
//! `hipDeviceProp_tR0600` (`hipGetDevicePropertiesR0600`). Runs of fields the double does
//! not fill are arrays of the same size, with the fields they stand for named.

#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint};

/// ROCm 5's `hipDeviceProp_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipDeviceProp_tR0000 {
    /// `name`.
    pub name: [c_char; 256],
    /// `totalGlobalMem`.
    pub totalGlobalMem: usize,
    /// `sharedMemPerBlock`.
    pub sharedMemPerBlock: usize,
    /// `regsPerBlock`.
    pub regsPerBlock: c_int,
    /// `warpSize`.
    pub warpSize: c_int,
    /// `maxThreadsPerBlock`.
    pub maxThreadsPerBlock: c_int,
    /// `maxThreadsDim`.
    pub maxThreadsDim: [c_int; 3],
    /// `maxGridSize`.
    pub maxGridSize: [c_int; 3],
    /// `clockRate`, `memoryClockRate`, `memoryBusWidth`.
    pub clocks: [c_int; 3],
    /// `totalConstMem`.
    pub totalConstMem: usize,
    /// `major`.
    pub major: c_int,
    /// `minor`.
    pub minor: c_int,
    /// `multiProcessorCount`.
    pub multiProcessorCount: c_int,
    /// `l2CacheSize`, `maxThreadsPerMultiProcessor`, `computeMode`,
    /// `clockInstructionRate`, `arch` (a 32-bit bit field), `concurrentKernels`.
    pub misc: [c_int; 6],
    /// `pciDomainID`.
    pub pciDomainID: c_int,
    /// `pciBusID`.
    pub pciBusID: c_int,
    /// `pciDeviceID`.
    pub pciDeviceID: c_int,
    /// `maxSharedMemoryPerMultiProcessor`.
    pub maxSharedMemoryPerMultiProcessor: usize,
    /// `isMultiGpuBoard`, `canMapHostMemory`, `gcnArch`.
    pub board: [c_int; 3],
    /// `gcnArchName`.
    pub gcnArchName: [c_char; 256],
    /// `integrated`, `cooperativeLaunch`, `cooperativeMultiDeviceLaunch`,
    /// `maxTexture1DLinear`, `maxTexture1D`, `maxTexture2D[2]`, `maxTexture3D[3]`.
    pub textures: [c_int; 10],
    /// `hdpMemFlushCntl`, `hdpRegFlushCntl`.
    pub hdp: [*mut c_uint; 2],
    /// `memPitch`, `textureAlignment`, `texturePitchAlignment`.
    pub pitches: [usize; 3],
    /// `kernelExecTimeoutEnabled`, `ECCEnabled`, `tccDriver`, the four
    /// `cooperativeMultiDeviceUnmatched*`, `isLargeBar`, `asicRevision`, `managedMemory`,
    /// `directManagedMemAccessFromHost`, `concurrentManagedAccess`, `pageableMemoryAccess`,
    /// `pageableMemoryAccessUsesHostPageTables`.
    pub tail: [c_int; 14],
}

/// ROCm 6's `hipDeviceProp_tR0600`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipDeviceProp_tR0600 {
    /// `name`.
    pub name: [c_char; 256],
    /// `uuid` (`hipUUID`).
    pub uuid: [c_char; 16],
    /// `luid`.
    pub luid: [c_char; 8],
    /// `luidDeviceNodeMask`.
    pub luidDeviceNodeMask: c_uint,
    /// `totalGlobalMem`.
    pub totalGlobalMem: usize,
    /// `sharedMemPerBlock`.
    pub sharedMemPerBlock: usize,
    /// `regsPerBlock`.
    pub regsPerBlock: c_int,
    /// `warpSize`.
    pub warpSize: c_int,
    /// `memPitch`.
    pub memPitch: usize,
    /// `maxThreadsPerBlock`.
    pub maxThreadsPerBlock: c_int,
    /// `maxThreadsDim`.
    pub maxThreadsDim: [c_int; 3],
    /// `maxGridSize`.
    pub maxGridSize: [c_int; 3],
    /// `clockRate`.
    pub clockRate: c_int,
    /// `totalConstMem`.
    pub totalConstMem: usize,
    /// `major`.
    pub major: c_int,
    /// `minor`.
    pub minor: c_int,
    /// `textureAlignment`.
    pub textureAlignment: usize,
    /// `texturePitchAlignment`.
    pub texturePitchAlignment: usize,
    /// `deviceOverlap`.
    pub deviceOverlap: c_int,
    /// `multiProcessorCount`.
    pub multiProcessorCount: c_int,
    /// `kernelExecTimeoutEnabled`, `integrated`, `canMapHostMemory`, `computeMode`, then
    /// the texture and surface limits (`maxTexture1D` … `maxSurfaceCubemapLayered[2]`).
    pub textures_and_surfaces: [c_int; 44],
    /// `surfaceAlignment`.
    pub surfaceAlignment: usize,
    /// `concurrentKernels`.
    pub concurrentKernels: c_int,
    /// `ECCEnabled`.
    pub ECCEnabled: c_int,
    /// `pciBusID`.
    pub pciBusID: c_int,
    /// `pciDeviceID`.
    pub pciDeviceID: c_int,
    /// `pciDomainID`.
    pub pciDomainID: c_int,
    /// `tccDriver`, `asyncEngineCount`, `unifiedAddressing`, `memoryClockRate`,
    /// `memoryBusWidth`, `l2CacheSize`, `persistingL2CacheMaxSize`,
    /// `maxThreadsPerMultiProcessor`, `streamPrioritiesSupported`,
    /// `globalL1CacheSupported`, `localL1CacheSupported`.
    pub caches: [c_int; 11],
    /// `sharedMemPerMultiprocessor`.
    pub sharedMemPerMultiprocessor: usize,
    /// `regsPerMultiprocessor` … `cooperativeMultiDeviceLaunch` (12 ints).
    pub features: [c_int; 12],
    /// `sharedMemPerBlockOptin`.
    pub sharedMemPerBlockOptin: usize,
    /// `pageableMemoryAccessUsesHostPageTables`, `directManagedMemAccessFromHost`,
    /// `maxBlocksPerMultiProcessor`, `accessPolicyMaxWindowSize`.
    pub access: [c_int; 4],
    /// `reservedSharedMemPerBlock`.
    pub reservedSharedMemPerBlock: usize,
    /// `hostRegisterSupported` … `unifiedFunctionPointers` (13 ints and flag words).
    pub newer: [c_int; 13],
    /// `reserved[63]`.
    pub reserved: [c_int; 63],
    /// `hipReserved[32]`.
    pub hipReserved: [c_int; 32],
    /// `gcnArchName`.
    pub gcnArchName: [c_char; 256],
    /// `maxSharedMemoryPerMultiProcessor`.
    pub maxSharedMemoryPerMultiProcessor: usize,
    /// `clockInstructionRate`, `arch` (a 32-bit bit field).
    pub clock_and_arch: [c_int; 2],
    /// `hdpMemFlushCntl`, `hdpRegFlushCntl`.
    pub hdp: [*mut c_uint; 2],
    /// The four `cooperativeMultiDeviceUnmatched*`, `isLargeBar`, `asicRevision`.
    pub tail: [c_int; 6],
}

/// A value with every field zero (both structs are plain data; null pointers).
pub fn zeroed<T: Copy>() -> T {
    // SAFETY: only used for the two structs above, whose fields are integers, arrays of
    // them and raw pointers: all-zero bytes are a valid value of each.
    unsafe { std::mem::zeroed() }
}

/// Copies `text` into a fixed `char` array, NUL-terminated.
pub fn text<const N: usize>(text: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(text.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_are_the_headers() {
        // ROCm 6: gcnArchName after the CUDA-compatible block and the reserved words.
        assert_eq!(offset_of!(hipDeviceProp_tR0600, totalGlobalMem), 288);
        assert_eq!(offset_of!(hipDeviceProp_tR0600, multiProcessorCount), 388);
        assert_eq!(offset_of!(hipDeviceProp_tR0600, pciBusID), 584);
        assert_eq!(offset_of!(hipDeviceProp_tR0600, gcnArchName), 1160);
        assert_eq!(size_of::<hipDeviceProp_tR0600>(), 1472);
        // ROCm 5.
        assert_eq!(offset_of!(hipDeviceProp_tR0000, totalConstMem), 320);
        assert_eq!(offset_of!(hipDeviceProp_tR0000, multiProcessorCount), 336);
        assert_eq!(offset_of!(hipDeviceProp_tR0000, pciBusID), 368);
        assert_eq!(offset_of!(hipDeviceProp_tR0000, gcnArchName), 396);
    }

    #[cfg(feature = "hip-sys")]
    #[test]
    fn rocm5_layout_matches_hip_sys() {
        use hip_sys::hiprt::hipDeviceProp_t as Theirs;
        assert_eq!(offset_of!(hipDeviceProp_tR0000, name), offset_of!(Theirs, name));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, totalGlobalMem), offset_of!(Theirs, totalGlobalMem));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, major), offset_of!(Theirs, major));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, minor), offset_of!(Theirs, minor));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, multiProcessorCount), offset_of!(Theirs, multiProcessorCount));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, pciBusID), offset_of!(Theirs, pciBusID));
        assert_eq!(offset_of!(hipDeviceProp_tR0000, gcnArchName), offset_of!(Theirs, gcnArchName));
        assert!(size_of::<hipDeviceProp_tR0000>() <= size_of::<Theirs>(), "the double writes past the struct");
    }
}

/// The rest of the double's ABI against hip-sys's bindgen output of the ROCm 5 headers.
#[cfg(all(test, feature = "hip-sys"))]
mod abi_check {
    use hip_sys::hiprt as hip;
    use std::mem::{offset_of, size_of};

    #[test]
    fn pointer_attributes_and_uuid_match() {
        use crate::hipPointerAttribute_t as Ours;
        use hip::hipPointerAttribute_t as Theirs;
        assert_eq!(size_of::<Ours>(), size_of::<Theirs>());
        assert_eq!(offset_of!(Ours, memoryType), offset_of!(Theirs, memoryType));
        assert_eq!(offset_of!(Ours, device), offset_of!(Theirs, device));
        assert_eq!(offset_of!(Ours, devicePointer), offset_of!(Theirs, devicePointer));
        assert_eq!(offset_of!(Ours, hostPointer), offset_of!(Theirs, hostPointer));
        assert_eq!(offset_of!(Ours, isManaged), offset_of!(Theirs, isManaged));
        assert_eq!(offset_of!(Ours, allocationFlags), offset_of!(Theirs, allocationFlags));
        assert_eq!(size_of::<crate::hipUUID>(), size_of::<hip::hipUUID_t>());
    }

    #[test]
    fn attributes_and_statuses_match() {
        use crate::attribute::*;
        use hip::hipDeviceAttribute_t as A;
        for (ours, theirs) in [
            (COMPUTE_CAPABILITY_MAJOR, A::hipDeviceAttributeComputeCapabilityMajor),
            (MANAGED_MEMORY, A::hipDeviceAttributeManagedMemory),
            (MAX_THREADS_PER_BLOCK, A::hipDeviceAttributeMaxThreadsPerBlock),
            (COMPUTE_CAPABILITY_MINOR, A::hipDeviceAttributeComputeCapabilityMinor),
            (MULTIPROCESSOR_COUNT, A::hipDeviceAttributeMultiprocessorCount),
            (PCI_BUS_ID, A::hipDeviceAttributePciBusId),
            (UNIFIED_ADDRESSING, A::hipDeviceAttributeUnifiedAddressing),
            (WARP_SIZE, A::hipDeviceAttributeWarpSize),
        ] {
            assert_eq!(ours, theirs as i32, "{theirs:?}");
        }
        use crate::status::*;
        use hip::hipError_t as E;
        for (ours, theirs) in [
            (hipErrorInvalidValue, E::hipErrorInvalidValue),
            (hipErrorOutOfMemory, E::hipErrorOutOfMemory),
            (hipErrorNotInitialized, E::hipErrorNotInitialized),
            (hipErrorInvalidMemcpyDirection, E::hipErrorInvalidMemcpyDirection),
            (hipErrorNoDevice, E::hipErrorNoDevice),
            (hipErrorInvalidDevice, E::hipErrorInvalidDevice),
            (hipErrorInvalidImage, E::hipErrorInvalidImage),
            (hipErrorInvalidContext, E::hipErrorInvalidContext),
            (hipErrorNoBinaryForGpu, E::hipErrorNoBinaryForGpu),
            (hipErrorInvalidHandle, E::hipErrorInvalidHandle),
            (hipErrorNotFound, E::hipErrorNotFound),
            (hipErrorNotReady, E::hipErrorNotReady),
            (hipErrorIllegalAddress, E::hipErrorIllegalAddress),
            (hipErrorLaunchOutOfResources, E::hipErrorLaunchOutOfResources),
            (hipErrorPeerAccessAlreadyEnabled, E::hipErrorPeerAccessAlreadyEnabled),
            (hipErrorPeerAccessNotEnabled, E::hipErrorPeerAccessNotEnabled),
            (hipErrorLaunchFailure, E::hipErrorLaunchFailure),
            (hipErrorNotSupported, E::hipErrorNotSupported),
            (hipErrorUnknown, E::hipErrorUnknown),
        ] {
            assert_eq!(ours, theirs as u32, "{theirs:?}");
        }
    }
}
