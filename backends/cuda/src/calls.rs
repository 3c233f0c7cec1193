//! The vendor kit's calls (`gpuport_vendor_kit::VendorCalls`) for a CUDA device
//! context: each one checked `result` call, with what only CUDA needs (the contexts of a
//! peer copy). Everything above them — streams, events, the `Stream` data path, host
//! callbacks — is the vendor kit's.

use std::ffi::{c_uint, c_void, CStr};

use gpuport_core::{
    DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, LaunchConfig, ModuleImage, PointerAttributes, Result,
    StreamFlags,
};
use gpuport_vendor_kit::kernel_args::{param_pointers, ArgSlot};
use gpuport_vendor_kit::{run_host_callback, VendorCalls};

use crate::context::DeviceCtx;
use crate::module::LoadableImage;
use crate::result::{self, ctx, event, memory, module, stream};
use crate::sys::{self, CUevent, CUfunction, CUmodule, CUstream};

/// The host function handed to `cuLaunchHostFunc`: the shared trampoline, which runs the
/// callback inside `catch_unwind` and so never unwinds into the driver.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    // SAFETY: the driver calls this once with the pointer `launch_host_callback` gave it.
    unsafe { run_host_callback(user) }
}

impl VendorCalls for DeviceCtx {
    type Stream = CUstream;
    type Event = CUevent;
    type Module = CUmodule;
    type Function = CUfunction;

    fn device_id(&self) -> DeviceId {
        self.id
    }
    fn bind(&self) -> Result<()> {
        DeviceCtx::bind(self)
    }
    fn compile_target(&self) -> Result<gpuport_vendor_kit::compile::CompileTarget> {
        let info = self.info()?;
        let (major, minor) = info.compute_capability.ok_or_else(|| {
            Error::unsupported(
                gpuport_core::BackendKind::Cuda,
                format!("compiling for {}: no compute capability", self.id),
            )
        })?;
        Ok(gpuport_vendor_kit::compile::CompileTarget {
            compiler: crate::nvrtc::nvrtc()?,
            arch: format!("sm_{major}{minor}"),
        })
    }
    fn info(&self) -> Result<DeviceInfo> {
        crate::device::info(&self.driver, self.id.ordinal)
    }
    fn can_access_peer(&self, peer: &DeviceCtx) -> Result<bool> {
        result::device::can_access_peer(&self.driver.api, self.cu_device, peer.cu_device)
    }
    fn enable_peer_access(&self, peer: &DeviceCtx) -> Result<()> {
        // SAFETY: the peer's context is retained while `peer` lives.
        unsafe { ctx::enable_peer_access(&self.driver.api, peer.ctx) }
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        crate::memory::pointer_attributes(self, addr)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        ctx::stream_priority_range(&self.driver.api)
    }
    fn stream_create(&self, flags: StreamFlags, priority: i32) -> Result<CUstream> {
        let cu_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        stream::create_with_priority(&self.driver.api, cu_flags, priority)
    }
    fn per_thread_stream_handle(&self) -> Result<CUstream> {
        Ok(sys::STREAM_PER_THREAD as CUstream)
    }
    fn event_create(&self, flags: EventFlags) -> Result<CUevent> {
        // EventFlags' bits are the driver's: BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4.
        event::create(&self.driver.api, flags.bits() as std::ffi::c_uint)
    }
    fn event_synchronize(&self, ev: CUevent) -> Result<()> {
        // SAFETY: a live event (its handle holds it).
        unsafe { event::synchronize(&self.driver.api, ev) }
    }
    fn event_elapsed_ms(&self, start: CUevent, end: CUevent) -> Result<f32> {
        // SAFETY: both events are live (each handle holds its event).
        unsafe { event::elapsed_time(&self.driver.api, start, end) }
    }
    fn event_record(&self, ev: CUevent, s: CUstream) -> Result<()> {
        // SAFETY: both handles are live (the caller's stream state holds them).
        unsafe { event::record(&self.driver.api, ev, s) }
    }
    fn event_done(&self, ev: CUevent) -> Result<bool> {
        // SAFETY: a live event.
        unsafe { event::query(&self.driver.api, ev) }
    }
    fn event_destroy(&self, ev: CUevent) -> Result<()> {
        // SAFETY: an event created by gpuport, destroyed once.
        unsafe { event::destroy(&self.driver.api, ev) }
    }
    fn stream_done(&self, s: CUstream) -> Result<bool> {
        // SAFETY: a live stream handle.
        unsafe { stream::query(&self.driver.api, s) }
    }
    fn stream_synchronize(&self, s: CUstream) -> Result<()> {
        // SAFETY: a live stream handle.
        unsafe { stream::synchronize(&self.driver.api, s) }
    }
    fn device_synchronize(&self) -> Result<()> {
        // The caller bound the context.
        ctx::synchronize(&self.driver.api)
    }
    fn stream_destroy(&self, s: CUstream) -> Result<()> {
        // SAFETY: a stream created by gpuport, destroyed once; queued work still completes.
        unsafe { stream::destroy(&self.driver.api, s) }
    }
    fn launch_host_callback(&self, s: CUstream, user: *mut c_void) -> Result<()> {
        // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it, and never
        // unwinds (the shared trampoline catches panics).
        unsafe { stream::launch_host_func(&self.driver.api, s, Some(host_fn), user) }
    }
    fn stream_wait_event(&self, s: CUstream, ev: CUevent) -> Result<()> {
        // SAFETY: both handles are live (the caller's stream and event states hold them).
        unsafe { stream::wait_event(&self.driver.api, s, ev) }
    }
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, s: CUstream) -> Result<()> {
        // SAFETY: forwarded: both ranges stay valid until the copy has run; the stream is live.
        unsafe { stream::memcpy_async(&self.driver.api, dst, src, len, s) }
    }
    unsafe fn memcpy_2d_async(
        &self,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        s: CUstream,
    ) -> Result<()> {
        // SAFETY: forwarded: every row of both sides stays valid until the copy has run;
        // the kit passes pitches the driver accepts.
        unsafe { stream::memcpy_2d_async(&self.driver.api, dst, dst_pitch, src, src_pitch, width, height, s) }
    }
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        s: CUstream,
    ) -> Result<()> {
        // A peer copy names each side's context; both devices are open (each buffer keeps
        // its device's context).
        let (src_ctx, dst_ctx) = match (DeviceCtx::live(src_device.ordinal), DeviceCtx::live(dst_device.ordinal)) {
            (Some(a), Some(b)) => (a.ctx, b.ctx),
            _ => return Err(Error::invalid_handle("a peer copy's device is not open")),
        };
        // SAFETY: forwarded; the contexts are retained by the open devices.
        unsafe { stream::memcpy_peer_async(&self.driver.api, dst, dst_ctx, src, src_ctx, len, s) }
    }
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, s: CUstream) -> Result<()> {
        // SAFETY: forwarded: the range stays valid until the memset has run.
        unsafe { stream::memset_d8_async(&self.driver.api, dst, value, len, s) }
    }
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()> {
        // SAFETY: forwarded: a valid range of this device's memory.
        unsafe { stream::memset_d8(&self.driver.api, dst, value, len) }
    }
    unsafe fn launch_kernel(
        &self,
        function: CUfunction,
        config: &LaunchConfig,
        s: CUstream,
        args: &mut [ArgSlot],
    ) -> Result<()> {
        let mut params = param_pointers(args);
        let params = params.as_mut_ptr();
        // SAFETY: forwarded: one pointer per parameter, to its value, alive for the call;
        // the function's module stays loaded.
        unsafe {
            stream::launch_kernel(
                &self.driver.api,
                function,
                config.grid,
                config.block,
                config.shared_mem_bytes,
                s,
                params,
            )
        }
    }
    fn legacy_stream_handle(&self) -> CUstream {
        sys::STREAM_LEGACY as CUstream
    }
    fn total_memory(&self) -> usize {
        self.total_memory
    }
    fn mem_alloc(&self, bytes: usize) -> Result<u64> {
        memory::alloc(&self.driver.api, bytes, self.id)
    }
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64> {
        memory::alloc_managed(&self.driver.api, bytes, self.id)
    }
    fn mem_alloc_host(&self, bytes: usize, flags: HostAllocFlags) -> Result<u64> {
        // HostAllocFlags' bits are the driver's CU_MEMHOSTALLOC_*.
        memory::host_alloc(&self.driver.api, bytes, flags.bits() as c_uint, self.id).map(|p| p as usize as u64)
    }
    fn stream_ordered_supported(&self) -> Result<()> {
        memory::has_alloc_async(&self.driver)?;
        memory::has_free_async(&self.driver)
    }
    unsafe fn mem_alloc_async(&self, bytes: usize, s: CUstream) -> Result<u64> {
        // SAFETY: forwarded: a live stream of this device, current.
        unsafe { memory::alloc_async(&self.driver, bytes, s, self.id) }
    }
    unsafe fn mem_free(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: from cuMemAlloc or cuMemAllocManaged, freed once.
        unsafe { memory::free(&self.driver.api, addr) }
    }
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: from cuMemHostAlloc, freed once.
        unsafe { memory::free_host(&self.driver.api, addr as usize as *mut c_void) }
    }
    unsafe fn host_register(&self, addr: u64, len: usize) -> Result<()> {
        // SAFETY: forwarded: host memory that stays allocated until unregistered.
        unsafe { memory::host_register(&self.driver.api, addr as usize as *mut c_void, len) }
    }
    unsafe fn host_unregister(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded: registered, unregistered once, unused.
        unsafe { memory::host_unregister(&self.driver.api, addr as usize as *mut c_void) }
    }
    unsafe fn mem_free_async(&self, addr: u64, s: CUstream) -> Result<()> {
        // SAFETY: forwarded: from cuMemAllocAsync, freed once on a live stream.
        unsafe { memory::free_async(&self.driver, addr, s) }
    }
    fn module_load(&self, image: ModuleImage<'_>) -> Result<CUmodule> {
        let image = LoadableImage::new(image)?;
        // SAFETY: a NUL-terminated PTX string or a checked image, alive for the call.
        unsafe { module::load_data(&self.driver.api, image.as_ptr()) }
    }
    unsafe fn module_unload(&self, m: CUmodule) -> Result<()> {
        // SAFETY: forwarded: loaded by cuModuleLoadData, unloaded once.
        unsafe { module::unload(&self.driver.api, m) }
    }
    unsafe fn module_function(&self, m: CUmodule, name: &CStr) -> Result<CUfunction> {
        // SAFETY: forwarded: the module is loaded.
        unsafe { module::get_function(&self.driver.api, m, name) }
    }
}
