//! Step B2: the vendor's C declarations, written from its header (`fakevendor.h`): status
//! codes, handles, and the function table its one entry symbol hands out. Only types live
//! here; no call is made.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

/// `fvStatus`.
pub type Status = u32;
/// `fvStream`, `fvEvent`, `fvModule`, `fvFunction`: opaque pointers.
pub type Handle = *mut c_void;

/// `FV_API_VERSION`: the table version this port was written against.
pub const API_VERSION: u32 = 1;
/// The entry symbol.
pub const ENTRY: &[u8] = b"fvGetApi\0";
/// `FV_STREAM_NON_BLOCKING`.
pub const STREAM_NON_BLOCKING: u32 = 0x1;
/// `FV_EVENT_DISABLE_TIMING`.
pub const EVENT_DISABLE_TIMING: u32 = 0x2;
/// `FV_ERROR_NO_DEVICE`.
pub const ERROR_NO_DEVICE: Status = 100;
/// `FV_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
pub const ERROR_PEER_ACCESS_ALREADY_ENABLED: Status = 704;

/// `fvPointerAttributes.kind` values.
pub const MEMORY_DEVICE: i32 = 1;
/// Pinned host memory.
pub const MEMORY_HOST: i32 = 2;
/// Managed memory.
pub const MEMORY_MANAGED: i32 = 3;

/// `fvPointerAttributes`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PointerAttributes {
    pub kind: i32,
    pub device: i32,
    pub start: u64,
    pub size: usize,
}

/// `fvGetApi`.
pub type GetApiFn = unsafe extern "C" fn(u32) -> *const Api;

/// `fvApi`, field for field.
#[repr(C)]
pub struct Api {
    pub size: u32,
    pub version: u32,
    pub init: unsafe extern "C" fn(u32) -> Status,
    pub statusName: unsafe extern "C" fn(Status) -> *const c_char,
    pub statusString: unsafe extern "C" fn(Status) -> *const c_char,
    pub deviceCount: unsafe extern "C" fn(*mut c_int) -> Status,
    pub setDevice: unsafe extern "C" fn(c_int) -> Status,
    pub getDevice: unsafe extern "C" fn(*mut c_int) -> Status,
    pub deviceName: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    pub deviceTotalMem: unsafe extern "C" fn(*mut usize, c_int) -> Status,
    pub deviceComputeUnits: unsafe extern "C" fn(*mut c_int, c_int) -> Status,
    pub deviceCanAccessPeer: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> Status,
    pub deviceEnablePeerAccess: unsafe extern "C" fn(c_int) -> Status,
    pub deviceSynchronize: unsafe extern "C" fn() -> Status,
    pub streamPriorityRange: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    pub malloc: unsafe extern "C" fn(*mut u64, usize) -> Status,
    pub free: unsafe extern "C" fn(u64) -> Status,
    pub mallocHost: unsafe extern "C" fn(*mut *mut c_void, usize) -> Status,
    pub freeHost: unsafe extern "C" fn(*mut c_void) -> Status,
    pub mallocManaged: unsafe extern "C" fn(*mut u64, usize) -> Status,
    pub mallocAsync: unsafe extern "C" fn(*mut u64, usize, Handle) -> Status,
    pub freeAsync: unsafe extern "C" fn(u64, Handle) -> Status,
    pub pointerGetAttributes: unsafe extern "C" fn(*mut PointerAttributes, u64) -> Status,
    pub memset: unsafe extern "C" fn(u64, u8, usize) -> Status,
    pub memsetAsync: unsafe extern "C" fn(u64, u8, usize, Handle) -> Status,
    pub memcpyAsync: unsafe extern "C" fn(u64, u64, usize, Handle) -> Status,
    pub memcpyPeerAsync: unsafe extern "C" fn(u64, c_int, u64, c_int, usize, Handle) -> Status,
    pub streamCreate: unsafe extern "C" fn(*mut Handle, u32, c_int) -> Status,
    pub streamDestroy: unsafe extern "C" fn(Handle) -> Status,
    pub streamSynchronize: unsafe extern "C" fn(Handle) -> Status,
    pub streamQuery: unsafe extern "C" fn(Handle) -> Status,
    pub streamWaitEvent: unsafe extern "C" fn(Handle, Handle) -> Status,
    pub launchHostFunc: unsafe extern "C" fn(Handle, Option<unsafe extern "C" fn(*mut c_void)>, *mut c_void) -> Status,
    pub eventCreate: unsafe extern "C" fn(*mut Handle, u32) -> Status,
    pub eventDestroy: unsafe extern "C" fn(Handle) -> Status,
    pub eventRecord: unsafe extern "C" fn(Handle, Handle) -> Status,
    pub eventQuery: unsafe extern "C" fn(Handle) -> Status,
    pub eventSynchronize: unsafe extern "C" fn(Handle) -> Status,
    pub eventElapsedTime: unsafe extern "C" fn(*mut f32, Handle, Handle) -> Status,
    pub moduleLoadData: unsafe extern "C" fn(*mut Handle, *const c_void, usize) -> Status,
    pub moduleUnload: unsafe extern "C" fn(Handle) -> Status,
    pub moduleGetFunction: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> Status,
    pub launchKernel: unsafe extern "C" fn(Handle, *const u32, *const u32, u32, Handle, *mut *mut c_void) -> Status,
}
