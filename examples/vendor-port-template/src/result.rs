//! Step B4: the `result` layer — one checked function per vendor call, nothing else. Every
//! status goes through the vendor kit's mapping (`gpuport_vendor_kit::status`: out-of-memory,
//! not-ready, and a `Vendor` error named by the runtime's own words otherwise). Functions
//! that take raw handles or addresses are `unsafe`: the caller keeps them alive.

use std::ffi::{c_char, c_int, c_void, CStr};

use gpuport_core::{DeviceId, Error, Result};
use gpuport_vendor_kit::status::{check, check_alloc, check_ready, fallback_names, no_device_detail, StatusNames};

use crate::sys::{Api, Handle, PointerAttributes, Status, ERROR_NO_DEVICE, ERROR_PEER_ACCESS_ALREADY_ENABLED};
use crate::KIND;

impl StatusNames for Api {
    const BACKEND: gpuport_core::BackendKind = KIND;
    fn describe(&self, status: Status) -> (String, String) {
        // SAFETY: both return null or a static NUL-terminated string for any status.
        let (n, t) = unsafe { ((self.statusName)(status), (self.statusString)(status)) };
        // SAFETY: as above.
        let text =
            |p: *const c_char| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        fallback_names(status, text(n), text(t), "fvStatus")
    }
}

// --- Initialisation and devices ------------------------------------------------------------

/// `init`: a runtime without devices is `NoDevice`, with the runtime's words.
pub fn init(api: &Api, library: &str) -> Result<()> {
    // SAFETY: no arguments beyond the flags.
    match unsafe { (api.init)(0) } {
        ERROR_NO_DEVICE => {
            Err(Error::NoDevice { backend: KIND, detail: no_device_detail(api, ERROR_NO_DEVICE, library) })
        }
        status => check(api, status, "init"),
    }
}

/// `deviceCount`.
pub fn device_count(api: &Api) -> Result<u32> {
    let mut n: c_int = 0;
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.deviceCount)(&mut n) }, "deviceCount")?;
    Ok(n.max(0) as u32)
}

/// `getDevice`: the calling thread's current device.
pub fn current_device(api: &Api) -> Result<c_int> {
    let mut d: c_int = -1;
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.getDevice)(&mut d) }, "getDevice")?;
    Ok(d)
}

/// `setDevice`.
pub fn set_device(api: &Api, ordinal: c_int) -> Result<()> {
    // SAFETY: plain values.
    check(api, unsafe { (api.setDevice)(ordinal) }, "setDevice")
}

/// `deviceName`.
pub fn device_name(api: &Api, ordinal: c_int) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes.
    check(api, unsafe { (api.deviceName)(buf.as_mut_ptr(), 256, ordinal) }, "deviceName")?;
    Ok(gpuport_vendor_kit::c_text::c_text(&buf))
}

/// `deviceTotalMem`.
pub fn total_memory(api: &Api, ordinal: c_int) -> Result<usize> {
    let mut bytes = 0usize;
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.deviceTotalMem)(&mut bytes, ordinal) }, "deviceTotalMem")?;
    Ok(bytes)
}

/// `deviceComputeUnits`.
pub fn compute_units(api: &Api, ordinal: c_int) -> Result<u32> {
    let mut n: c_int = 0;
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.deviceComputeUnits)(&mut n, ordinal) }, "deviceComputeUnits")?;
    Ok(n.max(0) as u32)
}

/// `deviceCanAccessPeer`.
pub fn can_access_peer(api: &Api, ordinal: c_int, peer: c_int) -> Result<bool> {
    let mut can: c_int = 0;
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.deviceCanAccessPeer)(&mut can, ordinal, peer) }, "deviceCanAccessPeer")?;
    Ok(can != 0)
}

/// `deviceEnablePeerAccess` from the current device; already enabled is success (the
/// contract lets a caller enable access as often as it likes).
pub fn enable_peer_access(api: &Api, peer: c_int) -> Result<()> {
    // SAFETY: plain values.
    match unsafe { (api.deviceEnablePeerAccess)(peer) } {
        ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        status => check(api, status, "deviceEnablePeerAccess"),
    }
}

/// `deviceSynchronize`.
pub fn device_synchronize(api: &Api) -> Result<()> {
    // SAFETY: no arguments.
    check(api, unsafe { (api.deviceSynchronize)() }, "deviceSynchronize")
}

/// `streamPriorityRange`: `(least, greatest)`.
pub fn stream_priority_range(api: &Api) -> Result<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    check(api, unsafe { (api.streamPriorityRange)(&mut least, &mut greatest) }, "streamPriorityRange")?;
    Ok((least, greatest))
}

// --- Memory --------------------------------------------------------------------------------

/// `malloc`.
pub fn malloc(api: &Api, bytes: usize, device: DeviceId) -> Result<u64> {
    let mut p = 0u64;
    // SAFETY: a valid out-pointer.
    check_alloc(api, unsafe { (api.malloc)(&mut p, bytes) }, "malloc", device, bytes)?;
    Ok(p)
}

/// `mallocManaged`.
pub fn malloc_managed(api: &Api, bytes: usize, device: DeviceId) -> Result<u64> {
    let mut p = 0u64;
    // SAFETY: a valid out-pointer.
    check_alloc(api, unsafe { (api.mallocManaged)(&mut p, bytes) }, "mallocManaged", device, bytes)?;
    Ok(p)
}

/// `mallocHost`.
pub fn malloc_host(api: &Api, bytes: usize, device: DeviceId) -> Result<u64> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check_alloc(api, unsafe { (api.mallocHost)(&mut p, bytes) }, "mallocHost", device, bytes)?;
    Ok(p as usize as u64)
}

/// `mallocAsync`.
///
/// # Safety
/// `stream` is a live stream of the current device.
pub unsafe fn malloc_async(api: &Api, bytes: usize, stream: Handle, device: DeviceId) -> Result<u64> {
    let mut p = 0u64;
    // SAFETY: a valid out-pointer; the stream per the contract.
    check_alloc(api, unsafe { (api.mallocAsync)(&mut p, bytes, stream) }, "mallocAsync", device, bytes)?;
    Ok(p)
}

/// `free`.
///
/// # Safety
/// `addr` came from `malloc` or `mallocManaged` and is freed once, unused.
pub unsafe fn free(api: &Api, addr: u64) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.free)(addr) }, "free")
}

/// `freeHost`.
///
/// # Safety
/// `addr` came from `mallocHost` and is freed once, unused.
pub unsafe fn free_host(api: &Api, addr: u64) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.freeHost)(addr as usize as *mut c_void) }, "freeHost")
}

/// `freeAsync`.
///
/// # Safety
/// `addr` came from `mallocAsync` and is freed once; `stream` is live.
pub unsafe fn free_async(api: &Api, addr: u64, stream: Handle) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.freeAsync)(addr, stream) }, "freeAsync")
}

/// `pointerGetAttributes`.
pub fn pointer_attributes(api: &Api, addr: u64) -> Result<PointerAttributes> {
    let mut attrs = PointerAttributes::default();
    // SAFETY: a valid out-pointer; any address may be asked about.
    check(api, unsafe { (api.pointerGetAttributes)(&mut attrs, addr) }, "pointerGetAttributes")?;
    Ok(attrs)
}

// --- Streams, copies and kernels -----------------------------------------------------------

/// `streamCreate`.
pub fn stream_create(api: &Api, flags: u32, priority: i32) -> Result<Handle> {
    let mut s: Handle = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.streamCreate)(&mut s, flags, priority) }, "streamCreate")?;
    Ok(s)
}

/// Defines checked calls that take handles and addresses the caller keeps alive.
macro_rules! handle_calls {
    ($($(#[$doc:meta])* $name:ident => $field:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// The handles are live and the memory ranges valid until the call's work has run.
        pub unsafe fn $name(api: &Api, $($arg: $ty),*) -> Result<()> {
            // SAFETY: the caller's contract.
            check(api, unsafe { (api.$field)($($arg),*) }, stringify!($field))
        }
    )*};
}

handle_calls! {
    /// `streamDestroy` (queued work still completes).
    stream_destroy => streamDestroy(stream: Handle);
    /// `streamSynchronize`.
    stream_synchronize => streamSynchronize(stream: Handle);
    /// `streamWaitEvent`.
    stream_wait_event => streamWaitEvent(stream: Handle, event: Handle);
    /// `memset` on the default stream.
    memset => memset(dst: u64, value: u8, len: usize);
    /// `memsetAsync`.
    memset_async => memsetAsync(dst: u64, value: u8, len: usize, stream: Handle);
    /// `memcpyAsync`.
    memcpy_async => memcpyAsync(dst: u64, src: u64, len: usize, stream: Handle);
    /// `memcpyPeerAsync`.
    memcpy_peer_async => memcpyPeerAsync(dst: u64, dst_device: c_int, src: u64, src_device: c_int, len: usize, stream: Handle);
    /// `launchHostFunc`.
    launch_host_func => launchHostFunc(stream: Handle, f: Option<unsafe extern "C" fn(*mut c_void)>, user: *mut c_void);
    /// `eventDestroy`.
    event_destroy => eventDestroy(event: Handle);
    /// `eventRecord`.
    event_record => eventRecord(event: Handle, stream: Handle);
    /// `eventSynchronize`.
    event_synchronize => eventSynchronize(event: Handle);
    /// `moduleUnload`.
    module_unload => moduleUnload(module: Handle);
    /// `launchKernel`.
    launch_kernel => launchKernel(function: Handle, grid: *const u32, block: *const u32, shared: u32, stream: Handle, params: *mut *mut c_void);
}

/// `streamQuery`: whether the stream's work is done.
///
/// # Safety
/// `stream` is live.
pub unsafe fn stream_done(api: &Api, stream: Handle) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.streamQuery)(stream) }, "streamQuery")
}

/// `eventCreate`.
pub fn event_create(api: &Api, flags: u32) -> Result<Handle> {
    let mut e: Handle = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check(api, unsafe { (api.eventCreate)(&mut e, flags) }, "eventCreate")?;
    Ok(e)
}

/// `eventQuery`: whether the event's work is done.
///
/// # Safety
/// `event` is live.
pub unsafe fn event_done(api: &Api, event: Handle) -> Result<bool> {
    // SAFETY: the caller's contract.
    check_ready(api, unsafe { (api.eventQuery)(event) }, "eventQuery")
}

/// `eventElapsedTime`: `NotReady` while a record is pending.
///
/// # Safety
/// Both events are live.
pub unsafe fn event_elapsed_ms(api: &Api, start: Handle, end: Handle) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: a valid out-pointer; the events per the contract.
    let status = unsafe { (api.eventElapsedTime)(&mut ms, start, end) };
    if !check_ready(api, status, "eventElapsedTime")? {
        return Err(Error::NotReady { what: "an event's recorded work has not completed".into() });
    }
    Ok(ms)
}

/// `moduleLoadData` of `image`.
pub fn module_load(api: &Api, image: &[u8]) -> Result<Handle> {
    let mut m: Handle = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the image with its length, alive for the call.
    check(api, unsafe { (api.moduleLoadData)(&mut m, image.as_ptr().cast(), image.len()) }, "moduleLoadData")?;
    Ok(m)
}

/// `moduleGetFunction`.
///
/// # Safety
/// `module` is loaded.
pub unsafe fn module_function(api: &Api, module: Handle, name: &CStr) -> Result<Handle> {
    let mut f: Handle = std::ptr::null_mut();
    // SAFETY: a valid out-pointer and name; the module per the contract.
    check(api, unsafe { (api.moduleGetFunction)(&mut f, module, name.as_ptr()) }, "moduleGetFunction")?;
    Ok(f)
}
