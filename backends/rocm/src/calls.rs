//! The vendor kit's calls (`gpuport_vendor_kit::VendorCalls`) for a HIP device
//! context: each one checked `result` call, with what only HIP needs (`hipLaunchHostFunc`
//! or, on ROCm 5.2, `hipStreamAddCallback`; device ordinals for a peer copy). Everything
//! above them — streams, events, the `Stream` data path, host callbacks — is the vendor
//! kit's.

use std::ffi::{c_int, c_uint, c_void, CStr};

use gpuport_core::{
    BackendKind, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, LaunchConfig, ModuleImage, PointerAttributes,
    Result, StreamFlags,
};
use gpuport_vendor_kit::kernel_args::{param_pointers, ArgSlot};
use gpuport_vendor_kit::{run_host_callback, VendorCalls};

use crate::context::DeviceCtx;
use crate::result::{device, event, memory, module, stream};
use crate::sys::{self, hipEvent_t, hipFunction_t, hipModule_t, hipStream_t, Status};

/// A device address as the runtime's pointer type.
fn ptr(addr: u64) -> *mut c_void {
    addr as usize as *mut c_void
}

/// For `hipLaunchHostFunc`: the shared trampoline, which runs the callback inside
/// `catch_unwind` and so never unwinds into the runtime.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    // SAFETY: the runtime calls this once with the pointer `launch_host_callback` gave it.
    unsafe { run_host_callback(user) }
}

/// For `hipStreamAddCallback` (ROCm 5.2 has no `hipLaunchHostFunc`): the same trampoline.
unsafe extern "C" fn stream_callback(_stream: hipStream_t, _status: Status, user: *mut c_void) {
    // SAFETY: as for `host_fn`.
    unsafe { run_host_callback(user) }
}

impl VendorCalls for DeviceCtx {
    type Stream = hipStream_t;
    type Event = hipEvent_t;
    type Module = hipModule_t;
    type Function = hipFunction_t;

    fn device_id(&self) -> DeviceId {
        self.id
    }
    fn bind(&self) -> Result<()> {
        DeviceCtx::bind(self)
    }
    fn compile_target(&self) -> Result<gpuport_vendor_kit::compile::CompileTarget> {
        let target = self.target.as_ref().ok_or_else(|| {
            Error::unsupported(
                BackendKind::Rocm,
                format!("compiling for {}: the runtime gives no architecture", self.id),
            )
        })?;
        Ok(gpuport_vendor_kit::compile::CompileTarget { compiler: crate::hiprtc::hiprtc()?, arch: target.to_string() })
    }
    fn info(&self) -> Result<DeviceInfo> {
        crate::device::info(&self.rt, self.id.ordinal, self.target.as_ref())
    }
    fn can_access_peer(&self, peer: &DeviceCtx) -> Result<bool> {
        device::can_access_peer(&self.rt.api, self.ordinal, peer.ordinal)
    }
    fn enable_peer_access(&self, peer: &DeviceCtx) -> Result<()> {
        device::enable_peer_access(&self.rt.api, peer.ordinal)
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        crate::memory::pointer_attributes(self, addr)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        device::stream_priority_range(&self.rt.api)
    }
    fn stream_create(&self, flags: StreamFlags, priority: i32) -> Result<hipStream_t> {
        let hip_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        stream::create_with_priority(&self.rt.api, hip_flags, priority)
    }
    fn per_thread_stream_handle(&self) -> Result<hipStream_t> {
        // From ROCm 6 every entry point takes the `hipStreamPerThread` handle for the
        // calling thread's default stream (HIP 7.2's lookup flags would select `_spt`
        // twins instead, a second table gpuport does without). ROCm 5 reaches it only
        // through the `_spt` twins.
        if self.rt.major() >= 6 {
            Ok(sys::STREAM_PER_THREAD as hipStream_t)
        } else {
            Err(Error::unsupported(
                BackendKind::Rocm,
                "the per-thread default stream on ROCm 5 (it needs the runtime's `_spt` entry points; use a created stream)",
            ))
        }
    }
    fn event_create(&self, flags: EventFlags) -> Result<hipEvent_t> {
        // EventFlags' bits are HIP's: BlockingSync 1, DisableTiming 2, Interprocess 4.
        event::create(&self.rt.api, flags.bits() as std::ffi::c_uint)
    }
    fn event_synchronize(&self, ev: hipEvent_t) -> Result<()> {
        // SAFETY: a live event (its handle holds it).
        unsafe { event::synchronize(&self.rt.api, ev) }
    }
    fn event_elapsed_ms(&self, start: hipEvent_t, end: hipEvent_t) -> Result<f32> {
        // SAFETY: both events are live (each handle holds its event).
        unsafe { event::elapsed_time(&self.rt.api, start, end) }
    }
    fn event_record(&self, ev: hipEvent_t, s: hipStream_t) -> Result<()> {
        // SAFETY: both handles are live (the caller's stream state holds them).
        unsafe { event::record(&self.rt.api, ev, s) }
    }
    fn event_done(&self, ev: hipEvent_t) -> Result<bool> {
        // SAFETY: a live event.
        unsafe { event::query(&self.rt.api, ev) }
    }
    fn event_destroy(&self, ev: hipEvent_t) -> Result<()> {
        // SAFETY: an event created by gpuport, destroyed once.
        unsafe { event::destroy(&self.rt.api, ev) }
    }
    fn stream_done(&self, s: hipStream_t) -> Result<bool> {
        // SAFETY: a live stream handle.
        unsafe { stream::query(&self.rt.api, s) }
    }
    fn stream_synchronize(&self, s: hipStream_t) -> Result<()> {
        // SAFETY: a live stream handle.
        unsafe { stream::synchronize(&self.rt.api, s) }
    }
    fn device_synchronize(&self) -> Result<()> {
        // The caller bound the device.
        device::synchronize(&self.rt.api)
    }
    fn stream_destroy(&self, s: hipStream_t) -> Result<()> {
        // SAFETY: a stream created by gpuport, destroyed once.
        unsafe { stream::destroy(&self.rt.api, s) }
    }
    fn launch_host_callback(&self, s: hipStream_t, user: *mut c_void) -> Result<()> {
        // SAFETY: `host_fn` / `stream_callback` take ownership of `user` when the stream
        // reaches them (only one is queued), and never unwind (the shared trampoline
        // catches panics).
        unsafe { stream::launch_host_func(&self.rt, s, Some(host_fn), Some(stream_callback), user) }
    }
    fn stream_wait_event(&self, s: hipStream_t, ev: hipEvent_t) -> Result<()> {
        // SAFETY: both handles are live (the caller's stream and event states hold them).
        unsafe { stream::wait_event(&self.rt.api, s, ev) }
    }
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, s: hipStream_t) -> Result<()> {
        // SAFETY: forwarded: both ranges stay valid until the copy has run; unified
        // addressing infers the direction.
        unsafe { stream::memcpy_async(&self.rt.api, ptr(dst), ptr(src), len, s) }
    }
    unsafe fn memcpy_2d_async(
        &self,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        s: hipStream_t,
    ) -> Result<()> {
        // SAFETY: forwarded: every row of both sides stays valid until the copy has run;
        // the kit passes pitches the runtime accepts.
        unsafe { stream::memcpy_2d_async(&self.rt.api, ptr(dst), dst_pitch, ptr(src), src_pitch, width, height, s) }
    }
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        s: hipStream_t,
    ) -> Result<()> {
        // SAFETY: forwarded; HIP names each side by its device ordinal.
        unsafe {
            stream::memcpy_peer_async(
                &self.rt.api,
                ptr(dst),
                dst_device.ordinal as c_int,
                ptr(src),
                src_device.ordinal as c_int,
                len,
                s,
            )
        }
    }
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, s: hipStream_t) -> Result<()> {
        // SAFETY: forwarded: the range stays valid until the memset has run.
        unsafe { stream::memset_async(&self.rt.api, ptr(dst), value, len, s) }
    }
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()> {
        // SAFETY: forwarded: a valid range of this device's memory.
        unsafe { stream::memset(&self.rt.api, ptr(dst), value, len) }
    }
    unsafe fn launch_kernel(
        &self,
        function: hipFunction_t,
        config: &LaunchConfig,
        s: hipStream_t,
        args: &mut [ArgSlot],
    ) -> Result<()> {
        let mut params = param_pointers(args);
        let params = params.as_mut_ptr();
        // SAFETY: forwarded: one pointer per parameter, to its value, alive for the call;
        // the function's module stays loaded.
        unsafe {
            stream::launch_kernel(&self.rt.api, function, config.grid, config.block, config.shared_mem_bytes, s, params)
        }
    }
    fn legacy_stream_handle(&self) -> hipStream_t {
        // HIP 7 names it `hipStreamLegacy`; before, the null stream is its only name (and
        // 1 is no stream). The null stream still means it on HIP 7, but only for programs
        // not built for per-thread default streams: the explicit handle says what is meant.
        if self.rt.major() >= 7 {
            sys::STREAM_LEGACY as hipStream_t
        } else {
            std::ptr::null_mut()
        }
    }
    fn total_memory(&self) -> usize {
        self.total_memory
    }
    fn mem_alloc(&self, bytes: usize) -> Result<u64> {
        memory::malloc(&self.rt.api, bytes, self.id).map(|p| p as usize as u64)
    }
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64> {
        memory::malloc_managed(&self.rt.api, bytes, self.id).map(|p| p as usize as u64)
    }
    fn mem_alloc_host(&self, bytes: usize, flags: HostAllocFlags) -> Result<u64> {
        // HostAllocFlags' bits are HIP's (Portable 1, Mapped 2, WriteCombined 4).
        memory::host_malloc(&self.rt.api, bytes, flags.bits() as c_uint, self.id).map(|p| p as usize as u64)
    }
    fn stream_ordered_supported(&self) -> Result<()> {
        memory::has_stream_ordered(&self.rt)
    }
    unsafe fn mem_alloc_async(&self, bytes: usize, s: hipStream_t) -> Result<u64> {
        // SAFETY: forwarded: a live stream of this device.
        unsafe { memory::malloc_async(&self.rt, bytes, s, self.id) }.map(|p| p as usize as u64)
    }
    unsafe fn mem_free(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: from hipMalloc or hipMallocManaged, freed once.
        unsafe { memory::free(&self.rt.api, ptr(addr)) }
    }
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: from hipHostMalloc, freed once.
        unsafe { memory::host_free(&self.rt.api, ptr(addr)) }
    }
    unsafe fn host_register(&self, addr: u64, len: usize) -> Result<()> {
        // SAFETY: forwarded: host memory that stays allocated until unregistered.
        unsafe { memory::host_register(&self.rt.api, ptr(addr), len) }
    }
    unsafe fn host_unregister(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: registered, unregistered once, unused.
        unsafe { memory::host_unregister(&self.rt.api, ptr(addr)) }
    }
    unsafe fn mem_free_async(&self, addr: u64, s: hipStream_t) -> Result<()> {
        // SAFETY: forwarded: from hipMallocAsync, freed once on a live stream.
        unsafe { memory::free_async(&self.rt, ptr(addr), s) }
    }
    fn module_load(&self, image: ModuleImage<'_>) -> Result<hipModule_t> {
        let bytes = crate::module::code_object(image, self.target.as_ref(), self.id)?;
        // SAFETY: a checked code object, alive for the call.
        unsafe { module::load_data(&self.rt.api, bytes.as_ptr().cast()) }
    }
    unsafe fn module_unload(&self, m: hipModule_t) -> Result<()> {
        // SAFETY: forwarded: loaded by hipModuleLoadData, unloaded once.
        unsafe { module::unload(&self.rt.api, m) }
    }
    unsafe fn module_function(&self, m: hipModule_t, name: &CStr) -> Result<hipFunction_t> {
        // SAFETY: forwarded: the module is loaded.
        unsafe { module::get_function(&self.rt.api, m, name) }
    }
}
