//! CUDA devices.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{
    Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel, Module,
    ModuleImage, PointerAttributes, Result, StreamFlags,
};

use gpuport_driver::vendor_event::VendorEvent;
use gpuport_driver::vendor_memory;
use gpuport_driver::vendor_stream::VendorStream;

use crate::context::DeviceCtx;
use crate::event::CudaEvent;
use crate::memory;
use crate::result;
use crate::stream::CudaStream;
use crate::sys::{self, CUdevice_attribute, Driver};
use crate::CudaBackend;

/// A CUDA device; handles share its retained primary context.
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) ctx: Arc<DeviceCtx>,
}

/// Facts about device `ordinal` (no context needed).
pub(crate) fn info(driver: &Driver, ordinal: u32) -> Result<DeviceInfo> {
    let api = &driver.api;
    let dev = result::device::get(api, ordinal as c_int)?;
    let attribute = |attr| result::device::attribute(api, dev, attr);
    let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceInfo {
        id: DeviceId::new(gpuport_core::BackendKind::Cuda, ordinal),
        name: result::device::name(api, dev)?,
        total_memory: result::device::total_mem(api, dev)? as u64,
        compute_capability: Some((major as u32, minor as u32)),
        arch: Some(format!("sm_{major}{minor}")),
        multiprocessors: Some(sms as u32),
        pci_bus_id: result::device::pci_bus_id(api, dev),
        uuid: result::device::uuid(api, dev),
    })
}

impl Device for CudaDevice {
    type Backend = CudaBackend;

    fn id(&self) -> DeviceId {
        self.ctx.id
    }
    fn info(&self) -> Result<DeviceInfo> {
        info(&self.ctx.driver, self.ctx.id.ordinal)
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        vendor_memory::alloc(&self.ctx, bytes)
    }
    fn alloc_async(&self, bytes: usize, stream: &CudaStream) -> Result<Buffer> {
        vendor_memory::alloc_async(&self.ctx, bytes, &stream.0)
    }
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        vendor_memory::alloc_pinned(&self.ctx, bytes, flags)
    }
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer> {
        vendor_memory::alloc_managed(&self.ctx, bytes)
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        if dst.device().kind != gpuport_core::BackendKind::Cuda {
            return Err(Error::mismatch("memset", gpuport_core::BackendKind::Cuda, dst.device()));
        }
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        let api = &self.ctx.driver.api;
        // SAFETY: the range was checked against a live CUDA allocation.
        unsafe { result::stream::memset_d8(api, d, value, len) }?;
        // cuMemsetD8 is queued on the legacy default stream and may return before the bytes
        // land: wait for that stream only, not for every stream of the device.
        // SAFETY: the legacy stream handle is always valid in a current context.
        unsafe { result::stream::synchronize(api, sys::STREAM_LEGACY as sys::CUstream) }
    }
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<CudaStream> {
        CudaStream::create(&self.ctx, flags, priority)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.ctx.bind()?;
        result::ctx::stream_priority_range(&self.ctx.driver.api)
    }
    fn default_stream(&self, which: DefaultStream) -> Result<CudaStream> {
        // One stream state per device (legacy) or per thread (per-thread) while a handle
        // lives; borrowed, so dropping a handle neither destroys nor synchronizes it.
        Ok(CudaStream(match which {
            DefaultStream::Legacy => VendorStream::legacy_default(&self.ctx, sys::STREAM_LEGACY as sys::CUstream),
            DefaultStream::PerThread => {
                VendorStream::per_thread_default(&self.ctx, sys::STREAM_PER_THREAD as sys::CUstream)
            }
        }))
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<CudaStream> {
        Ok(CudaStream(VendorStream::new(&self.ctx, raw as sys::CUstream, false, StreamFlags::empty(), 0)))
    }
    fn create_event(&self, flags: EventFlags) -> Result<CudaEvent> {
        VendorEvent::create(&self.ctx, flags).map(CudaEvent)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<CudaEvent> {
        if raw == 0 {
            return Err(Error::invalid_handle("a null CUevent"));
        }
        Ok(CudaEvent(VendorEvent::from_parts(&self.ctx, raw as sys::CUevent, false, EventFlags::empty())))
    }
    fn synchronize(&self) -> Result<()> {
        // Waits for the context, then reports its streams' kept errors (sticky).
        self.ctx.streams.synchronize(&*self.ctx)
    }
    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if peer.ctx.id == self.ctx.id {
            return Ok(true);
        }
        result::device::can_access_peer(&self.ctx.driver.api, self.ctx.cu_device, peer.ctx.cu_device)
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        if peer.ctx.id == self.ctx.id {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the peer context is retained by `peer`.
        unsafe { result::ctx::enable_peer_access(&self.ctx.driver.api, peer.ctx.ctx) }
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        memory::pointer_attributes(&self.ctx, addr)
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        crate::module::load(&self.ctx, image)
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        crate::module::kernel(&self.ctx, module, name)
    }
}
