//! # gpuport-cuda-double
//!
//! A CUDA driver double: a shared library exporting the libcuda functions gpuport
//! resolves, with the C ABI of `cuda.h` (CUDA 12), over the simulated machine of
//! `gpuport-double-sim`. Load it with `GPUPORT_CUDA_LIBRARY=target/doubles/cuda/libcuda.so.1`
//! (`cargo xtask doubles` builds it there). Each function's comment names the page of
//! NVIDIA's *CUDA Driver API* reference it follows; where the double is stricter than the
//! driver, the comment says how.
//!
//! Every exported function serves its call inside `catch_unwind` (the simulation's
//! `serve`): a bug in the double becomes a report and `CUDA_ERROR_UNKNOWN`, never an
//! unwind into the caller.
//!
//! Handles (contexts, streams, events, modules, functions) are tagged numbers, not
//! pointers: a destroyed or made-up handle is reported, never dereferenced. Device
//! pointers are addresses the host cannot touch.

#![allow(non_snake_case)]

pub mod status;

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use gpuport_double_sim::ffi::{image_bytes, put, put_text, serve};
use gpuport_double_sim::report::violation;
use gpuport_double_sim::{
    current_context, image, set_current_context, Attributes, Call, DeviceFacts, Error, EventTiming, HostCallback,
    Machine, MemcpyCheck, Result, StreamRef, Vendor,
};

use status::*;
pub use status::{code, CUresult};

/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;
/// Opaque handles (`CUcontext`, `CUstream`, …): the double's tagged numbers.
pub type Handle = *mut c_void;
/// `CUhostFn`.
pub type CUhostFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// `CUuuid`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUuuid {
    /// The 16 bytes.
    pub bytes: [c_char; 16],
}

/// `CU_MEMORYTYPE_UNIFIED`.
pub const MEMORYTYPE_UNIFIED: c_uint = 4;

/// `CUDA_MEMCPY2D`, as `cuda.h` declares it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)] // the fields of `cuda.h`
pub struct CUDA_MEMCPY2D {
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

/// The driver version reported (CUDA 12.4).
pub const DRIVER_VERSION: c_int = 12040;

/// `CU_STREAM_LEGACY`.
pub const STREAM_LEGACY: usize = 1;
/// `CU_STREAM_PER_THREAD`.
pub const STREAM_PER_THREAD: usize = 2;

/// Device attributes the double answers (`CUdevice_attribute` values).
pub mod attribute {
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    /// `CU_DEVICE_ATTRIBUTE_WARP_SIZE`.
    pub const WARP_SIZE: i32 = 10;
    /// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    /// `CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY`.
    pub const CAN_MAP_HOST_MEMORY: i32 = 19;
    /// `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`.
    pub const PCI_BUS_ID: i32 = 33;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID`.
    pub const PCI_DEVICE_ID: i32 = 34;
    /// `CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`.
    pub const UNIFIED_ADDRESSING: i32 = 41;
    /// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`.
    pub const PCI_DOMAIN_ID: i32 = 50;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    /// `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY`.
    pub const MANAGED_MEMORY: i32 = 83;
    /// `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`.
    pub const CONCURRENT_MANAGED_ACCESS: i32 = 89;
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`.
    pub const MEMORY_POOLS_SUPPORTED: i32 = 115;
}

/// Pointer attributes the double answers (`CUpointer_attribute` values).
pub mod pointer {
    /// `CU_POINTER_ATTRIBUTE_CONTEXT`.
    pub const CONTEXT: i32 = 1;
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
    pub const MEMORY_TYPE: i32 = 2;
    /// `CU_POINTER_ATTRIBUTE_DEVICE_POINTER`.
    pub const DEVICE_POINTER: i32 = 3;
    /// `CU_POINTER_ATTRIBUTE_HOST_POINTER`.
    pub const HOST_POINTER: i32 = 4;
    /// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
    pub const IS_MANAGED: i32 = 8;
    /// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
    pub const DEVICE_ORDINAL: i32 = 9;
    /// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`.
    pub const RANGE_START_ADDR: i32 = 11;
    /// `CU_POINTER_ATTRIBUTE_RANGE_SIZE`.
    pub const RANGE_SIZE: i32 = 12;
    /// `CU_MEMORYTYPE_HOST`.
    pub const MEMORYTYPE_HOST: u32 = 1;
    /// `CU_MEMORYTYPE_DEVICE`.
    pub const MEMORYTYPE_DEVICE: u32 = 2;
}

fn facts(i: usize, _memory: usize) -> DeviceFacts {
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(b"gpuportC");
    uuid[15] = i as u8;
    DeviceFacts {
        name: format!("gpuport driver double (CUDA) {i}"),
        major: 8,
        minor: 0,
        multiprocessors: 16,
        arch: format!("sm_80 ({i})"),
        pci_bus_id: format!("0000:{:02x}:00.0", 0x41 + i),
        uuid,
    }
}

fn machine(cx: &Call<'_>) -> Result<&'static Machine> {
    let m = Machine::get().ok_or(Error::NotInitialized)?;
    m.enter(cx)?;
    Ok(m)
}

fn stream_ref(s: Handle) -> StreamRef {
    match s as usize {
        // The NULL stream is the legacy default stream (the `_ptsz` entry points, which
        // make it the per-thread one, are not exported).
        0 | STREAM_LEGACY => StreamRef::Legacy,
        STREAM_PER_THREAD => StreamRef::PerThread,
        h => StreamRef::Handle(h as u64),
    }
}

// NCCL's C API over this double's machine (NCCL): the build
// gives this library a second name (`libnccl.so.2`) so that the engine and the driver share one
// machine.
gpuport_double_sim::nccl_exports!(stream_ref, ncclAlltoAll);

fn handle(h: u64) -> Handle {
    h as usize as Handle
}

fn device(m: &Machine, dev: CUdevice) -> Result<usize> {
    m.check_device(i64::from(dev))
}

gpuport_double_sim::export_c! {
    returns CUresult, codes code, unknown CUDA_ERROR_UNKNOWN;

    /// `cuInit` (Initialization): flags must be 0. Without devices: `CUDA_ERROR_NO_DEVICE`.
    #[no_mangle]
    fn cuInit[cx](flags: c_uint) {
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        let m = Machine::init(
            Vendor { name: "cuda", tag: 0x0C00, prefix: "cu", lost_status: CUDA_ERROR_DEVICE_UNAVAILABLE, facts },
            &status::Table,
            &["CUDA_ERROR_"],
        );
        m.enter(&cx)?;
        if m.device_count() == 0 {
            return Err(Error::NoDevice);
        }
        Ok(())
    }

    /// `cuDriverGetVersion` (Version Management): callable before `cuInit`.
    #[no_mangle]
    fn cuDriverGetVersion[cx](driverVersion: *mut c_int) {
        let _ = &cx;
        // SAFETY: the caller passes a valid out-pointer or null (refused).
        unsafe { put(driverVersion, DRIVER_VERSION) }
    }

    /// `cuGetProcAddress_v2` (Driver Entry Point Access): the versioned entry point of
    /// `symbol` for CUDA version `cudaVersion`; `flags` 0 (the legacy default stream
    /// semantics) or `CU_GET_PROC_ADDRESS_LEGACY_STREAM` (1) only.
    #[no_mangle]
    fn cuGetProcAddress_v2[cx](
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        cudaVersion: c_int,
        flags: u64,
        symbolStatus: *mut c_int,
    ) {
        let _ = &cx;
        // SAFETY: the caller passes a NUL-terminated name and valid out-pointers.
        unsafe { proc_address(symbol, pfn, cudaVersion, flags, symbolStatus) }
    }

    /// `cuGetProcAddress` (the CUDA 11.3 form, without the status out-pointer).
    #[no_mangle]
    fn cuGetProcAddress[cx](symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64) {
        let _ = &cx;
        // SAFETY: as above.
        unsafe { proc_address(symbol, pfn, cudaVersion, flags, std::ptr::null_mut()) }
    }

    /// `cuGetErrorName` (Error Handling): a static string; an unknown status is
    /// `CUDA_ERROR_INVALID_VALUE` with `*pStr` set to NULL.
    #[no_mangle]
    fn cuGetErrorName[cx](error: CUresult, pStr: *mut *const c_char) {
        let _ = &cx;
        let name = status::name(error);
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { put(pStr, name.map_or(std::ptr::null(), |(n, _)| n.as_ptr())) }?;
        name.map(|_| ()).ok_or(Error::InvalidValue)
    }

    /// `cuGetErrorString` (Error Handling).
    #[no_mangle]
    fn cuGetErrorString[cx](error: CUresult, pStr: *mut *const c_char) {
        let _ = &cx;
        let name = status::name(error);
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { put(pStr, name.map_or(std::ptr::null(), |(_, t)| t.as_ptr())) }?;
        name.map(|_| ()).ok_or(Error::InvalidValue)
    }

    /// `cuDeviceGetCount` (Device Management).
    #[no_mangle]
    fn cuDeviceGetCount[cx](count: *mut c_int) {
        let m = machine(&cx)?;
        // SAFETY: a valid out-pointer (or null, refused).
        unsafe { put(count, m.device_count() as c_int) }
    }

    /// `cuDeviceGet`.
    #[no_mangle]
    fn cuDeviceGet[cx](dev: *mut CUdevice, ordinal: c_int) {
        let m = machine(&cx)?;
        let d = device(m, ordinal)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(dev, d as CUdevice) }
    }

    /// `cuDeviceGetName`.
    #[no_mangle]
    fn cuDeviceGetName[cx](name: *mut c_char, len: c_int, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe { put_text(name, len, &m.facts(d).name) }
    }

    /// `cuDeviceTotalMem_v2`.
    #[no_mangle]
    fn cuDeviceTotalMem_v2[cx](bytes: *mut usize, dev: CUdevice) {
        let m = machine(&cx)?;
        device(m, dev)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(bytes, m.memory_per_device()) }
    }

    /// `cuDeviceGetAttribute`: the attributes in [`attribute`]; any other is
    /// `CUDA_ERROR_INVALID_VALUE` (not simulated).
    #[no_mangle]
    fn cuDeviceGetAttribute[cx](pi: *mut c_int, attrib: c_int, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let f = m.facts(d);
        use attribute::*;
        let v = match attrib {
            MAX_THREADS_PER_BLOCK => 1024,
            WARP_SIZE => 32,
            MULTIPROCESSOR_COUNT => f.multiprocessors,
            CAN_MAP_HOST_MEMORY | UNIFIED_ADDRESSING | MANAGED_MEMORY | CONCURRENT_MANAGED_ACCESS
            | MEMORY_POOLS_SUPPORTED => 1,
            PCI_BUS_ID => 0x41 + d as i32,
            PCI_DEVICE_ID | PCI_DOMAIN_ID => 0,
            COMPUTE_CAPABILITY_MAJOR => f.major,
            COMPUTE_CAPABILITY_MINOR => f.minor,
            _ => return Err(Error::InvalidValue),
        };
        // SAFETY: a valid out-pointer.
        unsafe { put(pi, v) }
    }

    /// `cuDeviceGetUuid_v2`.
    #[no_mangle]
    fn cuDeviceGetUuid_v2[cx](uuid: *mut CUuuid, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let bytes = m.facts(d).uuid.map(|b| b as c_char);
        // SAFETY: a valid out-pointer.
        unsafe { put(uuid, CUuuid { bytes }) }
    }

    /// `cuDeviceGetUuid` (the same answer as `_v2` here).
    #[no_mangle]
    fn cuDeviceGetUuid[cx](uuid: *mut CUuuid, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let bytes = m.facts(d).uuid.map(|b| b as c_char);
        // SAFETY: a valid out-pointer.
        unsafe { put(uuid, CUuuid { bytes }) }
    }

    /// `cuDeviceGetPCIBusId`: `domain:bus:device.function`.
    #[no_mangle]
    fn cuDeviceGetPCIBusId[cx](pciBusId: *mut c_char, len: c_int, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe { put_text(pciBusId, len, &m.facts(d).pci_bus_id) }
    }

    /// `cuDeviceCanAccessPeer` (Peer Context Memory Access): every simulated device can
    /// reach every other one; a device is not its own peer.
    #[no_mangle]
    fn cuDeviceCanAccessPeer[cx](canAccessPeer: *mut c_int, dev: CUdevice, peerDev: CUdevice) {
        let m = machine(&cx)?;
        let (a, b) = (device(m, dev)?, device(m, peerDev)?);
        // SAFETY: a valid out-pointer.
        unsafe { put(canAccessPeer, c_int::from(a != b)) }
    }

    /// `cuDevicePrimaryCtxRetain` (Primary Context Management).
    #[no_mangle]
    fn cuDevicePrimaryCtxRetain[cx](pctx: *mut Handle, dev: CUdevice) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        if pctx.is_null() {
            return Err(Error::InvalidValue);
        }
        let ctx = m.primary_retain(&cx, d)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(pctx, handle(ctx)) }
    }

    /// `cuDevicePrimaryCtxRelease_v2`: the last release destroys the context and all it
    /// holds (what is still alive then is reported as leaked).
    #[no_mangle]
    fn cuDevicePrimaryCtxRelease_v2[cx](dev: CUdevice) {
        let m = machine(&cx)?;
        // A lost device's context can still be released.
        let d = usize::try_from(dev).ok().filter(|&d| d < m.device_count()).ok_or(Error::InvalidDevice)?;
        m.primary_release(&cx, d)
    }

    /// `cuCtxGetCurrent` (Context Management): NULL when none is current.
    #[no_mangle]
    fn cuCtxGetCurrent[cx](pctx: *mut Handle) {
        machine(&cx)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(pctx, handle(current_context())) }
    }

    /// `cuCtxSetCurrent`: the context must be live (stricter than the driver, which may
    /// not notice a destroyed one until it is used).
    #[no_mangle]
    fn cuCtxSetCurrent[cx](ctx: Handle) {
        let m = machine(&cx)?;
        m.check_context(&cx, ctx as u64)?;
        set_current_context(ctx as u64);
        Ok(())
    }

    /// `cuCtxSynchronize`: waits for every stream of the current context.
    #[no_mangle]
    fn cuCtxSynchronize[cx]() {
        machine(&cx)?.context_synchronize(&cx)
    }

    /// `cuCtxGetStreamPriorityRange`: needs a current context; either pointer may be NULL.
    #[no_mangle]
    fn cuCtxGetStreamPriorityRange[cx](leastPriority: *mut c_int, greatestPriority: *mut c_int) {
        let m = machine(&cx)?;
        m.current_device(&cx)?;
        let (least, greatest) = m.priority_range();
        if !leastPriority.is_null() {
            // SAFETY: non-null: a valid out-pointer.
            unsafe { put(leastPriority, least) }?;
        }
        if !greatestPriority.is_null() {
            // SAFETY: as above.
            unsafe { put(greatestPriority, greatest) }?;
        }
        Ok(())
    }

    /// `cuCtxEnablePeerAccess`: from the current context to `peerContext`'s device; flags
    /// must be 0; a second call is `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
    #[no_mangle]
    fn cuCtxEnablePeerAccess[cx](peerContext: Handle, Flags: c_uint) {
        let m = machine(&cx)?;
        if Flags != 0 {
            return Err(Error::InvalidValue);
        }
        m.check_context(&cx, peerContext as u64)?;
        let peer = m.context_device(peerContext as u64).ok_or(Error::InvalidContext)?;
        m.enable_peer(&cx, peer)
    }

    /// `cuMemAlloc_v2` (Memory Management): 256-byte aligned, not cleared.
    #[no_mangle]
    fn cuMemAlloc_v2[cx](dptr: *mut CUdeviceptr, bytesize: usize) {
        let m = machine(&cx)?;
        if dptr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_device(&cx, bytesize)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(dptr, p as CUdeviceptr) }
    }

    /// `cuMemFree_v2`: an address that is not the start of a live allocation is reported.
    #[no_mangle]
    fn cuMemFree_v2[cx](dptr: CUdeviceptr) {
        machine(&cx)?.free(&cx, dptr as usize, false)
    }

    /// `cuMemHostAlloc`: flags are `CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP | WRITECOMBINED`.
    #[no_mangle]
    fn cuMemHostAlloc[cx](pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) {
        let m = machine(&cx)?;
        if Flags & !0x7 != 0 || pp.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_host(&cx, bytesize, false)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(pp, p as *mut c_void) }
    }

    /// `cuMemFreeHost`.
    #[no_mangle]
    fn cuMemFreeHost[cx](p: *mut c_void) {
        machine(&cx)?.free(&cx, p as usize, true)
    }

    /// `cuMemHostRegister_v2`: page-locks host memory the driver did not allocate; flags
    /// are `CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP | IOMEMORY | READ_ONLY`.
    #[no_mangle]
    fn cuMemHostRegister_v2[cx](p: *mut c_void, bytesize: usize, Flags: c_uint) {
        machine(&cx)?.register_host(&cx, p as usize, bytesize, Flags)
    }

    /// `cuMemHostUnregister`.
    #[no_mangle]
    fn cuMemHostUnregister[cx](p: *mut c_void) {
        machine(&cx)?.unregister_host(&cx, p as usize)
    }

    /// `cuMemAllocManaged`: flags `CU_MEM_ATTACH_GLOBAL` (1) or `CU_MEM_ATTACH_HOST` (2).
    #[no_mangle]
    fn cuMemAllocManaged[cx](dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) {
        let m = machine(&cx)?;
        if (flags != 1 && flags != 2) || dptr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_host(&cx, bytesize, true)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(dptr, p as CUdeviceptr) }
    }

    /// `cuMemsetD8_v2`: queued on the legacy default stream; asynchronous for device
    /// memory (as the driver's API synchronisation notes say).
    #[no_mangle]
    fn cuMemsetD8_v2[cx](dstDevice: CUdeviceptr, uc: u8, N: usize) {
        machine(&cx)?.memset(&cx, dstDevice as usize, uc, N, StreamRef::Legacy)
    }

    /// `cuMemsetD8Async`.
    #[no_mangle]
    fn cuMemsetD8Async[cx](dstDevice: CUdeviceptr, uc: u8, N: usize, hStream: Handle) {
        machine(&cx)?.memset(&cx, dstDevice as usize, uc, N, stream_ref(hStream))
    }

    /// `cuMemcpyAsync`: unified addressing infers the kind of each side.
    #[no_mangle]
    fn cuMemcpyAsync[cx](dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: Handle) {
        machine(&cx)?.memcpy(&cx, dst as usize, src as usize, ByteCount, stream_ref(hStream), MemcpyCheck::Unified)
    }

    /// `cuMemcpy2DAsync` (`_v2`): unified addressing on both sides
    /// (`CU_MEMORYTYPE_UNIFIED`, the row offsets `XInBytes` and `Y` honoured), pitches
    /// between the width and the device's maximum. Arrays and the typed host and device
    /// memory kinds are refused: gpuport never passes them (stricter than the driver).
    #[no_mangle]
    fn cuMemcpy2DAsync_v2[cx](pCopy: *const CUDA_MEMCPY2D, hStream: Handle) {
        let m = machine(&cx)?;
        // SAFETY: the caller passes a valid description or null (refused).
        let Some(c) = (unsafe { pCopy.as_ref() }) else { return Err(Error::InvalidValue) };
        if c.srcMemoryType != MEMORYTYPE_UNIFIED || c.dstMemoryType != MEMORYTYPE_UNIFIED {
            violation(
                "unsupported-memory-type",
                &cx,
                format!("memory types {} → {}: only unified addressing (4) is served", c.srcMemoryType, c.dstMemoryType),
            );
            return Err(Error::InvalidValue);
        }
        let corner = |base: CUdeviceptr, x: usize, y: usize, pitch: usize| {
            y.checked_mul(pitch).and_then(|rows| rows.checked_add(x)).and_then(|o| (base as usize).checked_add(o))
        };
        let src = corner(c.srcDevice, c.srcXInBytes, c.srcY, c.srcPitch).ok_or(Error::InvalidValue)?;
        let dst = corner(c.dstDevice, c.dstXInBytes, c.dstY, c.dstPitch).ok_or(Error::InvalidValue)?;
        m.memcpy_2d(&cx, dst, c.dstPitch, src, c.srcPitch, c.WidthInBytes, c.Height, stream_ref(hStream))
    }

    /// `cuMemcpyPeerAsync`: each side must be device memory of its context's device.
    #[no_mangle]
    fn cuMemcpyPeerAsync[cx](
        dstDevice: CUdeviceptr,
        dstContext: Handle,
        srcDevice: CUdeviceptr,
        srcContext: Handle,
        ByteCount: usize,
        hStream: Handle,
    ) {
        let m = machine(&cx)?;
        m.check_context(&cx, dstContext as u64)?;
        m.check_context(&cx, srcContext as u64)?;
        let dst_device = m.context_device(dstContext as u64).ok_or(Error::InvalidContext)?;
        let src_device = m.context_device(srcContext as u64).ok_or(Error::InvalidContext)?;
        let check = MemcpyCheck::Peer { dst_device, src_device };
        m.memcpy(&cx, dstDevice as usize, srcDevice as usize, ByteCount, stream_ref(hStream), check)
    }

    /// `cuStreamCreateWithPriority` (Stream Management): flags `CU_STREAM_DEFAULT` (0) or
    /// `CU_STREAM_NON_BLOCKING` (1); the priority is clamped.
    #[no_mangle]
    fn cuStreamCreateWithPriority[cx](phStream: *mut Handle, flags: c_uint, priority: c_int) {
        let m = machine(&cx)?;
        let _ = priority;
        if flags > 1 || phStream.is_null() {
            return Err(Error::InvalidValue);
        }
        let s = m.stream_create(&cx, flags == 0)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(phStream, handle(s)) }
    }

    /// `cuStreamDestroy_v2`: queued work still completes; a default stream cannot be
    /// destroyed.
    #[no_mangle]
    fn cuStreamDestroy_v2[cx](hStream: Handle) {
        let m = machine(&cx)?;
        match stream_ref(hStream) {
            StreamRef::Handle(h) => m.stream_destroy(&cx, h),
            _ => {
                violation("bad-handle", &cx, "a default stream cannot be destroyed");
                Err(Error::InvalidHandle)
            }
        }
    }

    /// `cuStreamSynchronize`.
    #[no_mangle]
    fn cuStreamSynchronize[cx](hStream: Handle) {
        machine(&cx)?.stream_synchronize(&cx, stream_ref(hStream))
    }

    /// `cuStreamQuery`: `CUDA_ERROR_NOT_READY` while work is pending.
    #[no_mangle]
    fn cuStreamQuery[cx](hStream: Handle) {
        let done = machine(&cx)?.stream_query(&cx, stream_ref(hStream))?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `cuStreamWaitEvent`: flags must be 0 (`CU_EVENT_WAIT_DEFAULT`).
    #[no_mangle]
    fn cuStreamWaitEvent[cx](hStream: Handle, hEvent: Handle, Flags: c_uint) {
        let m = machine(&cx)?;
        if Flags != 0 {
            return Err(Error::InvalidValue);
        }
        m.stream_wait_event(&cx, stream_ref(hStream), hEvent as u64)
    }

    /// `cuEventCreate` (Event Management): flags `BLOCKING_SYNC` (1), `DISABLE_TIMING` (2),
    /// `INTERPROCESS` (4, only with `DISABLE_TIMING`).
    #[no_mangle]
    fn cuEventCreate[cx](phEvent: *mut Handle, Flags: c_uint) {
        let m = machine(&cx)?;
        if Flags & !0x7 != 0 || (Flags & 4 != 0 && Flags & 2 == 0) || phEvent.is_null() {
            return Err(Error::InvalidValue);
        }
        let timing = if Flags & 2 != 0 { EventTiming::Off } else { EventTiming::On };
        let e = m.event_create(&cx, timing)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(phEvent, handle(e)) }
    }

    /// `cuEventDestroy_v2`: a pending record still completes.
    #[no_mangle]
    fn cuEventDestroy_v2[cx](hEvent: Handle) {
        machine(&cx)?.event_destroy(&cx, hEvent as u64)
    }

    /// `cuEventRecord`: the event and the stream must share a context.
    #[no_mangle]
    fn cuEventRecord[cx](hEvent: Handle, hStream: Handle) {
        machine(&cx)?.event_record(&cx, hEvent as u64, stream_ref(hStream))
    }

    /// `cuEventQuery`: `CUDA_ERROR_NOT_READY` while its latest record is pending.
    #[no_mangle]
    fn cuEventQuery[cx](hEvent: Handle) {
        let done = machine(&cx)?.event_query(&cx, hEvent as u64)?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `cuEventSynchronize`.
    #[no_mangle]
    fn cuEventSynchronize[cx](hEvent: Handle) {
        machine(&cx)?.event_synchronize(&cx, hEvent as u64)
    }

    /// `cuEventElapsedTime`: `CUDA_ERROR_INVALID_HANDLE` when either event has no timing
    /// or was never recorded, `CUDA_ERROR_NOT_READY` while either is pending.
    #[no_mangle]
    fn cuEventElapsedTime[cx](pMilliseconds: *mut f32, hStart: Handle, hEnd: Handle) {
        let m = machine(&cx)?;
        let ms = m.event_elapsed(&cx, hStart as u64, hEnd as u64)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(pMilliseconds, ms) }
    }

    /// `cuLaunchHostFunc` (Execution Control): `fn(userData)` runs on the stream's thread
    /// when the stream reaches it; not at all once the context failed. A driver call made
    /// from inside it is reported.
    #[no_mangle]
    fn cuLaunchHostFunc[cx](hStream: Handle, f: CUhostFn, userData: *mut c_void) {
        let m = machine(&cx)?;
        let f = f.ok_or(Error::InvalidValue)?;
        m.host_function(&cx, stream_ref(hStream), HostCallback::Plain(f), userData)
    }

    /// `cuPointerGetAttributes` (Unified Addressing): for memory the driver does not know
    /// it succeeds with default answers (memory type 0, ordinal -2), as documented.
    #[no_mangle]
    fn cuPointerGetAttributes[cx](numAttributes: c_uint, attributes: *mut c_int, data: *mut *mut c_void, ptr: CUdeviceptr) {
        let m = machine(&cx)?;
        if attributes.is_null() || data.is_null() {
            return Err(Error::InvalidValue);
        }
        let info = m.pointer_info(ptr as usize);
        for i in 0..numAttributes as usize {
            // SAFETY: the caller passes `numAttributes` attributes and as many pointers.
            let (attr, out) = unsafe { (*attributes.add(i), *data.add(i)) };
            // SAFETY: each pointer is valid for its attribute's documented type.
            unsafe { write_pointer_attribute(attr, out, info, ptr) }?;
        }
        Ok(())
    }

    /// `cuModuleLoadData` (Module Management): PTX text, a cubin or a fatbin; its entry
    /// points are read, and lookups of anything but the double's kernels are
    /// `CUDA_ERROR_NOT_FOUND`.
    #[no_mangle]
    fn cuModuleLoadData[cx](module: *mut Handle, image: *const c_void) {
        let m = machine(&cx)?;
        if module.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: the image is well formed (the driver's contract).
        let bytes = unsafe { image_bytes(image.cast()) }?;
        let entries = if bytes.starts_with(b"\x7fELF") {
            image::elf_entries(bytes)?
        } else if bytes.get(..4) == Some(&image::FATBIN_MAGIC.to_le_bytes()) {
            image::fatbin_entries(bytes)?
        } else {
            let text = std::str::from_utf8(bytes).map_err(|_| Error::InvalidImage)?;
            if !image::is_ptx(text) {
                return Err(Error::Raw(CUDA_ERROR_INVALID_PTX));
            }
            image::ptx_entries(text)
        };
        let h = m.module_load(&cx, entries)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(module, handle(h)) }
    }

    /// `cuModuleUnload`.
    #[no_mangle]
    fn cuModuleUnload[cx](hmod: Handle) {
        machine(&cx)?.module_unload(&cx, hmod as u64)
    }

    /// `cuModuleGetFunction`: `CUDA_ERROR_NOT_FOUND` for a name the module lacks or the
    /// double cannot run.
    #[no_mangle]
    fn cuModuleGetFunction[cx](hfunc: *mut Handle, hmod: Handle, name: *const c_char) {
        let m = machine(&cx)?;
        if name.is_null() || hfunc.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: a NUL-terminated name (the contract).
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Error::NotFound)?;
        let f = m.module_function(&cx, hmod as u64, name)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(hfunc, handle(f)) }
    }

    /// `cuLaunchKernel`: the geometry is checked as the driver does (a block of at most
    /// 1024 threads, dimensions within limits, 48 KiB of shared memory without opt-in);
    /// the arguments come through `kernelParams` (`extra` is not supported).
    #[no_mangle]
    fn cuLaunchKernel[cx](
        f: Handle,
        gridDimX: c_uint,
        gridDimY: c_uint,
        gridDimZ: c_uint,
        blockDimX: c_uint,
        blockDimY: c_uint,
        blockDimZ: c_uint,
        sharedMemBytes: c_uint,
        hStream: Handle,
        kernelParams: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) {
        let m = machine(&cx)?;
        let threads = u64::from(blockDimX) * u64::from(blockDimY) * u64::from(blockDimZ);
        let bad_grid = gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || gridDimX > i32::MAX as u32
            || gridDimY > 65535 || gridDimZ > 65535;
        let bad_block = threads == 0 || threads > 1024 || blockDimZ > 64;
        if bad_grid || bad_block || sharedMemBytes > 48 * 1024 || kernelParams.is_null() || !extra.is_null() {
            return Err(Error::InvalidValue);
        }
        let params = kernelParams as *const *const c_void;
        // SAFETY: one pointer per kernel parameter (the launch contract), read during the
        // call.
        unsafe { m.launch_kernel(&cx, f as u64, params, gridDimX, blockDimX, stream_ref(hStream)) }
    }

    /// `cuMemAllocAsync` (Stream Ordered Memory Allocator): the memory may be used in the
    /// stream's order from here on; other streams must be ordered after this point.
    #[no_mangle]
    fn cuMemAllocAsync[cx](dptr: *mut CUdeviceptr, bytesize: usize, hStream: Handle) {
        let m = machine(&cx)?;
        if dptr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_async(&cx, bytesize, stream_ref(hStream))?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(dptr, p as CUdeviceptr) }
    }

    /// `cuMemFreeAsync`: work queued after the free that touches the memory is reported.
    #[no_mangle]
    fn cuMemFreeAsync[cx](dptr: CUdeviceptr, hStream: Handle) {
        machine(&cx)?.free_async(&cx, dptr as usize, stream_ref(hStream))
    }
}

/// Pre-CUDA 3.2 entry points with 32-bit device pointers: libcuda still exports them
/// under the unversioned names. gpuport must resolve the `_v2` functions; a call here is
/// reported and refused.
macro_rules! old_abi {
    ($($name:ident => $current:literal),* $(,)?) => {
        $(
            #[doc = concat!("The old-ABI `", stringify!($name), "`: reported, `CUDA_ERROR_NOT_SUPPORTED`; use `", $current, "`.")]
            #[no_mangle]
            pub extern "C" fn $name() -> CUresult {
                let args = || String::from("…");
                let cx = Call { name: stringify!($name), args: &args };
                serve(&cx, code, CUDA_ERROR_UNKNOWN, || {
                    violation("old-abi", &cx, concat!("the pre-3.2 ABI entry point was called; the current one is ", $current));
                    Err(Error::NotSupported)
                })
            }
        )*
    };
}

old_abi! {
    cuMemAlloc => "cuMemAlloc_v2",
    cuMemFree => "cuMemFree_v2",
    cuDeviceTotalMem => "cuDeviceTotalMem_v2",
    cuMemsetD8 => "cuMemsetD8_v2",
    cuStreamDestroy => "cuStreamDestroy_v2",
    cuEventDestroy => "cuEventDestroy_v2",
    cuDevicePrimaryCtxRelease => "cuDevicePrimaryCtxRelease_v2",
}

/// Writes one pointer attribute.
///
/// # Safety
/// `out` is valid for the attribute's type.
unsafe fn write_pointer_attribute(
    attr: c_int,
    out: *mut c_void,
    info: Option<gpuport_double_sim::PointerInfo>,
    ptr: CUdeviceptr,
) -> Result<()> {
    // SAFETY: `out` has the documented type of the attribute each arm writes (the contract).
    unsafe {
        match attr {
            pointer::CONTEXT => put(out.cast::<Handle>(), info.map_or(std::ptr::null_mut(), |i| handle(i.context))),
            pointer::MEMORY_TYPE => put(
                out.cast::<c_uint>(),
                match info.map(|i| i.kind) {
                    None => 0,
                    Some(Attributes::Pinned) => pointer::MEMORYTYPE_HOST,
                    Some(_) => pointer::MEMORYTYPE_DEVICE,
                },
            ),
            pointer::DEVICE_POINTER => put(out.cast::<CUdeviceptr>(), if info.is_some() { ptr } else { 0 }),
            pointer::HOST_POINTER => put(
                out.cast::<*mut c_void>(),
                match info.map(|i| i.kind) {
                    Some(Attributes::Pinned | Attributes::Managed) => ptr as usize as *mut c_void,
                    _ => std::ptr::null_mut(),
                },
            ),
            pointer::IS_MANAGED => {
                put(out.cast::<c_uint>(), c_uint::from(info.is_some_and(|i| i.kind == Attributes::Managed)))
            }
            pointer::DEVICE_ORDINAL => put(out.cast::<c_int>(), info.map_or(-2, |i| i.device as c_int)),
            pointer::RANGE_START_ADDR => put(out.cast::<CUdeviceptr>(), info.map_or(0, |i| i.start)),
            pointer::RANGE_SIZE => put(out.cast::<usize>(), info.map_or(0, |i| i.size as usize)),
            _ => Err(Error::InvalidValue),
        }
    }
}

/// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND` / `VERSION_NOT_SUFFICIENT`.
const SYMBOL_NOT_FOUND: c_int = 1;
const VERSION_NOT_SUFFICIENT: c_int = 2;

/// (base name, CUDA version that introduced the entry point, the entry point).
fn entry_points() -> &'static [(&'static str, c_int, usize)] {
    static TABLE: OnceLock<Vec<(&'static str, c_int, usize)>> = OnceLock::new();
    macro_rules! table {
        ($($base:literal $since:literal => $f:ident),* $(,)?) => {
            vec![$(($base, $since, $f as *const () as usize)),*]
        };
    }
    TABLE.get_or_init(|| {
        table! {
            "cuInit" 2000 => cuInit,
            "cuDriverGetVersion" 2020 => cuDriverGetVersion,
            "cuGetProcAddress" 11030 => cuGetProcAddress_v2,
            "cuGetErrorName" 6000 => cuGetErrorName,
            "cuGetErrorString" 6000 => cuGetErrorString,
            "cuDeviceGetCount" 2000 => cuDeviceGetCount,
            "cuDeviceGet" 2000 => cuDeviceGet,
            "cuDeviceGetName" 2000 => cuDeviceGetName,
            "cuDeviceTotalMem" 3020 => cuDeviceTotalMem_v2,
            "cuDeviceGetAttribute" 2000 => cuDeviceGetAttribute,
            "cuDeviceGetUuid" 11040 => cuDeviceGetUuid_v2,
            "cuDeviceGetPCIBusId" 4010 => cuDeviceGetPCIBusId,
            "cuDeviceCanAccessPeer" 4000 => cuDeviceCanAccessPeer,
            "cuDevicePrimaryCtxRetain" 7000 => cuDevicePrimaryCtxRetain,
            "cuDevicePrimaryCtxRelease" 11000 => cuDevicePrimaryCtxRelease_v2,
            "cuCtxGetCurrent" 4000 => cuCtxGetCurrent,
            "cuCtxSetCurrent" 4000 => cuCtxSetCurrent,
            "cuCtxSynchronize" 2000 => cuCtxSynchronize,
            "cuCtxGetStreamPriorityRange" 5050 => cuCtxGetStreamPriorityRange,
            "cuCtxEnablePeerAccess" 4000 => cuCtxEnablePeerAccess,
            "cuMemAlloc" 3020 => cuMemAlloc_v2,
            "cuMemFree" 3020 => cuMemFree_v2,
            "cuMemHostAlloc" 2020 => cuMemHostAlloc,
            "cuMemFreeHost" 2000 => cuMemFreeHost,
            "cuMemHostRegister" 6050 => cuMemHostRegister_v2,
            "cuMemHostUnregister" 4000 => cuMemHostUnregister,
            "cuMemAllocManaged" 6000 => cuMemAllocManaged,
            "cuMemsetD8" 3020 => cuMemsetD8_v2,
            "cuMemsetD8Async" 3020 => cuMemsetD8Async,
            "cuMemcpyAsync" 4000 => cuMemcpyAsync,
            "cuMemcpy2DAsync" 3020 => cuMemcpy2DAsync_v2,
            "cuMemcpyPeerAsync" 4000 => cuMemcpyPeerAsync,
            "cuStreamCreateWithPriority" 5050 => cuStreamCreateWithPriority,
            "cuStreamDestroy" 4000 => cuStreamDestroy_v2,
            "cuStreamSynchronize" 2000 => cuStreamSynchronize,
            "cuStreamQuery" 2000 => cuStreamQuery,
            "cuStreamWaitEvent" 3020 => cuStreamWaitEvent,
            "cuEventCreate" 2000 => cuEventCreate,
            "cuEventDestroy" 4000 => cuEventDestroy_v2,
            "cuEventRecord" 2000 => cuEventRecord,
            "cuEventQuery" 2000 => cuEventQuery,
            "cuEventSynchronize" 2000 => cuEventSynchronize,
            "cuEventElapsedTime" 2000 => cuEventElapsedTime,
            "cuLaunchHostFunc" 10000 => cuLaunchHostFunc,
            "cuPointerGetAttributes" 7000 => cuPointerGetAttributes,
            "cuModuleLoadData" 2000 => cuModuleLoadData,
            "cuModuleUnload" 2000 => cuModuleUnload,
            "cuModuleGetFunction" 2000 => cuModuleGetFunction,
            "cuLaunchKernel" 4000 => cuLaunchKernel,
            "cuMemAllocAsync" 11020 => cuMemAllocAsync,
            "cuMemFreeAsync" 11020 => cuMemFreeAsync,
        }
    })
}

/// `cuGetProcAddress`'s lookup.
///
/// # Safety
/// `symbol` is NUL-terminated; `pfn` and `status` are valid out-pointers (`status` may be
/// null).
unsafe fn proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> Result<()> {
    if symbol.is_null() || pfn.is_null() || flags > 1 {
        return Err(Error::InvalidValue);
    }
    // SAFETY: a NUL-terminated name (the contract).
    let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
    let found = entry_points().iter().find(|(base, _, _)| *base == name);
    let (result, f, code) = match found {
        Some(&(_, since, _)) if version < since => (Err(Error::NotFound), 0, VERSION_NOT_SUFFICIENT),
        Some(&(_, _, f)) => (Ok(()), f, 0),
        None => (Err(Error::NotFound), 0, SYMBOL_NOT_FOUND),
    };
    // SAFETY: valid out-pointers (the contract); `status` may be null.
    unsafe {
        put(pfn, f as *mut c_void)?;
        if !status.is_null() {
            put(status, code)?;
        }
    }
    result
}

#[cfg(test)]
mod tests;
