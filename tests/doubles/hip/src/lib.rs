//! # gpuport-hip-double
//!
//! A HIP runtime double: a shared library exporting the libamdhip64 functions gpuport
//! resolves, with the C ABI of `hip_runtime_api.h`, over the simulated machine of
//! `gpuport-double-sim`. Built as ROCm 6.4 by default, as ROCm 5.2 with the `rocm5`
//! feature and as HIP 7.2 with the `rocm7` feature; each follows the version it reports:
//!
//! | | HIP 7.2 (`rocm7`) | ROCm 6.4 | ROCm 5.2 (`rocm5`) |
//! | --- | --- | --- | --- |
//! | `hipMemoryType` | 6.x numbering (Unregistered 0, Host 1, Device 2, Managed 3) | the same | 5.x (Host 0, Device 1, Array 2, Unified 3, Managed 4) |
//! | `hipPointerGetAttributes` of unknown memory | success, `hipMemoryTypeUnregistered` | the same | `hipErrorInvalidValue` |
//! | `hipPointerGetAttributes(NULL)`, `hipFreeAsync(NULL)` | success | `hipErrorInvalidValue` | `hipErrorInvalidValue` |
//! | `hipGetLastError` | the last failure since the last read, as CUDA's | the status of the thread's last call | the same |
//! | a launch configuration out of range | `hipErrorInvalidConfiguration` | `hipErrorInvalidValue` | the same |
//! | `hipStreamLegacy` (`(hipStream_t)1`) | the legacy default stream | a stream handle never made (reported) | the same |
//! | `hipStreamPerThread` (`(hipStream_t)2`) | the calling thread's default stream | the same | a stream handle never made (reported) |
//! | `hipGetProcAddress` flags | `DEFAULT` 0, `LEGACY_STREAM` 1; `PER_THREAD_DEFAULT_STREAM` 2 reported (no `_spt` twins here) | 0 only | not exported |
//! | `hipGetErrorString` | a description | the same | the status's name |
//! | `hipGetProcAddress`, `hipLaunchHostFunc`, `hipGetDevicePropertiesR0600` | exported | exported | absent (as in 5.2) |
//!
//! None exports `hiprtc*` (HIP 7's runtime does not; gpuport never looks for the compiler
//! in the runtime) or the deprecated `hipCtx*` API. Every version reports a call that
//! names a destroyed stream, where HIP 7 may crash.
//!
//! Every exported function that can fail serves its call inside `catch_unwind` (the
//! simulation's `serve`); the error-name functions only index static tables.
//!
//! `cargo xtask doubles` builds both into `target/doubles/rocm6` and `rocm5`. Each
//! function's comment names the section of AMD's *HIP Runtime API reference* it follows.
//! The devices report `gfx90a` (device 0) and `gfx942` (others), so a code-object bundle
//! must carry the right entry for each.

#![allow(non_snake_case, non_upper_case_globals)]

pub mod props;
pub mod status;

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use gpuport_double_sim::ffi::{image_bytes, put, put_text};
use gpuport_double_sim::report::violation;
use gpuport_double_sim::{
    current_context, image, set_current_context, Attributes, Call, DeviceFacts, Error, EventTiming, HostCallback,
    Machine, MemcpyCheck, Result, StreamRef, Vendor,
};

use status::*;
pub use status::{code, HipError};

#[cfg(all(feature = "rocm5", feature = "rocm7"))]
compile_error!("the HIP double is built as one ROCm version: features `rocm5` and `rocm7` exclude each other");

/// Whether this build is the ROCm 5.2 runtime.
pub const ROCM5: bool = cfg!(feature = "rocm5");
/// Whether this build is the HIP 7.2 runtime.
pub const ROCM7: bool = cfg!(feature = "rocm7");
/// The HIP major version this build reports (5, 6 or 7).
pub const MAJOR: c_int = if ROCM5 {
    5
} else if ROCM7 {
    7
} else {
    6
};

/// `hipRuntimeGetVersion`: major·10⁷ + minor·10⁵ + patch (5.2.21153, 6.4.43484, 7.2.53211).
pub const RUNTIME_VERSION: c_int = match MAJOR {
    5 => 50_221_153,
    6 => 60_443_484,
    _ => 70_253_211,
};

/// `hipStreamLegacy` (HIP 7).
pub const STREAM_LEGACY: usize = 1;
/// `hipStreamPerThread` (from ROCm 6 in this double).
pub const STREAM_PER_THREAD: usize = 2;

/// `hipDeviceAttribute_t` values the double answers.
pub mod attribute {
    /// `hipDeviceAttributeComputeCapabilityMajor`.
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 23;
    /// `hipDeviceAttributeManagedMemory`.
    pub const MANAGED_MEMORY: i32 = 24;
    /// `hipDeviceAttributeMaxThreadsPerBlock`.
    pub const MAX_THREADS_PER_BLOCK: i32 = 56;
    /// `hipDeviceAttributeComputeCapabilityMinor`.
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 61;
    /// `hipDeviceAttributeMultiprocessorCount`.
    pub const MULTIPROCESSOR_COUNT: i32 = 63;
    /// `hipDeviceAttributePciBusId`.
    pub const PCI_BUS_ID: i32 = 67;
    /// `hipDeviceAttributeUnifiedAddressing`.
    pub const UNIFIED_ADDRESSING: i32 = 85;
    /// `hipDeviceAttributeWarpSize`.
    pub const WARP_SIZE: i32 = 87;
}

/// `hipMemoryType` values of the version this build reports.
pub mod memory_type {
    /// Unregistered memory (ROCm 6 only; ROCm 5 refuses the query).
    pub const UNREGISTERED: i32 = 0;
    /// `hipMemoryTypeHost`.
    pub const HOST: i32 = if super::ROCM5 { 0 } else { 1 };
    /// `hipMemoryTypeDevice`.
    pub const DEVICE: i32 = if super::ROCM5 { 1 } else { 2 };
    /// `hipMemoryTypeManaged`.
    pub const MANAGED: i32 = if super::ROCM5 { 4 } else { 3 };
}

/// `hipPointerAttribute_t` (the same layout in ROCm 5 and 6).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipPointerAttribute_t {
    /// `memoryType` (ROCm 5) / `type` (ROCm 6).
    pub memoryType: c_int,
    /// `device`.
    pub device: c_int,
    /// `devicePointer`.
    pub devicePointer: *mut c_void,
    /// `hostPointer`.
    pub hostPointer: *mut c_void,
    /// `isManaged`.
    pub isManaged: c_int,
    /// `allocationFlags`.
    pub allocationFlags: c_uint,
}

/// `hipUUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipUUID {
    /// The 16 bytes.
    pub bytes: [c_char; 16],
}

/// `hipStream_t`, `hipEvent_t`, `hipModule_t`, `hipFunction_t`: the double's tagged numbers.
pub type Handle = *mut c_void;

fn facts(i: usize, _memory: usize) -> DeviceFacts {
    let mut uuid = [0u8; 16];
    uuid[..8].copy_from_slice(b"gpuportH");
    uuid[15] = i as u8;
    let arch = if i == 0 { "gfx90a:sramecc+:xnack-" } else { "gfx942:sramecc+:xnack-" };
    DeviceFacts {
        name: format!("gpuport driver double (HIP) {i}"),
        major: 9,
        minor: 0,
        multiprocessors: 104,
        arch: arch.into(),
        pci_bus_id: format!("0000:{:02x}:00.0", 0x61 + i),
        uuid,
    }
}

/// The machine, once `hipInit` ran, with the calling thread's device made current.
fn machine(cx: &Call<'_>) -> Result<&'static Machine> {
    Machine::with_current_device(cx)
}

fn stream_ref(s: Handle) -> StreamRef {
    match s as usize {
        0 => StreamRef::Legacy,
        // `hipStreamLegacy`, from HIP 7; before, 1 is a handle no call made (reported).
        STREAM_LEGACY if ROCM7 => StreamRef::Legacy,
        // `hipStreamPerThread`, from ROCm 6.
        STREAM_PER_THREAD if !ROCM5 => StreamRef::PerThread,
        h => StreamRef::Handle(h as u64),
    }
}

// NCCL's C API over this double's machine (RCCL's, with its `ncclAllToAll`): the build
// gives this library a second name (`librccl.so.1`) so that the engine and the driver share one
// machine.
gpuport_double_sim::nccl_exports!(stream_ref, ncclAllToAll);

fn handle(h: u64) -> Handle {
    h as usize as Handle
}

fn device(m: &Machine, dev: c_int) -> Result<usize> {
    m.check_device(i64::from(dev))
}

/// The architecture a code object must be built for (`gfx90a`).
fn arch_of(m: &Machine, device: usize) -> String {
    m.facts(device).arch.split(':').next().unwrap_or("").to_owned()
}

gpuport_double_sim::export_c! {
    returns HipError, codes code, unknown hipErrorUnknown;

    /// `hipInit` (Initialization and Version): flags must be 0.
    #[no_mangle]
    fn hipInit[cx](flags: c_uint) {
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        let m = Machine::init(
            Vendor { name: ["hip5", "hip6", "hip7"][(MAJOR - 5) as usize], tag: 0x0A00, prefix: "hip", lost_status: hipErrorNoDevice, facts },
            &status::Table,
            &["hipError"],
        );
        m.enter(&cx)?;
        if m.device_count() == 0 {
            return Err(Error::NoDevice);
        }
        Ok(())
    }

    /// `hipRuntimeGetVersion`: callable before `hipInit`.
    #[no_mangle]
    fn hipRuntimeGetVersion[cx](runtimeVersion: *mut c_int) {
        let _ = &cx;
        // SAFETY: a valid out-pointer (or null, refused).
        unsafe { put(runtimeVersion, RUNTIME_VERSION) }
    }

    /// `hipDriverGetVersion`: the same number as the runtime's.
    #[no_mangle]
    fn hipDriverGetVersion[cx](driverVersion: *mut c_int) {
        let _ = &cx;
        // SAFETY: a valid out-pointer (or null, refused).
        unsafe { put(driverVersion, RUNTIME_VERSION) }
    }

    /// `hipGetDeviceCount` (Device Management): `hipErrorNoDevice` without devices.
    #[no_mangle]
    fn hipGetDeviceCount[cx](count: *mut c_int) {
        let m = machine(&cx)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(count, m.device_count() as c_int) }?;
        if m.device_count() == 0 { Err(Error::NoDevice) } else { Ok(()) }
    }

    /// `hipSetDevice`: the calling thread's current device.
    #[no_mangle]
    fn hipSetDevice[cx](deviceId: c_int) {
        let m = machine(&cx)?;
        let d = device(m, deviceId)?;
        set_current_context(m.implicit_context(d));
        Ok(())
    }

    /// `hipGetDevice`.
    #[no_mangle]
    fn hipGetDevice[cx](deviceId: *mut c_int) {
        let m = machine(&cx)?;
        let d = m.context_device(current_context()).ok_or(Error::InvalidDevice)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(deviceId, d as c_int) }
    }

    /// `hipDeviceGetName`.
    #[no_mangle]
    fn hipDeviceGetName[cx](name: *mut c_char, len: c_int, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe { put_text(name, len, &m.facts(d).name) }
    }

    /// `hipDeviceTotalMem`.
    #[no_mangle]
    fn hipDeviceTotalMem[cx](bytes: *mut usize, dev: c_int) {
        let m = machine(&cx)?;
        device(m, dev)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(bytes, m.memory_per_device()) }
    }

    /// `hipDeviceGetAttribute`: the attributes in [`attribute`]; others are
    /// `hipErrorInvalidValue` (not simulated).
    #[no_mangle]
    fn hipDeviceGetAttribute[cx](pi: *mut c_int, attr: c_int, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let f = m.facts(d);
        use attribute::*;
        let v = match attr {
            COMPUTE_CAPABILITY_MAJOR => f.major,
            COMPUTE_CAPABILITY_MINOR => f.minor,
            MULTIPROCESSOR_COUNT => f.multiprocessors,
            MAX_THREADS_PER_BLOCK => 1024,
            WARP_SIZE => 64,
            MANAGED_MEMORY | UNIFIED_ADDRESSING => 1,
            PCI_BUS_ID => 0x61 + d as i32,
            _ => return Err(Error::InvalidValue),
        };
        // SAFETY: a valid out-pointer.
        unsafe { put(pi, v) }
    }

    /// `hipDeviceGetPCIBusId`.
    #[no_mangle]
    fn hipDeviceGetPCIBusId[cx](pciBusId: *mut c_char, len: c_int, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe { put_text(pciBusId, len, &m.facts(d).pci_bus_id) }
    }

    /// `hipDeviceGetUuid`.
    #[no_mangle]
    fn hipDeviceGetUuid[cx](uuid: *mut hipUUID, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let bytes = m.facts(d).uuid.map(|b| b as c_char);
        // SAFETY: a valid out-pointer.
        unsafe { put(uuid, hipUUID { bytes }) }
    }

    /// `hipGetDeviceProperties`: ROCm 5's `hipDeviceProp_t` layout.
    #[no_mangle]
    fn hipGetDeviceProperties[cx](prop: *mut props::hipDeviceProp_tR0000, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let f = m.facts(d);
        let mut p: props::hipDeviceProp_tR0000 = props::zeroed();
        p.name = props::text(&f.name);
        p.totalGlobalMem = m.memory_per_device();
        p.warpSize = 64;
        p.maxThreadsPerBlock = 1024;
        p.major = f.major;
        p.minor = f.minor;
        p.multiProcessorCount = f.multiprocessors;
        p.pciBusID = 0x61 + d as c_int;
        p.gcnArchName = props::text(&f.arch);
        // SAFETY: a valid out-pointer to the struct.
        unsafe { put(prop, p) }
    }

    /// `hipDeviceCanAccessPeer`: every simulated device reaches every other one.
    #[no_mangle]
    fn hipDeviceCanAccessPeer[cx](canAccessPeer: *mut c_int, deviceId: c_int, peerDeviceId: c_int) {
        let m = machine(&cx)?;
        let (a, b) = (device(m, deviceId)?, device(m, peerDeviceId)?);
        // SAFETY: a valid out-pointer.
        unsafe { put(canAccessPeer, c_int::from(a != b)) }
    }

    /// `hipDeviceEnablePeerAccess`: from the current device; flags must be 0.
    #[no_mangle]
    fn hipDeviceEnablePeerAccess[cx](peerDeviceId: c_int, flags: c_uint) {
        let m = machine(&cx)?;
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        let peer = device(m, peerDeviceId)?;
        m.enable_peer(&cx, peer)
    }

    /// `hipDeviceSynchronize`: every stream of the current device.
    #[no_mangle]
    fn hipDeviceSynchronize[cx]() {
        machine(&cx)?.context_synchronize(&cx)
    }

    /// `hipDeviceGetStreamPriorityRange`.
    #[no_mangle]
    fn hipDeviceGetStreamPriorityRange[cx](leastPriority: *mut c_int, greatestPriority: *mut c_int) {
        let m = machine(&cx)?;
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

    /// `hipMalloc` (Memory Management): size 0 gives NULL.
    #[no_mangle]
    fn hipMalloc[cx](ptr: *mut *mut c_void, size: usize) {
        let m = machine(&cx)?;
        let p = if size == 0 { 0 } else { m.alloc_device(&cx, size)? };
        // SAFETY: a valid out-pointer.
        unsafe { put(ptr, p as *mut c_void) }
    }

    /// `hipFree`: NULL is a no-op.
    #[no_mangle]
    fn hipFree[cx](ptr: *mut c_void) {
        let m = machine(&cx)?;
        if ptr.is_null() { Ok(()) } else { m.free(&cx, ptr as usize, false) }
    }

    /// `hipHostMalloc`: flags `Portable` 1, `Mapped` 2, `WriteCombined` 4, and the
    /// coherence and NUMA bits.
    #[no_mangle]
    fn hipHostMalloc[cx](ptr: *mut *mut c_void, size: usize, flags: c_uint) {
        let m = machine(&cx)?;
        if flags & !(0x7 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000) != 0 || ptr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = if size == 0 { 0 } else { m.alloc_host(&cx, size, false)? };
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(ptr, p as *mut c_void) }
    }

    /// `hipHostFree`: NULL is a no-op.
    #[no_mangle]
    fn hipHostFree[cx](ptr: *mut c_void) {
        let m = machine(&cx)?;
        if ptr.is_null() { Ok(()) } else { m.free(&cx, ptr as usize, true) }
    }

    /// `hipHostRegister`: page-locks host memory the runtime did not allocate; flags
    /// `Default` 0, `Portable` 1, `Mapped` 2, `IoMemory` 4, `ReadOnly` 8.
    #[no_mangle]
    fn hipHostRegister[cx](hostPtr: *mut c_void, sizeBytes: usize, flags: c_uint) {
        machine(&cx)?.register_host(&cx, hostPtr as usize, sizeBytes, flags)
    }

    /// `hipHostUnregister`.
    #[no_mangle]
    fn hipHostUnregister[cx](hostPtr: *mut c_void) {
        machine(&cx)?.unregister_host(&cx, hostPtr as usize)
    }

    /// `hipMallocManaged`: flags `hipMemAttachGlobal` (1) or `hipMemAttachHost` (2).
    #[no_mangle]
    fn hipMallocManaged[cx](devPtr: *mut *mut c_void, size: usize, flags: c_uint) {
        let m = machine(&cx)?;
        if (flags != 1 && flags != 2) || devPtr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_host(&cx, size, true)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(devPtr, p as *mut c_void) }
    }

    /// `hipMemset`: queued on the null stream (asynchronous for device memory).
    #[no_mangle]
    fn hipMemset[cx](dst: *mut c_void, value: c_int, sizeBytes: usize) {
        machine(&cx)?.memset(&cx, dst as usize, value as u8, sizeBytes, StreamRef::Legacy)
    }

    /// `hipMemsetAsync`.
    #[no_mangle]
    fn hipMemsetAsync[cx](dst: *mut c_void, value: c_int, sizeBytes: usize, stream: Handle) {
        machine(&cx)?.memset(&cx, dst as usize, value as u8, sizeBytes, stream_ref(stream))
    }

    /// `hipMemcpyAsync`: `kind` 0–4 (`hipMemcpyDefault` infers it).
    #[no_mangle]
    fn hipMemcpyAsync[cx](dst: *mut c_void, src: *const c_void, sizeBytes: usize, kind: c_int, stream: Handle) {
        let m = machine(&cx)?;
        if !(0..=4).contains(&kind) {
            return Err(Error::Raw(hipErrorInvalidMemcpyDirection));
        }
        m.memcpy(&cx, dst as usize, src as usize, sizeBytes, stream_ref(stream), MemcpyCheck::Unified)
    }

    /// `hipMemcpy2DAsync`: `kind` 0–4 (`hipMemcpyDefault` infers it), pitches between the
    /// width and the device's maximum.
    #[no_mangle]
    fn hipMemcpy2DAsync[cx](
        dst: *mut c_void,
        dpitch: usize,
        src: *const c_void,
        spitch: usize,
        width: usize,
        height: usize,
        kind: c_int,
        stream: Handle,
    ) {
        let m = machine(&cx)?;
        if !(0..=4).contains(&kind) {
            return Err(Error::Raw(hipErrorInvalidMemcpyDirection));
        }
        m.memcpy_2d(&cx, dst as usize, dpitch, src as usize, spitch, width, height, stream_ref(stream))
    }

    /// `hipMemcpyPeerAsync`: each side must be device memory of its device.
    #[no_mangle]
    fn hipMemcpyPeerAsync[cx](dst: *mut c_void, dstDeviceId: c_int, src: *const c_void, srcDevice: c_int, sizeBytes: usize, stream: Handle) {
        let m = machine(&cx)?;
        let check = MemcpyCheck::Peer { dst_device: device(m, dstDeviceId)?, src_device: device(m, srcDevice)? };
        m.memcpy(&cx, dst as usize, src as usize, sizeBytes, stream_ref(stream), check)
    }

    /// `hipStreamCreateWithPriority` (Stream Management): flags `hipStreamDefault` (0)
    /// or `hipStreamNonBlocking` (1).
    #[no_mangle]
    fn hipStreamCreateWithPriority[cx](stream: *mut Handle, flags: c_uint, priority: c_int) {
        let m = machine(&cx)?;
        let _ = priority;
        if flags > 1 || stream.is_null() {
            return Err(Error::InvalidValue);
        }
        let s = m.stream_create(&cx, flags == 0)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(stream, handle(s)) }
    }

    /// `hipStreamDestroy`: queued work still completes; the null stream cannot be
    /// destroyed.
    #[no_mangle]
    fn hipStreamDestroy[cx](stream: Handle) {
        let m = machine(&cx)?;
        match stream_ref(stream) {
            StreamRef::Handle(h) => m.stream_destroy(&cx, h),
            _ => {
                violation("bad-handle", &cx, "a default stream cannot be destroyed");
                Err(Error::InvalidHandle)
            }
        }
    }

    /// `hipStreamSynchronize`.
    #[no_mangle]
    fn hipStreamSynchronize[cx](stream: Handle) {
        machine(&cx)?.stream_synchronize(&cx, stream_ref(stream))
    }

    /// `hipStreamQuery`: `hipErrorNotReady` while work is pending.
    #[no_mangle]
    fn hipStreamQuery[cx](stream: Handle) {
        let done = machine(&cx)?.stream_query(&cx, stream_ref(stream))?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `hipStreamWaitEvent`: flags must be 0.
    #[no_mangle]
    fn hipStreamWaitEvent[cx](stream: Handle, event: Handle, flags: c_uint) {
        let m = machine(&cx)?;
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        m.stream_wait_event(&cx, stream_ref(stream), event as u64)
    }

    /// `hipStreamAddCallback`: `callback(stream, status, userData)` runs when the stream
    /// reaches it, also after the device failed (with that status); flags must be 0.
    #[no_mangle]
    fn hipStreamAddCallback[cx](
        stream: Handle,
        callback: Option<unsafe extern "C" fn(*mut c_void, u32, *mut c_void)>,
        userData: *mut c_void,
        flags: c_uint,
    ) {
        let m = machine(&cx)?;
        let f = callback.ok_or(Error::InvalidValue)?;
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        m.host_function(&cx, stream_ref(stream), HostCallback::WithStatus(f, stream), userData)
    }

    /// `hipEventCreateWithFlags` (Event Management): `BlockingSync` 1, `DisableTiming` 2,
    /// `Interprocess` 4 (with `DisableTiming`), and the release-scope bits.
    #[no_mangle]
    fn hipEventCreateWithFlags[cx](event: *mut Handle, flags: c_uint) {
        let m = machine(&cx)?;
        if flags & !(0x7 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000) != 0 || (flags & 4 != 0 && flags & 2 == 0) || event.is_null() {
            return Err(Error::InvalidValue);
        }
        let timing = if flags & 2 != 0 { EventTiming::Off } else { EventTiming::On };
        let e = m.event_create(&cx, timing)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(event, handle(e)) }
    }

    /// `hipEventDestroy`.
    #[no_mangle]
    fn hipEventDestroy[cx](event: Handle) {
        machine(&cx)?.event_destroy(&cx, event as u64)
    }

    /// `hipEventRecord`.
    #[no_mangle]
    fn hipEventRecord[cx](event: Handle, stream: Handle) {
        machine(&cx)?.event_record(&cx, event as u64, stream_ref(stream))
    }

    /// `hipEventQuery`: `hipErrorNotReady` while its latest record is pending.
    #[no_mangle]
    fn hipEventQuery[cx](event: Handle) {
        let done = machine(&cx)?.event_query(&cx, event as u64)?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `hipEventSynchronize`.
    #[no_mangle]
    fn hipEventSynchronize[cx](event: Handle) {
        machine(&cx)?.event_synchronize(&cx, event as u64)
    }

    /// `hipEventElapsedTime`.
    #[no_mangle]
    fn hipEventElapsedTime[cx](ms: *mut f32, start: Handle, stop: Handle) {
        let m = machine(&cx)?;
        let v = m.event_elapsed(&cx, start as u64, stop as u64)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(ms, v) }
    }

    /// `hipPointerGetAttributes`: memory the runtime does not know is
    /// `hipErrorInvalidValue` on ROCm 5 and `hipMemoryTypeUnregistered` from ROCm 6; NULL
    /// is `hipErrorInvalidValue` before HIP 7 and unregistered memory from it.
    #[no_mangle]
    fn hipPointerGetAttributes[cx](attributes: *mut hipPointerAttribute_t, ptr: *const c_void) {
        let m = machine(&cx)?;
        if ptr.is_null() && !ROCM7 {
            return Err(Error::InvalidValue);
        }
        let info = m.pointer_info(ptr as usize);
        let attrs = match info {
            None if ROCM5 => return Err(Error::InvalidValue),
            None => hipPointerAttribute_t {
                memoryType: memory_type::UNREGISTERED,
                device: -1,
                devicePointer: std::ptr::null_mut(),
                hostPointer: std::ptr::null_mut(),
                isManaged: 0,
                allocationFlags: 0,
            },
            Some(i) => {
                let host = matches!(i.kind, Attributes::Pinned | Attributes::Managed);
                hipPointerAttribute_t {
                    memoryType: match i.kind {
                        Attributes::Device => memory_type::DEVICE,
                        Attributes::Pinned => memory_type::HOST,
                        Attributes::Managed => memory_type::MANAGED,
                    },
                    device: i.device as c_int,
                    devicePointer: ptr as *mut c_void,
                    hostPointer: if host { ptr as *mut c_void } else { std::ptr::null_mut() },
                    isManaged: c_int::from(i.kind == Attributes::Managed),
                    allocationFlags: 0,
                }
            }
        };
        // SAFETY: a valid out-pointer to the struct.
        unsafe { put(attributes, attrs) }
    }

    /// `hipMemGetAddressRange`: the start and size of the allocation holding `dptr`;
    /// `hipErrorNotFound` for an address no allocation holds.
    #[no_mangle]
    fn hipMemGetAddressRange[cx](pbase: *mut *mut c_void, psize: *mut usize, dptr: *mut c_void) {
        let m = machine(&cx)?;
        if pbase.is_null() || psize.is_null() {
            return Err(Error::InvalidValue);
        }
        let info = m.pointer_info(dptr as usize).ok_or(Error::NotFound)?;
        // SAFETY: valid out-pointers (checked non-null above; the runtime's contract).
        unsafe {
            put(pbase, info.start as usize as *mut c_void)?;
            put(psize, info.size as usize)
        }
    }

    /// `hipModuleLoadData` (Module Management): an ELF code object, or a clang offload
    /// bundle from which the entry for the current device's architecture is taken
    /// (`hipErrorNoBinaryForGpu` when it has none).
    #[no_mangle]
    fn hipModuleLoadData[cx](module: *mut Handle, image: *const c_void) {
        let m = machine(&cx)?;
        if module.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: the image is well formed (the runtime's contract).
        let bytes = unsafe { image_bytes(image.cast()) }?;
        let code_object = if bytes.starts_with(image::BUNDLE_MAGIC) {
            let arch = arch_of(m, m.current_device(&cx)?);
            image::bundle_entry(bytes, &arch)?.ok_or(Error::NoBinaryForGpu)?
        } else {
            bytes
        };
        let entries = image::elf_entries(code_object)?;
        let h = m.module_load(&cx, entries)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(module, handle(h)) }
    }

    /// `hipModuleUnload`.
    #[no_mangle]
    fn hipModuleUnload[cx](module: Handle) {
        machine(&cx)?.module_unload(&cx, module as u64)
    }

    /// `hipModuleGetFunction`: `hipErrorNotFound` for a name the module lacks or the
    /// double cannot run.
    #[no_mangle]
    fn hipModuleGetFunction[cx](function: *mut Handle, module: Handle, kname: *const c_char) {
        let m = machine(&cx)?;
        if kname.is_null() || function.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: a NUL-terminated name (the contract).
        let name = unsafe { CStr::from_ptr(kname) }.to_str().map_err(|_| Error::NotFound)?;
        let f = m.module_function(&cx, module as u64, name)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(function, handle(f)) }
    }

    /// `hipModuleLaunchKernel`: a block of at most 256 work-items (the test kernels'
    /// `max_flat_workgroup_size`), arguments through `kernelParams` (`extra` is not
    /// supported). A configuration out of range is `hipErrorInvalidConfiguration` on HIP 7,
    /// `hipErrorInvalidValue` before.
    #[no_mangle]
    fn hipModuleLaunchKernel[cx](
        f: Handle,
        gridDimX: c_uint,
        gridDimY: c_uint,
        gridDimZ: c_uint,
        blockDimX: c_uint,
        blockDimY: c_uint,
        blockDimZ: c_uint,
        sharedMemBytes: c_uint,
        stream: Handle,
        kernelParams: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) {
        let m = machine(&cx)?;
        let threads = u64::from(blockDimX) * u64::from(blockDimY) * u64::from(blockDimZ);
        let bad_grid = gridDimX == 0 || gridDimY == 0 || gridDimZ == 0;
        if bad_grid || threads == 0 || threads > 256 || sharedMemBytes > 64 * 1024 {
            // HIP 7 answers a configuration out of range as CUDA does.
            return Err(if ROCM7 { Error::Raw(hipErrorInvalidConfiguration) } else { Error::InvalidValue });
        }
        if kernelParams.is_null() || !extra.is_null() {
            return Err(Error::InvalidValue);
        }
        let params = kernelParams as *const *const c_void;
        // SAFETY: one pointer per kernel parameter (the launch contract), read during the
        // call.
        unsafe { m.launch_kernel(&cx, f as u64, params, gridDimX, blockDimX, stream_ref(stream)) }
    }

    /// `hipMallocAsync` (Stream Ordered Memory Allocator).
    #[no_mangle]
    fn hipMallocAsync[cx](devPtr: *mut *mut c_void, size: usize, stream: Handle) {
        let m = machine(&cx)?;
        if devPtr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_async(&cx, size, stream_ref(stream))?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(devPtr, p as *mut c_void) }
    }

    /// `hipFreeAsync`: NULL is a no-op on HIP 7, `hipErrorInvalidValue` before.
    #[no_mangle]
    fn hipFreeAsync[cx](devPtr: *mut c_void, stream: Handle) {
        let m = machine(&cx)?;
        match (devPtr.is_null(), ROCM7) {
            (true, true) => Ok(()),
            (true, false) => Err(Error::InvalidValue),
            (false, _) => m.free_async(&cx, devPtr as usize, stream_ref(stream)),
        }
    }

    /// `hipLaunchHostFunc` (ROCm 6; 5.2 has only `hipStreamAddCallback`): not called once
    /// the device failed.
    #[cfg_attr(not(feature = "rocm5"), no_mangle)]
    fn hipLaunchHostFunc[cx](stream: Handle, f: Option<unsafe extern "C" fn(*mut c_void)>, userData: *mut c_void) {
        let m = machine(&cx)?;
        let f = f.ok_or(Error::InvalidValue)?;
        m.host_function(&cx, stream_ref(stream), HostCallback::Plain(f), userData)
    }

    /// `hipGetDevicePropertiesR0600` (ROCm 6): ROCm 6's layout.
    #[cfg_attr(not(feature = "rocm5"), no_mangle)]
    fn hipGetDevicePropertiesR0600[cx](prop: *mut props::hipDeviceProp_tR0600, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        let f = m.facts(d);
        let mut p: props::hipDeviceProp_tR0600 = props::zeroed();
        p.name = props::text(&f.name);
        p.uuid = f.uuid.map(|b| b as c_char);
        p.totalGlobalMem = m.memory_per_device();
        p.warpSize = 64;
        p.maxThreadsPerBlock = 1024;
        p.major = f.major;
        p.minor = f.minor;
        p.multiProcessorCount = f.multiprocessors;
        p.pciBusID = 0x61 + d as c_int;
        p.gcnArchName = props::text(&f.arch);
        // SAFETY: a valid out-pointer to the struct.
        unsafe { put(prop, p) }
    }

    /// `hipGetProcAddress` (ROCm 6.2 and later): the entry point of `symbol` for HIP
    /// version `hipVersion` (100·major + minor): `hipGetDeviceProperties` is the
    /// `R0600` variant from 600, as in the real runtime, and a symbol asked for with a
    /// version older than the one that brought it is `VERSION_NOT_SUFFICIENT`. Flags:
    /// HIP 7's `HIP_GET_PROC_ADDRESS_DEFAULT` (0) and `LEGACY_STREAM` (1) give the same
    /// entry points; `PER_THREAD_DEFAULT_STREAM` (2) would select `_spt` twins this double
    /// does not have, so it is reported; ROCm 6 takes 0 only.
    #[cfg_attr(not(feature = "rocm5"), no_mangle)]
    fn hipGetProcAddress[cx](symbol: *const c_char, pfn: *mut *mut c_void, hipVersion: c_int, flags: u64, symbolStatus: *mut c_int) {
        if symbol.is_null() || pfn.is_null() || flags > if ROCM7 { 2 } else { 0 } {
            return Err(Error::InvalidValue);
        }
        if flags == 2 {
            violation("unsupported", &cx, "per-thread (`_spt`) entry points are not simulated");
            return Err(Error::NotSupported);
        }
        // SAFETY: a NUL-terminated name (the contract).
        let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
        let name = if name == "hipGetDeviceProperties" && hipVersion >= 600 { "hipGetDevicePropertiesR0600" } else { name };
        let found = entry_points().iter().find(|(n, _)| *n == name).map(|&(_, f)| f);
        let too_old = hipVersion < since(name);
        // SAFETY: valid out-pointers (the contract); `symbolStatus` may be null.
        unsafe {
            put(pfn, found.filter(|_| !too_old).unwrap_or(0) as *mut c_void)?;
            if !symbolStatus.is_null() {
                put(symbolStatus, if found.is_none() { 1 } else if too_old { 2 } else { 0 })?;
            }
        }
        if found.is_some() && !too_old { Ok(()) } else { Err(Error::NotFound) }
    }
}

/// `hipGetErrorName` (Error Handling): a static string; unknown statuses are
/// `hipErrorUnknown`.
#[no_mangle]
pub extern "C" fn hipGetErrorName(error: HipError) -> *const c_char {
    let unknown = status::name(hipErrorUnknown).map_or(std::ptr::null(), |(n, _)| n.as_ptr());
    status::name(error).map_or(unknown, |(n, _)| n.as_ptr())
}

/// `hipGetErrorString`: ROCm 6 describes the status; ROCm 5.2 repeats its name.
#[no_mangle]
pub extern "C" fn hipGetErrorString(error: HipError) -> *const c_char {
    if ROCM5 {
        return hipGetErrorName(error);
    }
    let unknown = status::name(hipErrorUnknown).map_or(std::ptr::null(), |(_, t)| t.as_ptr());
    status::name(error).map_or(unknown, |(_, t)| t.as_ptr())
}

/// The HIP version (100·major + minor) that brought `name`: `hipGetProcAddress` answers an
/// older request with `VERSION_NOT_SUFFICIENT`.
fn since(name: &str) -> c_int {
    match name {
        "hipGetDevicePropertiesR0600" => 600,
        "hipGetProcAddress" => 602,
        _ => 0,
    }
}

/// `hipGetLastError` (Error Handling): on HIP 7, the calling thread's last failed status
/// since the last read, as CUDA's `cudaGetLastError`; before, the status of the thread's
/// last call, whatever it was. Either way the record is reset to `hipSuccess`.
#[no_mangle]
pub extern "C" fn hipGetLastError() -> HipError {
    gpuport_double_sim::ffi::take_last_status(ROCM7)
}

/// `hipPeekAtLastError`: what `hipGetLastError` would answer, without the reset.
#[no_mangle]
pub extern "C" fn hipPeekAtLastError() -> HipError {
    gpuport_double_sim::ffi::peek_last_status(ROCM7)
}

/// The names `hipGetProcAddress` answers, with their entry points.
fn entry_points() -> &'static [(&'static str, usize)] {
    static TABLE: std::sync::OnceLock<Vec<(&'static str, usize)>> = std::sync::OnceLock::new();
    macro_rules! table {
        ($($f:ident),* $(,)?) => { vec![$((stringify!($f), $f as *const () as usize)),*] };
    }
    TABLE.get_or_init(|| {
        let mut t = table![
            hipInit,
            hipRuntimeGetVersion,
            hipDriverGetVersion,
            hipGetDeviceCount,
            hipSetDevice,
            hipGetDevice,
            hipDeviceGetName,
            hipDeviceTotalMem,
            hipDeviceGetAttribute,
            hipDeviceGetPCIBusId,
            hipDeviceGetUuid,
            hipGetDeviceProperties,
            hipDeviceCanAccessPeer,
            hipDeviceEnablePeerAccess,
            hipDeviceSynchronize,
            hipDeviceGetStreamPriorityRange,
            hipMalloc,
            hipFree,
            hipHostMalloc,
            hipHostFree,
            hipHostRegister,
            hipHostUnregister,
            hipMallocManaged,
            hipMemset,
            hipMemsetAsync,
            hipMemcpyAsync,
            hipMemcpy2DAsync,
            hipMemcpyPeerAsync,
            hipStreamCreateWithPriority,
            hipStreamDestroy,
            hipStreamSynchronize,
            hipStreamQuery,
            hipStreamWaitEvent,
            hipStreamAddCallback,
            hipEventCreateWithFlags,
            hipEventDestroy,
            hipEventRecord,
            hipEventQuery,
            hipEventSynchronize,
            hipEventElapsedTime,
            hipPointerGetAttributes,
            hipMemGetAddressRange,
            hipModuleLoadData,
            hipModuleUnload,
            hipModuleGetFunction,
            hipModuleLaunchKernel,
            hipMallocAsync,
            hipFreeAsync,
            hipLaunchHostFunc,
            hipGetDevicePropertiesR0600,
            hipGetProcAddress,
        ];
        t.extend(table![hipGetErrorName, hipGetErrorString, hipGetLastError, hipPeekAtLastError]);
        t
    })
}
