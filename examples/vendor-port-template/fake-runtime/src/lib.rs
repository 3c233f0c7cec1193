//! # fakevendor
//!
//! A fake vendor runtime for gpuport's vendor port template: the C API of `fakevendor.h`
//! (status codes, opaque handles, one entry symbol, [`fvGetApi`], handing out a versioned
//! function table), built as a shared library that the port loads at run time as it would
//! load a real vendor's. Its devices, memory, streams, events and kernels are gpuport's
//! simulated machine (the one behind the CUDA and HIP driver doubles), so it is strict: a
//! misuse by the port — a call from inside a host function, a destroyed handle, a range
//! outside an allocation, two streams touching memory unordered — is reported on stderr
//! and in the file `GPUPORT_DOUBLE_REPORT` names. Its other settings are the doubles'
//! (`GPUPORT_DOUBLE_DEVICES`, `GPUPORT_DOUBLE_FAULTS`, …).

#![allow(non_snake_case)]

mod functions;
pub mod status;

use std::ffi::{c_char, c_int, c_void};

pub use status::FvStatus;

/// `FV_API_VERSION`: the table's major version.
pub const API_VERSION: u32 = 1;

/// `fvPointerAttributes`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FvPointerAttributes {
    /// `FV_MEMORY_*`.
    pub kind: i32,
    /// The owning device, or -1.
    pub device: i32,
    /// The allocation's first address.
    pub start: u64,
    /// The allocation's size.
    pub size: usize,
}

/// `FV_MEMORY_UNREGISTERED`, `…_DEVICE`, `…_HOST`, `…_MANAGED`.
pub mod memory_kind {
    /// Memory the runtime did not allocate.
    pub const UNREGISTERED: i32 = 0;
    /// Device memory.
    pub const DEVICE: i32 = 1;
    /// Pinned host memory.
    pub const HOST: i32 = 2;
    /// Managed memory.
    pub const MANAGED: i32 = 3;
}

/// A handle (`fvStream`, `fvEvent`, `fvModule`, `fvFunction`): the machine's tagged number.
pub type Handle = *mut c_void;
/// `fvHostFn`.
pub type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// `fvApi`: every function of the runtime, in the header's order.
#[repr(C)]
pub struct FvApi {
    pub size: u32,
    pub version: u32,
    pub init: unsafe extern "C" fn(u32) -> FvStatus,
    pub statusName: extern "C" fn(FvStatus) -> *const c_char,
    pub statusString: extern "C" fn(FvStatus) -> *const c_char,
    pub deviceCount: unsafe extern "C" fn(*mut c_int) -> FvStatus,
    pub setDevice: unsafe extern "C" fn(c_int) -> FvStatus,
    pub getDevice: unsafe extern "C" fn(*mut c_int) -> FvStatus,
    pub deviceName: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> FvStatus,
    pub deviceTotalMem: unsafe extern "C" fn(*mut usize, c_int) -> FvStatus,
    pub deviceComputeUnits: unsafe extern "C" fn(*mut c_int, c_int) -> FvStatus,
    pub deviceCanAccessPeer: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> FvStatus,
    pub deviceEnablePeerAccess: unsafe extern "C" fn(c_int) -> FvStatus,
    pub deviceSynchronize: unsafe extern "C" fn() -> FvStatus,
    pub streamPriorityRange: unsafe extern "C" fn(*mut c_int, *mut c_int) -> FvStatus,
    pub malloc: unsafe extern "C" fn(*mut u64, usize) -> FvStatus,
    pub free: unsafe extern "C" fn(u64) -> FvStatus,
    pub mallocHost: unsafe extern "C" fn(*mut *mut c_void, usize) -> FvStatus,
    pub freeHost: unsafe extern "C" fn(*mut c_void) -> FvStatus,
    pub mallocManaged: unsafe extern "C" fn(*mut u64, usize) -> FvStatus,
    pub mallocAsync: unsafe extern "C" fn(*mut u64, usize, Handle) -> FvStatus,
    pub freeAsync: unsafe extern "C" fn(u64, Handle) -> FvStatus,
    pub pointerGetAttributes: unsafe extern "C" fn(*mut FvPointerAttributes, u64) -> FvStatus,
    pub memset: unsafe extern "C" fn(u64, u8, usize) -> FvStatus,
    pub memsetAsync: unsafe extern "C" fn(u64, u8, usize, Handle) -> FvStatus,
    pub memcpyAsync: unsafe extern "C" fn(u64, u64, usize, Handle) -> FvStatus,
    pub memcpyPeerAsync: unsafe extern "C" fn(u64, c_int, u64, c_int, usize, Handle) -> FvStatus,
    pub streamCreate: unsafe extern "C" fn(*mut Handle, u32, c_int) -> FvStatus,
    pub streamDestroy: unsafe extern "C" fn(Handle) -> FvStatus,
    pub streamSynchronize: unsafe extern "C" fn(Handle) -> FvStatus,
    pub streamQuery: unsafe extern "C" fn(Handle) -> FvStatus,
    pub streamWaitEvent: unsafe extern "C" fn(Handle, Handle) -> FvStatus,
    pub launchHostFunc: unsafe extern "C" fn(Handle, HostFn, *mut c_void) -> FvStatus,
    pub eventCreate: unsafe extern "C" fn(*mut Handle, u32) -> FvStatus,
    pub eventDestroy: unsafe extern "C" fn(Handle) -> FvStatus,
    pub eventRecord: unsafe extern "C" fn(Handle, Handle) -> FvStatus,
    pub eventQuery: unsafe extern "C" fn(Handle) -> FvStatus,
    pub eventSynchronize: unsafe extern "C" fn(Handle) -> FvStatus,
    pub eventElapsedTime: unsafe extern "C" fn(*mut f32, Handle, Handle) -> FvStatus,
    pub moduleLoadData: unsafe extern "C" fn(*mut Handle, *const c_void, usize) -> FvStatus,
    pub moduleUnload: unsafe extern "C" fn(Handle) -> FvStatus,
    pub moduleGetFunction: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> FvStatus,
    pub launchKernel: unsafe extern "C" fn(Handle, *const u32, *const u32, u32, Handle, *mut *mut c_void) -> FvStatus,
}

/// `fvGetApi`: the function table for major version `version`, or null. It compares a
/// number and returns a static's address, so it cannot panic and needs no `catch_unwind`
/// (every function of the table serves its call inside one).
#[no_mangle]
pub extern "C" fn fvGetApi(version: u32) -> *const FvApi {
    if version != API_VERSION {
        return std::ptr::null();
    }
    &functions::TABLE
}
