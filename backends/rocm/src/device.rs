//! ROCm devices.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use gpuport_core::{
    BackendKind, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel,
    Module, ModuleImage, PointerAttributes, Result, StreamFlags,
};

use gpuport_driver::vendor_event::VendorEvent;
use gpuport_driver::vendor_memory;
use gpuport_driver::vendor_stream::VendorStream;

use crate::context::DeviceCtx;
use crate::event::RocmEvent;
use crate::memory;
use crate::result;
use crate::stream::RocmStream;
use crate::sys::{self, Runtime};
use crate::RocmBackend;

/// A ROCm device.
#[derive(Clone)]
pub struct RocmDevice {
    pub(crate) ctx: Arc<DeviceCtx>,
}

/// Facts about device `ordinal`, through `hipDeviceGetAttribute` and the small getters.
pub(crate) fn info(rt: &Runtime, ordinal: u32) -> Result<DeviceInfo> {
    let api = &rt.api;
    let dev = ordinal as c_int;
    let attribute = |attr| result::device::attribute(api, dev, attr);
    let major = attribute(sys::ATTR_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(sys::ATTR_COMPUTE_CAPABILITY_MINOR)?;
    let cus = attribute(sys::ATTR_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceInfo {
        id: DeviceId::new(BackendKind::Rocm, ordinal),
        name: result::device::name(api, dev)?,
        total_memory: result::device::total_mem(api, dev)? as u64,
        compute_capability: Some((major as u32, minor as u32)),
        arch: arch_name(rt, dev),
        multiprocessors: Some(cus as u32),
        pci_bus_id: result::device::pci_bus_id(api, dev),
        uuid: result::device::uuid(api, dev),
    })
}

/// The device's architecture (`gfx90a`), from `gcnArchName` in the device properties: the
/// ROCm 6 layout through `hipGetDevicePropertiesR0600` where the runtime is 6 or newer,
/// else the ROCm 5 layout. (The `gcnArch` attribute is no help: ROCm 5.x does not answer
/// it for newer chips and renders gfx90a as "gfx910".) `None` when neither call answers.
fn arch_name(rt: &Runtime, dev: c_int) -> Option<String> {
    let (bytes, offset) = result::device::properties(rt, dev)?;
    decode_arch_name(&bytes, offset)
}

/// `gcnArchName` at `offset` of a device-properties buffer, without its feature suffix
/// (`"gfx90a:sramecc+:xnack-"` → `"gfx90a"`).
fn decode_arch_name(props: &[u8], offset: usize) -> Option<String> {
    let field = props.get(offset..offset + 256)?;
    let text = field.split(|&b| b == 0).next()?;
    let name = std::str::from_utf8(text).ok()?.split(':').next()?.trim();
    name.starts_with("gfx").then(|| name.to_owned())
}

impl Device for RocmDevice {
    type Backend = RocmBackend;

    fn id(&self) -> DeviceId {
        self.ctx.id
    }
    fn info(&self) -> Result<DeviceInfo> {
        info(&self.ctx.rt, self.ctx.id.ordinal)
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        vendor_memory::alloc(&self.ctx, bytes)
    }
    fn alloc_async(&self, bytes: usize, stream: &RocmStream) -> Result<Buffer> {
        vendor_memory::alloc_async(&self.ctx, bytes, &stream.0)
    }
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        vendor_memory::alloc_pinned(&self.ctx, bytes, flags)
    }
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer> {
        vendor_memory::alloc_managed(&self.ctx, bytes)
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        if dst.device().kind != BackendKind::Rocm {
            return Err(Error::mismatch("memset", BackendKind::Rocm, dst.device()));
        }
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        let api = &self.ctx.rt.api;
        // SAFETY: the range was checked against a live ROCm allocation.
        unsafe { result::stream::memset(api, d as usize as *mut c_void, value, len) }?;
        // hipMemset is queued on the null stream: wait for that stream only, not the device.
        // SAFETY: the null stream is always valid on the current device.
        unsafe { result::stream::synchronize(api, std::ptr::null_mut()) }
    }
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<RocmStream> {
        RocmStream::create(&self.ctx, flags, priority)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.ctx.bind()?;
        result::device::stream_priority_range(&self.ctx.rt.api)
    }
    fn default_stream(&self, which: DefaultStream) -> Result<RocmStream> {
        match which {
            // The null stream: one stream state per device while a handle lives, borrowed.
            DefaultStream::Legacy => Ok(RocmStream(VendorStream::legacy_default(&self.ctx, std::ptr::null_mut()))),
            // ROCm reaches the per-thread default stream through a second, `_spt` twin of
            // every entry point (5.x) or the `hipStreamPerThread` handle (newer runtimes);
            // supporting it means a second function table that no AMD GPU here can test.
            DefaultStream::PerThread => Err(Error::unsupported(
                BackendKind::Rocm,
                "the per-thread default stream (it needs the runtime's `_spt` entry points; use a created stream)",
            )),
        }
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<RocmStream> {
        Ok(RocmStream(VendorStream::new(&self.ctx, raw as sys::hipStream_t, false, StreamFlags::empty(), 0)))
    }
    fn create_event(&self, flags: EventFlags) -> Result<RocmEvent> {
        VendorEvent::create(&self.ctx, flags).map(RocmEvent)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<RocmEvent> {
        if raw == 0 {
            return Err(Error::invalid_handle("a null hipEvent_t"));
        }
        Ok(RocmEvent(VendorEvent::from_parts(&self.ctx, raw as sys::hipEvent_t, false, EventFlags::empty())))
    }
    fn synchronize(&self) -> Result<()> {
        // Waits for the device, then reports its streams' kept errors (sticky).
        self.ctx.streams.synchronize(&*self.ctx)
    }
    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if peer.ctx.id == self.ctx.id {
            return Ok(true);
        }
        result::device::can_access_peer(&self.ctx.rt.api, self.ctx.ordinal, peer.ctx.ordinal)
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        if peer.ctx.id == self.ctx.id {
            return Ok(());
        }
        self.ctx.bind()?;
        result::device::enable_peer_access(&self.ctx.rt.api, peer.ctx.ordinal)
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

#[cfg(test)]
mod arch_tests {
    use super::*;

    fn props_with(offset: usize, name: &str) -> Vec<u8> {
        let mut props = vec![0u8; sys::DEVICE_PROP_BUFFER];
        props[offset..offset + name.len()].copy_from_slice(name.as_bytes());
        props
    }

    #[test]
    fn arch_names_decode_from_both_layouts() {
        let v5 = props_with(sys::GCN_ARCH_NAME_OFFSET_R0000, "gfx90a:sramecc+:xnack-");
        assert_eq!(decode_arch_name(&v5, sys::GCN_ARCH_NAME_OFFSET_R0000).as_deref(), Some("gfx90a"));
        let v6 = props_with(sys::GCN_ARCH_NAME_OFFSET_R0600, "gfx942:sramecc+:xnack-");
        assert_eq!(decode_arch_name(&v6, sys::GCN_ARCH_NAME_OFFSET_R0600).as_deref(), Some("gfx942"));
        // Read with the wrong layout, the field holds something else (here: nothing).
        assert_eq!(decode_arch_name(&v6, sys::GCN_ARCH_NAME_OFFSET_R0000), None);
        assert_eq!(decode_arch_name(&props_with(396, "gfx1100"), 396).as_deref(), Some("gfx1100"));
        assert_eq!(decode_arch_name(&[0u8; 100], 396), None, "a short buffer is not read past its end");
    }

    #[test]
    fn proc_address_versions_are_100_major_plus_minor() {
        assert_eq!(sys::proc_address_version(60342134), 603);
        assert_eq!(sys::proc_address_version(60100000), 601);
        assert_eq!(sys::proc_address_version(50221153), 502);
        assert_eq!(sys::proc_address_version(-1), 0);
    }
}
