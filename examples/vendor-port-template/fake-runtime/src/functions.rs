//! The runtime's functions, each served inside `catch_unwind` on the simulated machine,
//! and the table [`fvGetApi`](crate::fvGetApi) hands out. Like HIP, the runtime has no
//! contexts to manage: each thread's calls go to its current device (0 until
//! `setDevice`).

use std::ffi::{c_char, c_int, c_void, CStr};

use gpuport_double_sim::ffi::{put, put_text};
use gpuport_double_sim::report::violation;
use gpuport_double_sim::{
    current_context, set_current_context, Attributes, Call, DeviceFacts, Error, EventTiming, HostCallback, Machine,
    MemcpyCheck, Result, StreamRef, Vendor,
};

use crate::status::{self, *};
use crate::{memory_kind, FvApi, FvPointerAttributes, Handle, HostFn, API_VERSION};

fn facts(i: usize, _memory: usize) -> DeviceFacts {
    let mut uuid = [0u8; 16];
    uuid[..10].copy_from_slice(b"fakevendor");
    uuid[15] = i as u8;
    DeviceFacts {
        name: format!("fakevendor device {i}"),
        major: 1,
        minor: 0,
        multiprocessors: 16,
        arch: "fv1".into(),
        pci_bus_id: format!("0000:{:02x}:00.0", 0x81 + i),
        uuid,
    }
}

/// The machine, once `init` ran, with the calling thread's device made current.
fn machine(cx: &Call<'_>) -> Result<&'static Machine> {
    Machine::with_current_device(cx)
}

/// The null stream is the default one; there is no per-thread stream.
fn stream_ref(s: Handle) -> StreamRef {
    match s as usize {
        0 => StreamRef::Legacy,
        h => StreamRef::Handle(h as u64),
    }
}

fn handle(h: u64) -> Handle {
    h as usize as Handle
}

fn device(m: &Machine, dev: c_int) -> Result<usize> {
    m.check_device(i64::from(dev))
}

/// The kernel names of a module image: `fakevendor module`, then `kernel NAME` lines.
fn image_entries(bytes: &[u8]) -> Result<Vec<String>> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::InvalidImage)?;
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() != Some("fakevendor module") {
        return Err(Error::InvalidImage);
    }
    lines.map(|l| l.strip_prefix("kernel ").map(|n| n.trim().to_owned()).ok_or(Error::InvalidImage)).collect()
}

gpuport_double_sim::export_c! {
    returns FvStatus, codes status::code, unknown FV_ERROR_UNKNOWN;

    /// `init`: flags must be 0.
    fn fvInit[cx](flags: u32) {
        if flags != 0 {
            return Err(Error::InvalidValue);
        }
        let vendor = Vendor { name: "fakevendor", tag: 0x0F00, prefix: "fv", lost_status: FV_ERROR_NO_DEVICE, facts };
        let m = Machine::init(vendor, &status::Table, &["FV_ERROR_"]);
        m.enter(&cx)?;
        if m.device_count() == 0 {
            return Err(Error::NoDevice);
        }
        Ok(())
    }

    /// `deviceCount`.
    fn fvDeviceCount[cx](count: *mut c_int) {
        let m = machine(&cx)?;
        // SAFETY: a valid out-pointer (or null, refused).
        unsafe { put(count, m.device_count() as c_int) }
    }

    /// `setDevice`: the calling thread's current device.
    fn fvSetDevice[cx](dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        set_current_context(m.implicit_context(d));
        Ok(())
    }

    /// `getDevice`.
    fn fvGetDevice[cx](dev: *mut c_int) {
        let m = machine(&cx)?;
        let d = m.context_device(current_context()).ok_or(Error::InvalidContext)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(dev, d as c_int) }
    }

    /// `deviceName`.
    fn fvDeviceName[cx](name: *mut c_char, len: c_int, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe { put_text(name, len, &m.facts(d).name) }
    }

    /// `deviceTotalMem`.
    fn fvDeviceTotalMem[cx](bytes: *mut usize, dev: c_int) {
        let m = machine(&cx)?;
        device(m, dev)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(bytes, m.memory_per_device()) }
    }

    /// `deviceComputeUnits`.
    fn fvDeviceComputeUnits[cx](units: *mut c_int, dev: c_int) {
        let m = machine(&cx)?;
        let d = device(m, dev)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(units, m.facts(d).multiprocessors) }
    }

    /// `deviceCanAccessPeer`: every device reaches every other one.
    fn fvDeviceCanAccessPeer[cx](can: *mut c_int, dev: c_int, peer: c_int) {
        let m = machine(&cx)?;
        let (a, b) = (device(m, dev)?, device(m, peer)?);
        // SAFETY: a valid out-pointer.
        unsafe { put(can, c_int::from(a != b)) }
    }

    /// `deviceEnablePeerAccess`: from the current device.
    fn fvDeviceEnablePeerAccess[cx](peer: c_int) {
        let m = machine(&cx)?;
        let peer = device(m, peer)?;
        m.enable_peer(&cx, peer)
    }

    /// `deviceSynchronize`: every stream of the current device.
    fn fvDeviceSynchronize[cx]() {
        machine(&cx)?.context_synchronize(&cx)
    }

    /// `streamPriorityRange`.
    fn fvStreamPriorityRange[cx](least: *mut c_int, greatest: *mut c_int) {
        let m = machine(&cx)?;
        let (l, g) = m.priority_range();
        // SAFETY: valid out-pointers (or null, refused).
        unsafe { put(least, l).and_then(|()| put(greatest, g)) }
    }

    /// `malloc`: device memory; 0 bytes give address 0.
    fn fvMalloc[cx](ptr: *mut u64, size: usize) {
        let m = machine(&cx)?;
        let p = if size == 0 { 0 } else { m.alloc_device(&cx, size)? };
        // SAFETY: a valid out-pointer.
        unsafe { put(ptr, p as u64) }
    }

    /// `free`: device or managed memory; address 0 is no memory.
    fn fvFree[cx](ptr: u64) {
        let m = machine(&cx)?;
        if ptr == 0 { Ok(()) } else { m.free(&cx, ptr as usize, false) }
    }

    /// `mallocHost`: pinned host memory.
    fn fvMallocHost[cx](ptr: *mut *mut c_void, size: usize) {
        let m = machine(&cx)?;
        let p = if size == 0 { 0 } else { m.alloc_host(&cx, size, false)? };
        // SAFETY: a valid out-pointer.
        unsafe { put(ptr, p as *mut c_void) }
    }

    /// `freeHost`.
    fn fvFreeHost[cx](ptr: *mut c_void) {
        let m = machine(&cx)?;
        if ptr.is_null() { Ok(()) } else { m.free(&cx, ptr as usize, true) }
    }

    /// `mallocManaged`: memory both the host and the device reach.
    fn fvMallocManaged[cx](ptr: *mut u64, size: usize) {
        let m = machine(&cx)?;
        let p = m.alloc_host(&cx, size, true)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(ptr, p as u64) }
    }

    /// `mallocAsync`: device memory usable in `stream`'s order.
    fn fvMallocAsync[cx](ptr: *mut u64, size: usize, stream: Handle) {
        let m = machine(&cx)?;
        if ptr.is_null() {
            return Err(Error::InvalidValue);
        }
        let p = m.alloc_async(&cx, size, stream_ref(stream))?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(ptr, p as u64) }
    }

    /// `freeAsync`: freed in `stream`'s order.
    fn fvFreeAsync[cx](ptr: u64, stream: Handle) {
        machine(&cx)?.free_async(&cx, ptr as usize, stream_ref(stream))
    }

    /// `pointerGetAttributes`: memory the runtime did not allocate is `UNREGISTERED`.
    fn fvPointerGetAttributes[cx](attributes: *mut FvPointerAttributes, ptr: u64) {
        let m = machine(&cx)?;
        let attrs = match m.pointer_info(ptr as usize) {
            None => FvPointerAttributes { kind: memory_kind::UNREGISTERED, device: -1, start: 0, size: 0 },
            Some(i) => FvPointerAttributes {
                kind: match i.kind {
                    Attributes::Device => memory_kind::DEVICE,
                    Attributes::Pinned => memory_kind::HOST,
                    Attributes::Managed => memory_kind::MANAGED,
                },
                device: i.device as i32,
                start: i.start,
                size: i.size as usize,
            },
        };
        // SAFETY: a valid out-pointer to the struct.
        unsafe { put(attributes, attrs) }
    }

    /// `memset`: queued on the default stream; may return before the bytes land.
    fn fvMemset[cx](dst: u64, value: u8, size: usize) {
        machine(&cx)?.memset(&cx, dst as usize, value, size, StreamRef::Legacy)
    }

    /// `memsetAsync`.
    fn fvMemsetAsync[cx](dst: u64, value: u8, size: usize, stream: Handle) {
        machine(&cx)?.memset(&cx, dst as usize, value, size, stream_ref(stream))
    }

    /// `memcpyAsync`: any two addresses of one address space (device, pinned, managed or
    /// host memory).
    fn fvMemcpyAsync[cx](dst: u64, src: u64, size: usize, stream: Handle) {
        machine(&cx)?.memcpy(&cx, dst as usize, src as usize, size, stream_ref(stream), MemcpyCheck::Unified)
    }

    /// `memcpyPeerAsync`: between the memory of two devices.
    fn fvMemcpyPeerAsync[cx](dst: u64, dstDevice: c_int, src: u64, srcDevice: c_int, size: usize, stream: Handle) {
        let m = machine(&cx)?;
        let check = MemcpyCheck::Peer { dst_device: device(m, dstDevice)?, src_device: device(m, srcDevice)? };
        m.memcpy(&cx, dst as usize, src as usize, size, stream_ref(stream), check)
    }

    /// `streamCreate`: flags 0 or `FV_STREAM_NON_BLOCKING`; the priority is taken as given.
    fn fvStreamCreate[cx](stream: *mut Handle, flags: u32, priority: c_int) {
        let m = machine(&cx)?;
        let _ = priority;
        if flags > 1 || stream.is_null() {
            return Err(Error::InvalidValue);
        }
        let s = m.stream_create(&cx, flags == 0)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(stream, handle(s)) }
    }

    /// `streamDestroy`: queued work still completes; the default stream is refused.
    fn fvStreamDestroy[cx](stream: Handle) {
        let m = machine(&cx)?;
        match stream_ref(stream) {
            StreamRef::Handle(h) => m.stream_destroy(&cx, h),
            _ => {
                violation("bad-handle", &cx, "the default stream cannot be destroyed");
                Err(Error::InvalidHandle)
            }
        }
    }

    /// `streamSynchronize`.
    fn fvStreamSynchronize[cx](stream: Handle) {
        machine(&cx)?.stream_synchronize(&cx, stream_ref(stream))
    }

    /// `streamQuery`: `FV_ERROR_NOT_READY` while work is pending.
    fn fvStreamQuery[cx](stream: Handle) {
        let done = machine(&cx)?.stream_query(&cx, stream_ref(stream))?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `streamWaitEvent`.
    fn fvStreamWaitEvent[cx](stream: Handle, event: Handle) {
        machine(&cx)?.stream_wait_event(&cx, stream_ref(stream), event as u64)
    }

    /// `launchHostFunc`: `f(user)` on the runtime's thread when the stream reaches it.
    fn fvLaunchHostFunc[cx](stream: Handle, f: HostFn, user: *mut c_void) {
        let m = machine(&cx)?;
        let f = f.ok_or(Error::InvalidValue)?;
        m.host_function(&cx, stream_ref(stream), HostCallback::Plain(f), user)
    }

    /// `eventCreate`: flags 0 or `FV_EVENT_DISABLE_TIMING`.
    fn fvEventCreate[cx](event: *mut Handle, flags: u32) {
        let m = machine(&cx)?;
        if flags & !0x2 != 0 || event.is_null() {
            return Err(Error::InvalidValue);
        }
        let timing = if flags & 0x2 != 0 { EventTiming::Off } else { EventTiming::On };
        let e = m.event_create(&cx, timing)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(event, handle(e)) }
    }

    /// `eventDestroy`.
    fn fvEventDestroy[cx](event: Handle) {
        machine(&cx)?.event_destroy(&cx, event as u64)
    }

    /// `eventRecord`.
    fn fvEventRecord[cx](event: Handle, stream: Handle) {
        machine(&cx)?.event_record(&cx, event as u64, stream_ref(stream))
    }

    /// `eventQuery`: `FV_ERROR_NOT_READY` while pending.
    fn fvEventQuery[cx](event: Handle) {
        let done = machine(&cx)?.event_query(&cx, event as u64)?;
        if done { Ok(()) } else { Err(Error::NotReady) }
    }

    /// `eventSynchronize`.
    fn fvEventSynchronize[cx](event: Handle) {
        machine(&cx)?.event_synchronize(&cx, event as u64)
    }

    /// `eventElapsedTime`: milliseconds between two completed records.
    fn fvEventElapsedTime[cx](ms: *mut f32, start: Handle, end: Handle) {
        let m = machine(&cx)?;
        let v = m.event_elapsed(&cx, start as u64, end as u64)?;
        // SAFETY: a valid out-pointer.
        unsafe { put(ms, v) }
    }

    /// `moduleLoadData`: an image of `size` bytes (see the header for its format).
    fn fvModuleLoadData[cx](module: *mut Handle, image: *const c_void, size: usize) {
        let m = machine(&cx)?;
        if module.is_null() || image.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: the caller's image holds `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), size) };
        let h = m.module_load(&cx, image_entries(bytes)?)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(module, handle(h)) }
    }

    /// `moduleUnload`.
    fn fvModuleUnload[cx](module: Handle) {
        machine(&cx)?.module_unload(&cx, module as u64)
    }

    /// `moduleGetFunction`: `FV_ERROR_NOT_FOUND` for a kernel the module lacks or the
    /// runtime cannot run.
    fn fvModuleGetFunction[cx](function: *mut Handle, module: Handle, name: *const c_char) {
        let m = machine(&cx)?;
        if name.is_null() || function.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: a NUL-terminated name (the contract).
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Error::NotFound)?;
        let f = m.module_function(&cx, module as u64, name)?;
        // SAFETY: a valid out-pointer (checked non-null above).
        unsafe { put(function, handle(f)) }
    }

    /// `launchKernel`: at most 1024 threads a block and 48 KiB of shared memory.
    fn fvLaunchKernel[cx](f: Handle, grid: *const u32, block: *const u32, sharedMemBytes: u32, stream: Handle, params: *mut *mut c_void) {
        let m = machine(&cx)?;
        if grid.is_null() || block.is_null() || params.is_null() {
            return Err(Error::InvalidValue);
        }
        // SAFETY: three dimensions each (the contract).
        let (g, b) = unsafe { (std::slice::from_raw_parts(grid, 3), std::slice::from_raw_parts(block, 3)) };
        let threads = b.iter().map(|&d| u64::from(d)).product::<u64>();
        if g.contains(&0) || threads == 0 || threads > 1024 || sharedMemBytes > 48 * 1024 {
            return Err(Error::InvalidValue);
        }
        let params = params as *const *const c_void;
        // SAFETY: one pointer per kernel parameter (the launch contract), read during the
        // call.
        unsafe { m.launch_kernel(&cx, f as u64, params, g[0], b[0], stream_ref(stream)) }
    }
}

extern "C" fn fvStatusName(status: FvStatus) -> *const c_char {
    status::name(status).or(status::name(FV_ERROR_UNKNOWN)).map_or(std::ptr::null(), |(n, _)| n.as_ptr())
}

extern "C" fn fvStatusString(status: FvStatus) -> *const c_char {
    status::name(status).or(status::name(FV_ERROR_UNKNOWN)).map_or(std::ptr::null(), |(_, t)| t.as_ptr())
}

/// The table `fvGetApi` hands out.
pub(crate) static TABLE: FvApi = FvApi {
    size: std::mem::size_of::<FvApi>() as u32,
    version: API_VERSION,
    init: fvInit,
    statusName: fvStatusName,
    statusString: fvStatusString,
    deviceCount: fvDeviceCount,
    setDevice: fvSetDevice,
    getDevice: fvGetDevice,
    deviceName: fvDeviceName,
    deviceTotalMem: fvDeviceTotalMem,
    deviceComputeUnits: fvDeviceComputeUnits,
    deviceCanAccessPeer: fvDeviceCanAccessPeer,
    deviceEnablePeerAccess: fvDeviceEnablePeerAccess,
    deviceSynchronize: fvDeviceSynchronize,
    streamPriorityRange: fvStreamPriorityRange,
    malloc: fvMalloc,
    free: fvFree,
    mallocHost: fvMallocHost,
    freeHost: fvFreeHost,
    mallocManaged: fvMallocManaged,
    mallocAsync: fvMallocAsync,
    freeAsync: fvFreeAsync,
    pointerGetAttributes: fvPointerGetAttributes,
    memset: fvMemset,
    memsetAsync: fvMemsetAsync,
    memcpyAsync: fvMemcpyAsync,
    memcpyPeerAsync: fvMemcpyPeerAsync,
    streamCreate: fvStreamCreate,
    streamDestroy: fvStreamDestroy,
    streamSynchronize: fvStreamSynchronize,
    streamQuery: fvStreamQuery,
    streamWaitEvent: fvStreamWaitEvent,
    launchHostFunc: fvLaunchHostFunc,
    eventCreate: fvEventCreate,
    eventDestroy: fvEventDestroy,
    eventRecord: fvEventRecord,
    eventQuery: fvEventQuery,
    eventSynchronize: fvEventSynchronize,
    eventElapsedTime: fvEventElapsedTime,
    moduleLoadData: fvModuleLoadData,
    moduleUnload: fvModuleUnload,
    moduleGetFunction: fvModuleGetFunction,
    launchKernel: fvLaunchKernel,
};
