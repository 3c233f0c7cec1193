//! The `sys` layer: gpuport's own table of CUDA driver entry points, with cudarc's ABI
//! types and constants. Statuses are taken as raw `u32` (not cudarc's `CUresult` enum): a
//! newer driver may return a code the enum does not list, and receiving that through a Rust
//! enum would be undefined behaviour. Enum arguments are passed as `c_int`.
//!
//! Every required symbol is resolved once, at load, through `cuGetProcAddress` (the
//! versioned lookup) where the driver has it, else with `dlsym` under the versioned export
//! name (`cuMemAlloc_v2`). Optional symbols resolve lazily, once.
//!
//! Only C function *types* gpuport calls are declared here; no Rust function is exported to
//! C. The callbacks gpuport hands the runtime live in `stream.rs` and run inside
//! `catch_unwind`, so no panic unwinds into C.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

pub use cudarc::driver::sys::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction, CUhostFn, CUmodule, CUpointer_attribute,
    CUstream, CUuuid,
};
use libloading::Library;

/// A raw `CUresult`.
pub type Status = u32;

/// `CUDA_SUCCESS`.
pub const SUCCESS: Status = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
pub const ERROR_INVALID_VALUE: Status = 1;
/// `CUDA_ERROR_NO_DEVICE`.
pub const ERROR_NO_DEVICE: Status = 100;
/// `CUDA_ERROR_INVALID_DEVICE`.
pub const ERROR_INVALID_DEVICE: Status = 101;
/// `CUDA_ERROR_NOT_FOUND`.
pub const ERROR_NOT_FOUND: Status = 500;
/// `CUDA_ERROR_NOT_READY`.
pub const ERROR_NOT_READY: Status = 600;
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
pub const ERROR_PEER_ACCESS_ALREADY_ENABLED: Status = 704;
/// `CUDA_ERROR_NOT_SUPPORTED` (e.g. `cuMemAllocAsync` on a device without memory pools).
pub const ERROR_NOT_SUPPORTED: Status = 801;

/// `CU_STREAM_LEGACY`: the legacy default stream handle.
pub const STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream handle.
pub const STREAM_PER_THREAD: usize = 0x2;
/// `CU_STREAM_NON_BLOCKING`.
pub const STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CU_MEM_ATTACH_GLOBAL`.
pub const MEM_ATTACH_GLOBAL: c_uint = 0x1;
/// `CU_MEMHOSTREGISTER_PORTABLE`: the registration serves every context of the process.
pub const MEMHOSTREGISTER_PORTABLE: c_uint = 0x1;

/// `CU_MEMORYTYPE_HOST`.
pub const MEMORYTYPE_HOST: c_uint = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const MEMORYTYPE_DEVICE: c_uint = 2;
/// `CU_MEMORYTYPE_ARRAY`.
pub const MEMORYTYPE_ARRAY: c_uint = 3;
/// `CU_MEMORYTYPE_UNIFIED`.
pub const MEMORYTYPE_UNIFIED: c_uint = 4;

/// `CUDA_MEMCPY2D`: a 2D copy's description, as `cuMemcpy2DAsync` reads it (gpuport's
/// own declaration, with the memory types as plain integers; its layout is checked
/// against cudarc's in the tests). gpuport fills only the unified-addressing fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memcpy2d {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcMemoryType: c_uint,
    pub srcHost: *const c_void,
    pub srcDevice: CUdeviceptr,
    pub srcArray: *mut c_void,
    pub srcPitch: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstMemoryType: c_uint,
    pub dstHost: *mut c_void,
    pub dstDevice: CUdeviceptr,
    pub dstArray: *mut c_void,
    pub dstPitch: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
}

impl Memcpy2d {
    /// `height` rows of `width` bytes between two unified addresses, each side's rows its
    /// pitch apart.
    pub fn unified(
        dst: CUdeviceptr,
        dst_pitch: usize,
        src: CUdeviceptr,
        src_pitch: usize,
        width: usize,
        height: usize,
    ) -> Self {
        Memcpy2d {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: MEMORYTYPE_UNIFIED,
            srcHost: std::ptr::null(),
            srcDevice: src,
            srcArray: std::ptr::null_mut(),
            srcPitch: src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: MEMORYTYPE_UNIFIED,
            dstHost: std::ptr::null_mut(),
            dstDevice: dst,
            dstArray: std::ptr::null_mut(),
            dstPitch: dst_pitch,
            WidthInBytes: width,
            Height: height,
        }
    }
}

/// The ABI version gpuport's declarations follow (CUDA 12.0, cudarc's `cuda-12000`).
pub const ABI_VERSION: c_int = 12000;
/// The oldest driver gpuport supports (CUDA 11.4: versioned symbol lookup, stream-ordered
/// allocation, host functions on streams).
pub const MIN_DRIVER_VERSION: c_int = 11040;

type GetProcAddressV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> Status;
type GetProcAddressV2 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> Status;

/// How symbols are looked up.
pub(crate) enum Lookup {
    V2(GetProcAddressV2),
    V1(GetProcAddressV1),
    Dlsym,
}

/// Resolves one symbol: `base` through `cuGetProcAddress`, else `export` with dlsym.
///
/// # Safety
/// The caller transmutes the result to the function type the symbol really has.
pub(crate) unsafe fn resolve(
    lib: &Library,
    lookup: &Lookup,
    version: c_int,
    base: &str,
    export: &str,
) -> Option<*mut c_void> {
    if let Some(p) = lookup.get(version, base) {
        return Some(p);
    }
    let cexport = CString::new(export).ok()?;
    // SAFETY: looking up a symbol by name; the pointer is only used after the caller's
    // transmute to the right type.
    unsafe { lib.get::<*mut c_void>(cexport.as_bytes_with_nul()) }.ok().map(|s| *s).filter(|p| !p.is_null())
}

impl Lookup {
    /// The entry point used, for reports.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Lookup::V2(_) => "cuGetProcAddress_v2",
            Lookup::V1(_) => "cuGetProcAddress",
            Lookup::Dlsym => "dlsym",
        }
    }

    /// `base` through `cuGetProcAddress` itself (no dlsym fallback), if it gives it.
    pub(crate) fn get(&self, version: c_int, base: &str) -> Option<*mut c_void> {
        let cbase = CString::new(base).ok()?;
        let mut pfn: *mut c_void = std::ptr::null_mut();
        let status = match self {
            // SAFETY: documented signature of cuGetProcAddress_v2; valid out-pointers.
            Lookup::V2(f) => unsafe {
                let mut found: c_int = 0;
                f(cbase.as_ptr(), &mut pfn, version, 0, &mut found)
            },
            // SAFETY: documented signature of cuGetProcAddress (v1); valid out-pointer.
            Lookup::V1(f) => unsafe { f(cbase.as_ptr(), &mut pfn, version, 0) },
            Lookup::Dlsym => ERROR_NOT_FOUND,
        };
        (status == SUCCESS && !pfn.is_null()).then_some(pfn)
    }
}

macro_rules! api {
    ($( $field:ident = $base:literal / $export:literal : fn($($arg:ty),*); )*) => {
        /// The required driver entry points, resolved at load.
        pub struct Api {
            $( pub(crate) $field: unsafe extern "C" fn($($arg),*) -> Status, )*
        }

        impl Api {
            /// Resolves every required symbol; the first missing one is returned by name.
            pub(crate) fn resolve_all(lib: &Library, lookup: &Lookup, version: c_int) -> Result<Self, &'static str> {
                Ok(Api {
                    $( $field: {
                        // SAFETY: the symbol is declared with its documented signature.
                        let p = unsafe { resolve(lib, lookup, version, $base, $export) }.ok_or($base)?;
                        // SAFETY: `p` is the non-null address of `$base`, whose C signature is
                        // the one declared here.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> Status>(p) }
                    }, )*
                })
            }

            /// The names of the required symbols, for documentation and tests.
            pub const REQUIRED: &'static [&'static str] = &[$($base),*];
        }
    };
}

api! {
    cuGetErrorName = "cuGetErrorName" / "cuGetErrorName": fn(Status, *mut *const c_char);
    cuGetErrorString = "cuGetErrorString" / "cuGetErrorString": fn(Status, *mut *const c_char);
    cuDeviceGetCount = "cuDeviceGetCount" / "cuDeviceGetCount": fn(*mut c_int);
    cuDeviceGet = "cuDeviceGet" / "cuDeviceGet": fn(*mut CUdevice, c_int);
    cuDeviceGetName = "cuDeviceGetName" / "cuDeviceGetName": fn(*mut c_char, c_int, CUdevice);
    cuDeviceTotalMem = "cuDeviceTotalMem" / "cuDeviceTotalMem_v2": fn(*mut usize, CUdevice);
    cuDeviceGetAttribute = "cuDeviceGetAttribute" / "cuDeviceGetAttribute": fn(*mut c_int, c_int, CUdevice);
    cuDeviceGetUuid = "cuDeviceGetUuid" / "cuDeviceGetUuid_v2": fn(*mut CUuuid, CUdevice);
    cuDeviceGetPCIBusId = "cuDeviceGetPCIBusId" / "cuDeviceGetPCIBusId": fn(*mut c_char, c_int, CUdevice);
    cuDeviceCanAccessPeer = "cuDeviceCanAccessPeer" / "cuDeviceCanAccessPeer": fn(*mut c_int, CUdevice, CUdevice);
    cuDevicePrimaryCtxRetain = "cuDevicePrimaryCtxRetain" / "cuDevicePrimaryCtxRetain": fn(*mut CUcontext, CUdevice);
    cuDevicePrimaryCtxRelease = "cuDevicePrimaryCtxRelease" / "cuDevicePrimaryCtxRelease_v2": fn(CUdevice);
    cuCtxGetCurrent = "cuCtxGetCurrent" / "cuCtxGetCurrent": fn(*mut CUcontext);
    cuCtxSetCurrent = "cuCtxSetCurrent" / "cuCtxSetCurrent": fn(CUcontext);
    cuCtxSynchronize = "cuCtxSynchronize" / "cuCtxSynchronize": fn();
    cuCtxGetStreamPriorityRange = "cuCtxGetStreamPriorityRange" / "cuCtxGetStreamPriorityRange": fn(*mut c_int, *mut c_int);
    cuCtxEnablePeerAccess = "cuCtxEnablePeerAccess" / "cuCtxEnablePeerAccess": fn(CUcontext, c_uint);
    cuMemAlloc = "cuMemAlloc" / "cuMemAlloc_v2": fn(*mut CUdeviceptr, usize);
    cuMemFree = "cuMemFree" / "cuMemFree_v2": fn(CUdeviceptr);
    cuMemHostAlloc = "cuMemHostAlloc" / "cuMemHostAlloc": fn(*mut *mut c_void, usize, c_uint);
    cuMemFreeHost = "cuMemFreeHost" / "cuMemFreeHost": fn(*mut c_void);
    cuMemHostRegister = "cuMemHostRegister" / "cuMemHostRegister_v2": fn(*mut c_void, usize, c_uint);
    cuMemHostUnregister = "cuMemHostUnregister" / "cuMemHostUnregister": fn(*mut c_void);
    cuMemAllocManaged = "cuMemAllocManaged" / "cuMemAllocManaged": fn(*mut CUdeviceptr, usize, c_uint);
    cuMemsetD8 = "cuMemsetD8" / "cuMemsetD8_v2": fn(CUdeviceptr, u8, usize);
    cuMemsetD8Async = "cuMemsetD8Async" / "cuMemsetD8Async": fn(CUdeviceptr, u8, usize, CUstream);
    cuMemcpyAsync = "cuMemcpyAsync" / "cuMemcpyAsync": fn(CUdeviceptr, CUdeviceptr, usize, CUstream);
    cuMemcpy2DAsync = "cuMemcpy2DAsync" / "cuMemcpy2DAsync_v2": fn(*const Memcpy2d, CUstream);
    cuMemcpyPeerAsync = "cuMemcpyPeerAsync" / "cuMemcpyPeerAsync": fn(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, usize, CUstream);
    cuStreamCreateWithPriority = "cuStreamCreateWithPriority" / "cuStreamCreateWithPriority": fn(*mut CUstream, c_uint, c_int);
    cuStreamDestroy = "cuStreamDestroy" / "cuStreamDestroy_v2": fn(CUstream);
    cuStreamSynchronize = "cuStreamSynchronize" / "cuStreamSynchronize": fn(CUstream);
    cuStreamQuery = "cuStreamQuery" / "cuStreamQuery": fn(CUstream);
    cuStreamWaitEvent = "cuStreamWaitEvent" / "cuStreamWaitEvent": fn(CUstream, CUevent, c_uint);
    cuEventCreate = "cuEventCreate" / "cuEventCreate": fn(*mut CUevent, c_uint);
    cuEventDestroy = "cuEventDestroy" / "cuEventDestroy_v2": fn(CUevent);
    cuEventRecord = "cuEventRecord" / "cuEventRecord": fn(CUevent, CUstream);
    cuEventQuery = "cuEventQuery" / "cuEventQuery": fn(CUevent);
    cuEventSynchronize = "cuEventSynchronize" / "cuEventSynchronize": fn(CUevent);
    cuEventElapsedTime = "cuEventElapsedTime" / "cuEventElapsedTime": fn(*mut f32, CUevent, CUevent);
    cuLaunchHostFunc = "cuLaunchHostFunc" / "cuLaunchHostFunc": fn(CUstream, CUhostFn, *mut c_void);
    cuPointerGetAttributes = "cuPointerGetAttributes" / "cuPointerGetAttributes": fn(c_uint, *mut c_int, *mut *mut c_void, CUdeviceptr);
    cuModuleLoadData = "cuModuleLoadData" / "cuModuleLoadData": fn(*mut CUmodule, *const c_void);
    cuModuleUnload = "cuModuleUnload" / "cuModuleUnload": fn(CUmodule);
    cuModuleGetFunction = "cuModuleGetFunction" / "cuModuleGetFunction": fn(*mut CUfunction, CUmodule, *const c_char);
    cuLaunchKernel = "cuLaunchKernel" / "cuLaunchKernel": fn(CUfunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void);
}

type MemAllocAsync = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> Status;
type MemFreeAsync = unsafe extern "C" fn(CUdeviceptr, CUstream) -> Status;

/// Entry points that older drivers lack: resolved on first use, once.
#[derive(Default)]
pub struct Optional {
    pub(crate) mem_alloc_async: OnceLock<Option<MemAllocAsync>>,
    pub(crate) mem_free_async: OnceLock<Option<MemFreeAsync>>,
}

/// The loaded driver: the library (kept open for the process), the table and versions.
pub struct Driver {
    pub(crate) lib: Library,
    pub(crate) lookup: Lookup,
    pub(crate) api: Api,
    pub(crate) optional: Optional,
    /// `cuDriverGetVersion`, e.g. 12040.
    pub driver_version: c_int,
    /// Where the library was found.
    pub library: String,
}

// SAFETY: the driver's entry points are thread-safe C functions; the table is immutable
// after load, and the optional slots are `OnceLock`s.
unsafe impl Send for Driver {}
// SAFETY: as above.
unsafe impl Sync for Driver {}

impl Driver {
    fn version_for_lookup(&self) -> c_int {
        self.driver_version.min(ABI_VERSION)
    }

    /// `cuMemAllocAsync`, if the driver has it.
    pub(crate) fn mem_alloc_async(&self) -> Option<MemAllocAsync> {
        *self.optional.mem_alloc_async.get_or_init(|| {
            // SAFETY: declared with the documented signature.
            let p = unsafe {
                resolve(&self.lib, &self.lookup, self.version_for_lookup(), "cuMemAllocAsync", "cuMemAllocAsync")
            }?;
            // SAFETY: non-null address of cuMemAllocAsync.
            Some(unsafe { std::mem::transmute::<*mut c_void, MemAllocAsync>(p) })
        })
    }

    /// `cuMemFreeAsync`, if the driver has it.
    pub(crate) fn mem_free_async(&self) -> Option<MemFreeAsync> {
        *self.optional.mem_free_async.get_or_init(|| {
            // SAFETY: declared with the documented signature.
            let p = unsafe {
                resolve(&self.lib, &self.lookup, self.version_for_lookup(), "cuMemFreeAsync", "cuMemFreeAsync")
            }?;
            // SAFETY: non-null address of cuMemFreeAsync.
            Some(unsafe { std::mem::transmute::<*mut c_void, MemFreeAsync>(p) })
        })
    }
}

/// A C string returned by the driver, or `None`.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that lives for the process (the
/// driver's static error strings).
pub(crate) unsafe fn static_str(p: *const c_char) -> Option<String> {
    // SAFETY: as documented.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A driver version as the driver encodes it (`1000 * major + 10 * minor`) in words:
/// `12040` → `12.4`.
pub fn format_version(v: c_int) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use cudarc::driver::sys::CUDA_MEMCPY2D;

    use super::Memcpy2d;

    /// The flag values gpuport passes are `cuda.h`'s (through cudarc's bindings).
    #[test]
    fn flags_match_cuda_h() {
        assert_eq!(super::MEM_ATTACH_GLOBAL, cudarc::driver::sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32);
        assert_eq!(super::MEMHOSTREGISTER_PORTABLE, cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE);
    }

    /// gpuport's `CUDA_MEMCPY2D` has the layout of cudarc's (generated from `cuda.h`).
    #[test]
    fn memcpy_2d_matches_cuda_h() {
        assert_eq!(size_of::<Memcpy2d>(), size_of::<CUDA_MEMCPY2D>());
        assert_eq!(align_of::<Memcpy2d>(), align_of::<CUDA_MEMCPY2D>());
        macro_rules! same_offsets {
            ($($field:ident),*) => {$(
                assert_eq!(offset_of!(Memcpy2d, $field), offset_of!(CUDA_MEMCPY2D, $field), stringify!($field));
            )*};
        }
        same_offsets!(
            srcXInBytes,
            srcY,
            srcMemoryType,
            srcHost,
            srcDevice,
            srcArray,
            srcPitch,
            dstXInBytes,
            dstY,
            dstMemoryType,
            dstHost,
            dstDevice,
            dstArray,
            dstPitch,
            WidthInBytes,
            Height
        );
    }
}
