//! The `Device` contract of a vendor device, over [`VendorCalls`].

use std::sync::Arc;

use gpuport_core::{
    Buffer, CompileOptions, DefaultStream, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel, KernelSource, Module,
    ModuleImage, PointerAttributes, Result, StreamFlags,
};

use crate::calls::{RawHandle, VendorCalls};
use crate::device::VendorDevice;
use crate::event::VendorEvent;
use crate::stream::VendorStream;
use crate::{memory, module};

impl<V: VendorCalls> VendorDevice<V> {
    /// `Device::info`.
    pub fn info(&self) -> Result<DeviceInfo> {
        self.calls.info()
    }

    /// `Device::alloc`.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<Buffer> {
        memory::alloc(self, bytes)
    }

    /// `Device::alloc_async`.
    pub fn alloc_async(self: &Arc<Self>, bytes: usize, stream: &VendorStream<V>) -> Result<Buffer> {
        memory::alloc_async(self, bytes, stream)
    }

    /// `Device::alloc_pinned`.
    pub fn alloc_pinned(self: &Arc<Self>, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        memory::alloc_pinned(self, bytes, flags)
    }

    /// `Device::alloc_managed`.
    pub fn alloc_managed(self: &Arc<Self>, bytes: usize) -> Result<Buffer> {
        memory::alloc_managed(self, bytes)
    }

    /// `Device::register_host`.
    pub fn register_host(self: &Arc<Self>, host: &Buffer) -> Result<Buffer> {
        memory::register_host(self, host)
    }

    /// `Device::memset`: this backend's memory only; done when it returns. The vendors
    /// queue their synchronous memset on the legacy default stream and may return before
    /// the bytes land, so this waits for that stream — only that one, not the device.
    pub fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        if dst.device().kind != self.kind() {
            return Err(Error::mismatch("memset", self.kind(), dst.device()));
        }
        let addr = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range was checked against a live allocation of this backend, which
        // `dst` keeps alive until the wait below.
        unsafe { self.calls.memset(addr, value, len) }?;
        self.stream_synchronize(self.legacy_stream_handle())
    }

    /// `Device::stream_priority_range`.
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.bind()?;
        self.calls.stream_priority_range()
    }

    /// `Device::create_stream`: an owned stream, its priority clamped into the driver's
    /// range (either order: the greatest priority is the smallest number on both vendors).
    pub fn create_stream(self: &Arc<Self>, flags: StreamFlags, priority: i32) -> Result<VendorStream<V>> {
        let (least, greatest) = self.stream_priority_range()?;
        let priority = priority.clamp(greatest.min(least), greatest.max(least));
        let raw = self.stream_create(flags, priority)?;
        Ok(VendorStream::new(self, raw, true, flags, priority))
    }

    /// `Device::default_stream`: one stream state per device (legacy) or per thread
    /// (per-thread) while a handle lives; borrowed, so dropping a handle neither destroys
    /// nor synchronizes it.
    pub fn default_stream(self: &Arc<Self>, which: DefaultStream) -> Result<VendorStream<V>> {
        Ok(match which {
            DefaultStream::Legacy => VendorStream::legacy_default(self, self.legacy_stream_handle()),
            DefaultStream::PerThread => VendorStream::per_thread_default(self, self.per_thread_stream_handle()?),
        })
    }

    /// `Device::wrap_stream`: a borrowed handle to a foreign stream of this device.
    ///
    /// # Safety
    /// `raw` is a live stream of this device and outlives every handle made from it.
    pub unsafe fn wrap_stream(self: &Arc<Self>, raw: usize) -> Result<VendorStream<V>> {
        // SAFETY: forwarded: a live stream of this device.
        let handle = unsafe { self.wrap_stream_handle(raw) }?;
        Ok(VendorStream::new(self, handle, false, StreamFlags::empty(), 0))
    }

    /// `Device::create_event`.
    pub fn create_event(self: &Arc<Self>, flags: EventFlags) -> Result<VendorEvent<V>> {
        VendorEvent::create(self, flags)
    }

    /// `Device::wrap_event`: a borrowed handle to a foreign event of this device.
    ///
    /// # Safety
    /// `raw` is a live event of this device and outlives every handle made from it.
    pub unsafe fn wrap_event(self: &Arc<Self>, raw: usize) -> Result<VendorEvent<V>> {
        if raw == 0 {
            return Err(Error::invalid_handle(format!("a null event handle of {}", self.kind())));
        }
        Ok(VendorEvent::from_parts(self, RawHandle::from_raw(raw), false, EventFlags::empty()))
    }

    /// `Device::make_current`: [`VendorCalls::make_current`] (the backend's own binding —
    /// a CUDA primary context made current, `hipSetDevice` — as before each of its calls).
    pub fn make_current(&self) -> Result<()> {
        self.calls.make_current()
    }

    /// `Device::synchronize`: waits for the device, then reports its streams' kept errors
    /// (sticky while the stream lives).
    pub fn synchronize(&self) -> Result<()> {
        self.streams.synchronize(&self.calls)
    }

    /// `Device::can_access_peer` (a device always reaches its own memory, never another
    /// backend's directly).
    pub fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if crate::same_backend("can_access_peer", self.device_id(), peer.device_id()).is_err() {
            return Ok(false);
        }
        if peer.device_id() == self.device_id() {
            return Ok(true);
        }
        self.calls.can_access_peer(&peer.calls)
    }

    /// `Device::enable_peer_access` (nothing to do for the device itself).
    pub fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        crate::same_backend("enable_peer_access", self.device_id(), peer.device_id())?;
        if peer.device_id() == self.device_id() {
            return Ok(());
        }
        self.bind()?;
        self.calls.enable_peer_access(&peer.calls)
    }

    /// `Device::pointer_attributes`.
    pub fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        self.calls.pointer_attributes(addr)
    }

    /// `Device::load_module`.
    pub fn load_module(self: &Arc<Self>, image: ModuleImage<'_>) -> Result<Module> {
        module::load(self, image)
    }

    /// `Device::kernel`.
    pub fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        module::kernel(self, module, name)
    }

    /// `Device::compile`.
    pub fn compile(self: &Arc<Self>, source: &KernelSource, options: &CompileOptions) -> Result<Module> {
        module::compile(self, source, options)
    }
}
