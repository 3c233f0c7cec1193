//! The `sys` layer: gpuport's own declarations of the HIP runtime subset it uses —
//! functions, the enum values it passes, and the one struct it reads
//! (`hipPointerAttribute_t`). Device facts are read with `hipDeviceGetAttribute` and the
//! small getters, never through `hipDeviceProp_t`, whose layout changed between ROCm 5
//! and 6. The `hip-sys` feature's tests compare these declarations with hip-sys's bindgen
//! output.
//!
//! Statuses are raw `u32` (a newer runtime may return codes this file does not list).
//! Symbols resolve once, at load, through `hipGetProcAddress` where the runtime has it
//! (ROCm ≥ 6.2), else `dlsym`. These are declarations of C functions gpuport calls; the
//! Rust callbacks handed to the runtime live in `stream.rs` and run inside `catch_unwind`.

#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

use libloading::Library;

/// A raw `hipError_t`.
pub type Status = u32;
/// `hipStream_t`.
pub type hipStream_t = *mut c_void;
/// `hipEvent_t`.
pub type hipEvent_t = *mut c_void;
/// `hipModule_t`.
pub type hipModule_t = *mut c_void;
/// `hipFunction_t`.
pub type hipFunction_t = *mut c_void;
/// `hipDevice_t` (an ordinal).
pub type hipDevice_t = c_int;
/// `hipHostFn_t`.
pub type hipHostFn_t = Option<unsafe extern "C" fn(*mut c_void)>;
/// `hipStreamCallback_t`.
pub type hipStreamCallback_t = Option<unsafe extern "C" fn(hipStream_t, Status, *mut c_void)>;

/// `hipUUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipUUID {
    /// The 16 bytes.
    pub bytes: [c_char; 16],
}

/// `hipPointerAttribute_t`: the same layout in ROCm 5 and 6; the first field (named
/// `memoryType` in 5, `type` in 6) holds a `hipMemoryType` whose values ROCm 6 renumbered
/// (see [`decode_memory_type`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipPointerAttribute_t {
    /// `hipMemoryType`.
    pub memoryType: c_int,
    /// Owning device.
    pub device: c_int,
    /// Device address.
    pub devicePointer: *mut c_void,
    /// Host address, for host-accessible memory.
    pub hostPointer: *mut c_void,
    /// Non-zero for managed memory.
    pub isManaged: c_int,
    /// Allocation flags.
    pub allocationFlags: c_uint,
}

/// `hipSuccess`.
pub const SUCCESS: Status = 0;
/// `hipErrorInvalidValue`.
pub const ERROR_INVALID_VALUE: Status = 1;
/// `hipErrorOutOfMemory` (mapped by `gpuport_vendor_kit::status`; named here for the hip-sys
/// ABI cross-check).
#[cfg_attr(not(all(test, feature = "hip-sys")), allow(dead_code))]
pub const ERROR_OUT_OF_MEMORY: Status = 2;
/// `hipErrorInvalidConfiguration`: HIP 7's answer to a launch configuration out of range.
pub const ERROR_INVALID_CONFIGURATION: Status = 9;
/// `hipErrorNoDevice`.
pub const ERROR_NO_DEVICE: Status = 100;
/// `hipErrorInvalidDevice`.
pub const ERROR_INVALID_DEVICE: Status = 101;
/// `hipErrorNotFound`.
pub const ERROR_NOT_FOUND: Status = 500;
/// `hipErrorNotReady`.
pub const ERROR_NOT_READY: Status = 600;
/// `hipErrorPeerAccessAlreadyEnabled`.
pub const ERROR_PEER_ACCESS_ALREADY_ENABLED: Status = 704;

/// `hipStreamLegacy`: the legacy default stream's handle from HIP 7 (before, the null
/// stream is the only name for it, and 1 is not a stream).
pub const STREAM_LEGACY: usize = 1;
/// `hipStreamPerThread`: the calling thread's default stream, passed where a stream is.
pub const STREAM_PER_THREAD: usize = 2;

/// `HIP_GET_PROC_ADDRESS_DEFAULT`: the entry points of the legacy default stream's table.
/// HIP 7.2's other flags (`LEGACY_STREAM` 1, `PER_THREAD_DEFAULT_STREAM` 2) select the
/// `_spt` twins for per-thread semantics; gpuport never asks for them: it reaches the
/// per-thread stream through its handle, [`STREAM_PER_THREAD`], with the one table.
pub const PROC_ADDRESS_DEFAULT: u64 = 0;

/// The HIP runtime majors gpuport knows (ROCm 5.x, 6.x, and 7.x, which ROCm 10 ships as
/// runtime 7.1x). A library reporting another is refused with the reason: its ABI may
/// differ in ways the declarations here do not follow.
pub const KNOWN_MAJORS: std::ops::RangeInclusive<u32> = 5..=7;

/// `hipMemcpyDefault`: the runtime infers the direction (unified addressing).
pub const MEMCPY_DEFAULT: c_int = 4;
/// `hipStreamNonBlocking`.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `hipMemAttachGlobal`.
pub const MEM_ATTACH_GLOBAL: c_uint = 1;
/// `hipHostRegisterPortable`: the registration serves every device of the process.
pub const HOST_REGISTER_PORTABLE: c_uint = 1;

/// `hipDeviceAttributeComputeCapabilityMajor`.
pub const ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 23;
/// `hipDeviceAttributeComputeCapabilityMinor`.
pub const ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 61;
/// `hipDeviceAttributeMultiprocessorCount` (compute units).
pub const ATTR_MULTIPROCESSOR_COUNT: c_int = 63;

/// Where `gcnArchName` (`char[256]`, e.g. `"gfx90a:sramecc+:xnack-"`) lies in
/// `hipDeviceProp_t`: ROCm 5's layout (`hipGetDeviceProperties`, and the unversioned
/// export of ROCm 6 and later) and ROCm 6's (`hipGetDevicePropertiesR0600`).
pub const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
/// See [`GCN_ARCH_NAME_OFFSET_R0000`].
pub const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
/// Bytes reserved for either `hipDeviceProp_t` (ROCm 6's is 1472 bytes); the runtime
/// writes into a buffer of this size, 8-byte aligned.
pub const DEVICE_PROP_BUFFER: usize = 4096;

/// ROCm 5's `hipMemoryType` values.
pub mod memory_type_v5 {
    use std::ffi::c_int;
    /// `hipMemoryTypeHost`.
    pub const HOST: c_int = 0;
    /// `hipMemoryTypeDevice`.
    pub const DEVICE: c_int = 1;
    /// `hipMemoryTypeArray`.
    pub const ARRAY: c_int = 2;
    /// `hipMemoryTypeUnified`.
    pub const UNIFIED: c_int = 3;
    /// `hipMemoryTypeManaged`.
    pub const MANAGED: c_int = 4;
}

/// ROCm 6's `hipMemoryType` values (aligned with CUDA's `cudaMemoryType`).
pub mod memory_type_v6 {
    use std::ffi::c_int;
    /// `hipMemoryTypeUnregistered`.
    pub const UNREGISTERED: c_int = 0;
    /// `hipMemoryTypeHost`.
    pub const HOST: c_int = 1;
    /// `hipMemoryTypeDevice`.
    pub const DEVICE: c_int = 2;
    /// `hipMemoryTypeManaged`.
    pub const MANAGED: c_int = 3;
    /// `hipMemoryTypeArray`.
    pub const ARRAY: c_int = 10;
    /// `hipMemoryTypeUnified`.
    pub const UNIFIED: c_int = 11;
}

/// What a `hipMemoryType` value means under runtime major version `major`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    /// Not registered with the runtime.
    Unregistered,
    /// Pinned host memory.
    Host,
    /// Device memory (or an array).
    Device,
    /// Managed or unified memory.
    Managed,
}

/// Decodes a `hipMemoryType` for a runtime of major version `major`.
pub fn decode_memory_type(major: u32, value: c_int) -> Option<MemoryType> {
    if major >= 6 {
        use memory_type_v6 as t;
        match value {
            t::UNREGISTERED => Some(MemoryType::Unregistered),
            t::HOST => Some(MemoryType::Host),
            t::DEVICE | t::ARRAY => Some(MemoryType::Device),
            t::MANAGED | t::UNIFIED => Some(MemoryType::Managed),
            _ => None,
        }
    } else {
        use memory_type_v5 as t;
        match value {
            t::HOST => Some(MemoryType::Host),
            t::DEVICE | t::ARRAY => Some(MemoryType::Device),
            t::UNIFIED | t::MANAGED => Some(MemoryType::Managed),
            _ => None,
        }
    }
}

type GetProcAddress = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> Status;

/// The version `hipGetProcAddress` takes: 100·major + minor (601 for HIP 6.1), from a
/// `hipRuntimeGetVersion` value (major·10⁷ + minor·10⁵ + patch). gpuport asks for every
/// symbol with the runtime's own version: its declarations are of the current forms
/// (it reads device properties through `hipGetDevicePropertiesR0600` by that name, which
/// is what the unversioned name resolves to from 600).
pub(crate) fn proc_address_version(runtime_version: c_int) -> c_int {
    let v = runtime_version.max(0);
    100 * (v / 10_000_000) + (v / 100_000) % 100
}

/// The status `hipGetProcAddress` answers for `name` (with the runtime's version and the
/// default flags): what a runtime says when it gives no entry points at all (6.4 and 7.2
/// without a GPU answer `hipErrorNoDevice` for every name).
pub(crate) fn proc_address_status(gpa: GetProcAddress, runtime_version: c_int, name: &CStr) -> Status {
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    // SAFETY: documented signature of hipGetProcAddress; valid out-pointers.
    unsafe { gpa(name.as_ptr(), &mut pfn, proc_address_version(runtime_version), PROC_ADDRESS_DEFAULT, &mut found) }
}

/// `name` through `hipGetProcAddress` itself (no `dlsym` fallback), if it gives it.
/// `runtime_version` is `hipRuntimeGetVersion`'s value.
pub(crate) fn through_proc_address(gpa: GetProcAddress, runtime_version: c_int, name: &str) -> Option<*mut c_void> {
    let cname = CString::new(name).ok()?;
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut found: c_int = 0;
    let version = proc_address_version(runtime_version);
    // SAFETY: documented signature of hipGetProcAddress; valid out-pointers.
    let status = unsafe { gpa(cname.as_ptr(), &mut pfn, version, PROC_ADDRESS_DEFAULT, &mut found) };
    (status == SUCCESS && !pfn.is_null()).then_some(pfn)
}

/// Resolves one symbol: through `hipGetProcAddress` when given, else `dlsym`.
///
/// # Safety
/// The caller transmutes the result to the symbol's real function type.
pub(crate) unsafe fn resolve(
    lib: &Library,
    gpa: Option<GetProcAddress>,
    runtime_version: c_int,
    name: &str,
) -> Option<*mut c_void> {
    if let Some(p) = gpa.and_then(|gpa| through_proc_address(gpa, runtime_version, name)) {
        return Some(p);
    }
    let cname = CString::new(name).ok()?;
    // SAFETY: a symbol looked up by name, used only after the caller's transmute.
    unsafe { lib.get::<*mut c_void>(cname.as_bytes_with_nul()) }.ok().map(|s| *s).filter(|p| !p.is_null())
}

macro_rules! api {
    ($( $field:ident : fn($($arg:ty),*) -> $ret:ty; )*) => {
        /// The required runtime entry points, resolved at load.
        pub struct Api {
            $( pub(crate) $field: unsafe extern "C" fn($($arg),*) -> $ret, )*
        }

        impl Api {
            /// Resolves every required symbol; the first missing one is returned by name.
            pub(crate) fn resolve_all(lib: &Library, gpa: Option<GetProcAddress>, version: c_int) -> Result<Self, &'static str> {
                Ok(Api {
                    $( $field: {
                        // SAFETY: declared with its documented signature.
                        let p = unsafe { resolve(lib, gpa, version, stringify!($field)) }.ok_or(stringify!($field))?;
                        // SAFETY: `p` is the non-null address of the function of that name,
                        // whose C signature is the one declared here.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p) }
                    }, )*
                })
            }

            /// The names of the required symbols.
            pub const REQUIRED: &'static [&'static str] = &[$(stringify!($field)),*];
        }
    };
}

api! {
    hipGetErrorName: fn(Status) -> *const c_char;
    hipGetErrorString: fn(Status) -> *const c_char;
    hipGetDeviceCount: fn(*mut c_int) -> Status;
    hipSetDevice: fn(c_int) -> Status;
    hipGetDevice: fn(*mut c_int) -> Status;
    hipDeviceGetName: fn(*mut c_char, c_int, hipDevice_t) -> Status;
    hipDeviceTotalMem: fn(*mut usize, hipDevice_t) -> Status;
    hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> Status;
    hipDeviceGetPCIBusId: fn(*mut c_char, c_int, c_int) -> Status;
    hipDeviceGetUuid: fn(*mut hipUUID, hipDevice_t) -> Status;
    hipDeviceCanAccessPeer: fn(*mut c_int, c_int, c_int) -> Status;
    hipDeviceEnablePeerAccess: fn(c_int, c_uint) -> Status;
    hipDeviceSynchronize: fn() -> Status;
    hipDeviceGetStreamPriorityRange: fn(*mut c_int, *mut c_int) -> Status;
    hipMalloc: fn(*mut *mut c_void, usize) -> Status;
    hipFree: fn(*mut c_void) -> Status;
    hipHostMalloc: fn(*mut *mut c_void, usize, c_uint) -> Status;
    hipHostFree: fn(*mut c_void) -> Status;
    hipHostRegister: fn(*mut c_void, usize, c_uint) -> Status;
    hipHostUnregister: fn(*mut c_void) -> Status;
    hipMallocManaged: fn(*mut *mut c_void, usize, c_uint) -> Status;
    hipMemset: fn(*mut c_void, c_int, usize) -> Status;
    hipMemsetAsync: fn(*mut c_void, c_int, usize, hipStream_t) -> Status;
    hipMemcpyAsync: fn(*mut c_void, *const c_void, usize, c_int, hipStream_t) -> Status;
    hipMemcpy2DAsync: fn(*mut c_void, usize, *const c_void, usize, usize, usize, c_int, hipStream_t) -> Status;
    hipMemcpyPeerAsync: fn(*mut c_void, c_int, *const c_void, c_int, usize, hipStream_t) -> Status;
    hipStreamCreateWithPriority: fn(*mut hipStream_t, c_uint, c_int) -> Status;
    hipStreamDestroy: fn(hipStream_t) -> Status;
    hipStreamSynchronize: fn(hipStream_t) -> Status;
    hipStreamQuery: fn(hipStream_t) -> Status;
    hipStreamWaitEvent: fn(hipStream_t, hipEvent_t, c_uint) -> Status;
    hipStreamAddCallback: fn(hipStream_t, hipStreamCallback_t, *mut c_void, c_uint) -> Status;
    hipEventCreateWithFlags: fn(*mut hipEvent_t, c_uint) -> Status;
    hipEventDestroy: fn(hipEvent_t) -> Status;
    hipEventRecord: fn(hipEvent_t, hipStream_t) -> Status;
    hipEventQuery: fn(hipEvent_t) -> Status;
    hipEventSynchronize: fn(hipEvent_t) -> Status;
    hipEventElapsedTime: fn(*mut f32, hipEvent_t, hipEvent_t) -> Status;
    hipPointerGetAttributes: fn(*mut hipPointerAttribute_t, *const c_void) -> Status;
    hipModuleLoadData: fn(*mut hipModule_t, *const c_void) -> Status;
    hipModuleUnload: fn(hipModule_t) -> Status;
    hipModuleGetFunction: fn(*mut hipFunction_t, hipModule_t, *const c_char) -> Status;
    hipModuleLaunchKernel: fn(hipFunction_t, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, hipStream_t, *mut *mut c_void, *mut *mut c_void) -> Status;
}

type MallocAsync = unsafe extern "C" fn(*mut *mut c_void, usize, hipStream_t) -> Status;
type FreeAsync = unsafe extern "C" fn(*mut c_void, hipStream_t) -> Status;
type LaunchHostFunc = unsafe extern "C" fn(hipStream_t, hipHostFn_t, *mut c_void) -> Status;
/// `hipMemGetAddressRange(hipDeviceptr_t* pbase, size_t* psize, hipDeviceptr_t dptr)`.
type MemGetAddressRange = unsafe extern "C" fn(*mut *mut c_void, *mut usize, *mut c_void) -> Status;
/// `hipGetDeviceProperties` / `hipGetDevicePropertiesR0600`: the struct is written through
/// an untyped pointer into a buffer of [`DEVICE_PROP_BUFFER`] bytes.
pub(crate) type GetDeviceProperties = unsafe extern "C" fn(*mut c_void, c_int) -> Status;

/// The loaded runtime: library, table, lookup and versions.
pub struct Runtime {
    pub(crate) lib: Library,
    pub(crate) gpa: Option<GetProcAddress>,
    pub(crate) api: Api,
    malloc_async: OnceLock<Option<MallocAsync>>,
    free_async: OnceLock<Option<FreeAsync>>,
    launch_host_func: OnceLock<Option<LaunchHostFunc>>,
    mem_get_address_range: OnceLock<Option<MemGetAddressRange>>,
    device_properties: OnceLock<Option<GetDeviceProperties>>,
    device_properties_r0600: OnceLock<Option<GetDeviceProperties>>,
    /// `hipRuntimeGetVersion` (e.g. 50221153 for 5.2.21153).
    pub runtime_version: c_int,
    /// `hipDriverGetVersion`.
    pub driver_version: c_int,
    /// Where the library was found.
    pub library: String,
}

// SAFETY: HIP runtime entry points are thread-safe C functions; the table is immutable
// after load and the optional slots are `OnceLock`s.
unsafe impl Send for Runtime {}
// SAFETY: as above.
unsafe impl Sync for Runtime {}

macro_rules! optional {
    ($method:ident, $slot:ident, $ty:ty, $name:literal) => {
        #[doc = concat!("`", $name, "`, if the runtime has it.")]
        pub(crate) fn $method(&self) -> Option<$ty> {
            *self.$slot.get_or_init(|| {
                // SAFETY: declared with the documented signature.
                let p = unsafe { resolve(&self.lib, self.gpa, self.runtime_version, $name) }?;
                // SAFETY: non-null address of the named function.
                Some(unsafe { std::mem::transmute::<*mut c_void, $ty>(p) })
            })
        }
    };
}

impl Runtime {
    pub(crate) fn new(
        lib: Library,
        gpa: Option<GetProcAddress>,
        api: Api,
        runtime_version: c_int,
        driver_version: c_int,
        library: String,
    ) -> Self {
        Runtime {
            lib,
            gpa,
            api,
            malloc_async: OnceLock::new(),
            free_async: OnceLock::new(),
            launch_host_func: OnceLock::new(),
            mem_get_address_range: OnceLock::new(),
            device_properties: OnceLock::new(),
            device_properties_r0600: OnceLock::new(),
            runtime_version,
            driver_version,
            library,
        }
    }

    /// The runtime's major version (5, 6, 7).
    pub fn major(&self) -> u32 {
        (self.runtime_version / 10_000_000).max(0) as u32
    }

    optional!(malloc_async, malloc_async, MallocAsync, "hipMallocAsync");
    optional!(free_async, free_async, FreeAsync, "hipFreeAsync");
    optional!(launch_host_func, launch_host_func, LaunchHostFunc, "hipLaunchHostFunc");
    optional!(mem_get_address_range, mem_get_address_range, MemGetAddressRange, "hipMemGetAddressRange");
    optional!(device_properties, device_properties, GetDeviceProperties, "hipGetDeviceProperties");
    optional!(device_properties_r0600, device_properties_r0600, GetDeviceProperties, "hipGetDevicePropertiesR0600");
}

/// `hipGetProcAddress`, looked up with dlsym.
pub(crate) fn get_proc_address(lib: &Library) -> Option<GetProcAddress> {
    // SAFETY: documented signature of hipGetProcAddress.
    unsafe { lib.get::<GetProcAddress>(b"hipGetProcAddress\0") }.ok().map(|s| *s)
}
