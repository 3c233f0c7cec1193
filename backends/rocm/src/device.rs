//! ROCm devices.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use gpuport_core::{
    BackendKind, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel,
    Module, ModuleImage, PointerAttributes, Result, StreamFlags,
};

use crate::context::DeviceCtx;
use crate::event::RocmEvent;
use crate::memory;
use crate::result::check;
use crate::stream::RocmStream;
use crate::sys::{self, hipUUID, Runtime};
use crate::RocmBackend;

/// A ROCm device.
#[derive(Clone)]
pub struct RocmDevice {
    pub(crate) ctx: Arc<DeviceCtx>,
}

fn attribute(rt: &Runtime, ordinal: c_int, attr: c_int) -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer; the attribute id is from hip_runtime_api.h.
    let status = unsafe { (rt.api.hipDeviceGetAttribute)(&mut v, attr, ordinal) };
    check(&rt.api, status, "hipDeviceGetAttribute")?;
    Ok(v)
}

fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Facts about device `ordinal`, through `hipDeviceGetAttribute` and the small getters.
pub(crate) fn info(rt: &Runtime, ordinal: u32) -> Result<DeviceInfo> {
    let api = &rt.api;
    let dev = ordinal as c_int;
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes.
    check(api, unsafe { (api.hipDeviceGetName)(name.as_mut_ptr(), 256, dev) }, "hipDeviceGetName")?;
    let mut total = 0usize;
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.hipDeviceTotalMem)(&mut total, dev) }, "hipDeviceTotalMem")?;
    let mut pci = [0 as c_char; 32];
    // SAFETY: the buffer holds 32 bytes.
    let pci_ok = unsafe { (api.hipDeviceGetPCIBusId)(pci.as_mut_ptr(), 32, dev) } == sys::SUCCESS;
    let mut uuid = hipUUID::default();
    // SAFETY: valid out-pointer.
    let uuid_ok = unsafe { (api.hipDeviceGetUuid)(&mut uuid, dev) } == sys::SUCCESS;
    let major = attribute(rt, dev, sys::ATTR_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(rt, dev, sys::ATTR_COMPUTE_CAPABILITY_MINOR)?;
    let cus = attribute(rt, dev, sys::ATTR_MULTIPROCESSOR_COUNT)?;
    // ROCm 5 answers the gfx number as an attribute; ROCm 6 dropped it (arch then unknown).
    let arch =
        if rt.major() < 6 { attribute(rt, dev, sys::ATTR_GCN_ARCH).ok().map(|n| format!("gfx{n}")) } else { None };
    Ok(DeviceInfo {
        id: DeviceId::new(BackendKind::Rocm, ordinal),
        name: c_text(&name),
        total_memory: total as u64,
        compute_capability: Some((major as u32, minor as u32)),
        arch,
        multiprocessors: Some(cus as u32),
        pci_bus_id: pci_ok.then(|| c_text(&pci)),
        uuid: uuid_ok.then(|| uuid.bytes.map(|b| b as u8)),
    })
}

impl RocmDevice {
    fn check_stream(&self, stream: &RocmStream) -> Result<()> {
        if !stream.same_device(self.ctx.id) {
            return Err(Error::invalid_argument(format!(
                "a stream of {} used with {}",
                stream.inner.dev.id, self.ctx.id
            )));
        }
        Ok(())
    }
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
        memory::alloc(&self.ctx, bytes)
    }
    fn alloc_async(&self, bytes: usize, stream: &RocmStream) -> Result<Buffer> {
        self.check_stream(stream)?;
        let alive = Arc::downgrade(&stream.inner);
        memory::alloc_async(&self.ctx, bytes, stream.inner.raw, stream.inner.errors.clone(), alive)
    }
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        memory::alloc_pinned(&self.ctx, bytes, flags)
    }
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer> {
        memory::alloc_managed(&self.ctx, bytes)
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
        check(api, unsafe { (api.hipMemset)(d as usize as *mut c_void, c_int::from(value), len) }, "hipMemset")?;
        // hipMemset is queued on the null stream: wait for that stream only, not the device.
        // SAFETY: the null stream is always valid on the current device.
        let status = unsafe { (api.hipStreamSynchronize)(std::ptr::null_mut()) };
        check(api, status, "hipStreamSynchronize")
    }
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<RocmStream> {
        RocmStream::create(&self.ctx, flags, priority)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.ctx.bind()?;
        let api = &self.ctx.rt.api;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: valid out-pointers.
        let status = unsafe { (api.hipDeviceGetStreamPriorityRange)(&mut least, &mut greatest) };
        check(api, status, "hipDeviceGetStreamPriorityRange")?;
        Ok((least, greatest))
    }
    fn default_stream(&self, which: DefaultStream) -> Result<RocmStream> {
        match which {
            // The null stream.
            DefaultStream::Legacy => {
                Ok(RocmStream::from_parts(&self.ctx, std::ptr::null_mut(), false, StreamFlags::empty(), 0))
            }
            DefaultStream::PerThread => Err(Error::unsupported("rocm", "per-thread default streams")),
        }
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<RocmStream> {
        Ok(RocmStream::from_parts(&self.ctx, raw as sys::hipStream_t, false, StreamFlags::empty(), 0))
    }
    fn create_event(&self, flags: EventFlags) -> Result<RocmEvent> {
        RocmEvent::create(&self.ctx, flags)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<RocmEvent> {
        if raw == 0 {
            return Err(Error::invalid_handle("a null hipEvent_t"));
        }
        Ok(RocmEvent::from_parts(&self.ctx, raw as sys::hipEvent_t, false, EventFlags::empty()))
    }
    fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        let api = &self.ctx.rt.api;
        // SAFETY: the device is current.
        check(api, unsafe { (api.hipDeviceSynchronize)() }, "hipDeviceSynchronize")
    }
    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if peer.ctx.id == self.ctx.id {
            return Ok(true);
        }
        let api = &self.ctx.rt.api;
        let mut can: c_int = 0;
        // SAFETY: valid out-pointer; both ordinals exist.
        let status = unsafe { (api.hipDeviceCanAccessPeer)(&mut can, self.ctx.ordinal, peer.ctx.ordinal) };
        check(api, status, "hipDeviceCanAccessPeer")?;
        Ok(can != 0)
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        if peer.ctx.id == self.ctx.id {
            return Ok(());
        }
        self.ctx.bind()?;
        let api = &self.ctx.rt.api;
        // SAFETY: the peer ordinal exists.
        let status = unsafe { (api.hipDeviceEnablePeerAccess)(peer.ctx.ordinal, 0) };
        if status == sys::ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check(api, status, "hipDeviceEnablePeerAccess")
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
