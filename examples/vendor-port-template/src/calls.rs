//! Step B5: the call table — `gpuport_vendor_kit::VendorCalls` for this runtime's
//! device context, each method one checked `result` call. The vendor kit builds the whole
//! contract over it: the device (memory, streams, events, modules, peers, the device-wide
//! synchronize), streams with ownership and kept errors, the `Stream` data path with its
//! range checks, host callbacks that never unwind into C and never release anything on the
//! runtime's thread, and the refusal of blocking calls inside them.

use std::ffi::{c_void, CStr};

use gpuport_core::{
    DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, LaunchConfig, MemoryKind, ModuleImage, PointerAttributes,
    Result, StreamFlags,
};
use gpuport_vendor_kit::kernel_args::{param_pointers, ArgSlot};
use gpuport_vendor_kit::{run_host_callback, VendorCalls};

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, Handle};
use crate::KIND;

/// The host function handed to `launchHostFunc`: the kit's trampoline, which runs the
/// callback inside `catch_unwind` and so never unwinds into the runtime.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    // SAFETY: the runtime calls this once with the pointer `launch_host_callback` gave it.
    unsafe { run_host_callback(user) }
}

/// The module image format this runtime loads (`ModuleImage::Custom`'s tag).
pub const IMAGE_FORMAT: &str = "fakevendor";

impl VendorCalls for DeviceCtx {
    type Stream = Handle;
    type Event = Handle;
    type Module = Handle;
    type Function = Handle;

    fn device_id(&self) -> DeviceId {
        self.id
    }
    fn bind(&self) -> Result<()> {
        DeviceCtx::bind(self)
    }

    // The device.
    fn info(&self) -> Result<DeviceInfo> {
        let api = self.rt.api;
        Ok(DeviceInfo {
            id: self.id,
            name: result::device_name(api, self.ordinal)?,
            total_memory: self.total_memory as u64,
            compute_capability: None,
            arch: None,
            multiprocessors: Some(result::compute_units(api, self.ordinal)?),
            pci_bus_id: None,
            uuid: None,
        })
    }
    fn can_access_peer(&self, peer: &DeviceCtx) -> Result<bool> {
        result::can_access_peer(self.rt.api, self.ordinal, peer.ordinal)
    }
    fn enable_peer_access(&self, peer: &DeviceCtx) -> Result<()> {
        result::enable_peer_access(self.rt.api, peer.ordinal)
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        self.bind()?;
        let a = result::pointer_attributes(self.rt.api, addr)?;
        let (memory, host_accessible) = match a.kind {
            sys::MEMORY_DEVICE => (MemoryKind::Device, false),
            sys::MEMORY_HOST => (MemoryKind::PinnedHost, true),
            sys::MEMORY_MANAGED => (MemoryKind::Managed, true),
            _ => return Ok(PointerAttributes::unregistered()),
        };
        Ok(PointerAttributes {
            device: (a.device >= 0).then(|| DeviceId::new(KIND, a.device as u32)),
            memory,
            host_accessible,
            device_accessible: true,
            managed: memory == MemoryKind::Managed,
            allocation: (a.start != 0).then_some((a.start, a.size)),
        })
    }

    // Streams and events.
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        result::stream_priority_range(self.rt.api)
    }
    fn stream_create(&self, flags: StreamFlags, priority: i32) -> Result<Handle> {
        let fv_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        result::stream_create(self.rt.api, fv_flags, priority)
    }
    fn per_thread_stream_handle(&self) -> Result<Handle> {
        Err(Error::unsupported(KIND, "the per-thread default stream (the runtime has none; use a created stream)"))
    }
    fn event_create(&self, flags: EventFlags) -> Result<Handle> {
        // A blocking-sync event only changes how a waiting host thread waits; this runtime
        // always sleeps, so the flag's promise holds. Interprocess events it has not.
        if flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::unsupported(KIND, "interprocess events"));
        }
        let timing = if flags.contains(EventFlags::DISABLE_TIMING) { sys::EVENT_DISABLE_TIMING } else { 0 };
        result::event_create(self.rt.api, timing)
    }
    fn event_synchronize(&self, event: Handle) -> Result<()> {
        // SAFETY: a live event (its handle holds it).
        unsafe { result::event_synchronize(self.rt.api, event) }
    }
    fn event_elapsed_ms(&self, start: Handle, end: Handle) -> Result<f32> {
        // SAFETY: both events are live (each handle holds its event).
        unsafe { result::event_elapsed_ms(self.rt.api, start, end) }
    }
    fn event_record(&self, event: Handle, stream: Handle) -> Result<()> {
        // SAFETY: both handles are live (the caller's stream and event hold them).
        unsafe { result::event_record(self.rt.api, event, stream) }
    }
    fn event_done(&self, event: Handle) -> Result<bool> {
        // SAFETY: a live event.
        unsafe { result::event_done(self.rt.api, event) }
    }
    fn event_destroy(&self, event: Handle) -> Result<()> {
        // SAFETY: an event the kit created, destroyed once.
        unsafe { result::event_destroy(self.rt.api, event) }
    }
    fn stream_done(&self, stream: Handle) -> Result<bool> {
        // SAFETY: a live stream.
        unsafe { result::stream_done(self.rt.api, stream) }
    }
    fn stream_synchronize(&self, stream: Handle) -> Result<()> {
        // SAFETY: a live stream.
        unsafe { result::stream_synchronize(self.rt.api, stream) }
    }
    fn device_synchronize(&self) -> Result<()> {
        result::device_synchronize(self.rt.api)
    }
    fn stream_destroy(&self, stream: Handle) -> Result<()> {
        // SAFETY: a stream the kit created, destroyed once; its queued work still runs.
        unsafe { result::stream_destroy(self.rt.api, stream) }
    }
    fn launch_host_callback(&self, stream: Handle, user: *mut c_void) -> Result<()> {
        // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it and never
        // unwinds.
        unsafe { result::launch_host_func(self.rt.api, stream, Some(host_fn), user) }
    }

    // The stream data path.
    fn stream_wait_event(&self, stream: Handle, event: Handle) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { result::stream_wait_event(self.rt.api, stream, event) }
    }
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, stream: Handle) -> Result<()> {
        // SAFETY: forwarded: both ranges stay valid until the copy has run.
        unsafe { result::memcpy_async(self.rt.api, dst, src, len, stream) }
    }
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        stream: Handle,
    ) -> Result<()> {
        let (d, s) = (dst_device.ordinal as i32, src_device.ordinal as i32);
        // SAFETY: forwarded; the runtime names each side by its device ordinal.
        unsafe { result::memcpy_peer_async(self.rt.api, dst, d, src, s, len, stream) }
    }
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, stream: Handle) -> Result<()> {
        // SAFETY: forwarded: the range stays valid until the memset has run.
        unsafe { result::memset_async(self.rt.api, dst, value, len, stream) }
    }
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()> {
        // SAFETY: forwarded: a valid range of this device's memory.
        unsafe { result::memset(self.rt.api, dst, value, len) }
    }
    unsafe fn launch_kernel(
        &self,
        function: Handle,
        config: &LaunchConfig,
        stream: Handle,
        args: &mut [ArgSlot],
    ) -> Result<()> {
        let (grid, block) = (config.grid, config.block);
        let mut params = param_pointers(args);
        let params = params.as_mut_ptr();
        // SAFETY: forwarded: one pointer per parameter, to its value, alive for the call;
        // the function's module stays loaded; the dimensions are three values each.
        unsafe {
            result::launch_kernel(
                self.rt.api,
                function,
                grid.as_ptr(),
                block.as_ptr(),
                config.shared_mem_bytes,
                stream,
                params,
            )
        }
    }
    fn legacy_stream_handle(&self) -> Handle {
        // The null stream: the device's default stream.
        std::ptr::null_mut()
    }

    // Memory.
    fn total_memory(&self) -> usize {
        self.total_memory
    }
    fn mem_alloc(&self, bytes: usize) -> Result<u64> {
        result::malloc(self.rt.api, bytes, self.id)
    }
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64> {
        result::malloc_managed(self.rt.api, bytes, self.id)
    }
    fn mem_alloc_host(&self, bytes: usize, _flags: HostAllocFlags) -> Result<u64> {
        // The runtime's pinned memory has no variants: every flag's promise already holds
        // (portable to every device, mapped into the one address space).
        result::malloc_host(self.rt.api, bytes, self.id)
    }
    fn stream_ordered_supported(&self) -> Result<()> {
        Ok(())
    }
    unsafe fn mem_alloc_async(&self, bytes: usize, stream: Handle) -> Result<u64> {
        // SAFETY: forwarded: a live stream of this device, current.
        unsafe { result::malloc_async(self.rt.api, bytes, stream, self.id) }
    }
    unsafe fn mem_free(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { result::free(self.rt.api, addr) }
    }
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { result::free_host(self.rt.api, addr) }
    }
    unsafe fn mem_free_async(&self, addr: u64, stream: Handle) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { result::free_async(self.rt.api, addr, stream) }
    }

    // Modules.
    fn module_load(&self, image: ModuleImage<'_>) -> Result<Handle> {
        match image {
            ModuleImage::Custom { format: IMAGE_FORMAT, bytes } => result::module_load(self.rt.api, bytes),
            other => Err(Error::unsupported(KIND, format!("loading a {}", other.kind_name()))),
        }
    }
    unsafe fn module_unload(&self, module: Handle) -> Result<()> {
        // SAFETY: forwarded: loaded once, unloaded once.
        unsafe { result::module_unload(self.rt.api, module) }
    }
    unsafe fn module_function(&self, module: Handle, name: &CStr) -> Result<Handle> {
        // SAFETY: forwarded: the module is loaded.
        unsafe { result::module_function(self.rt.api, module, name) }
    }
}
