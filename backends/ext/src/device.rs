//! Ext devices.

use std::sync::Arc;

use gpuport_core::{
    Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel, MemoryKind, Module,
    ModuleImage, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_queue::memory::host_buffer;
use gpuport_queue::{kernels, LazyStream, QueueEvent, QueueStream};

use crate::stream::{ExtEvent, ExtStream};
use crate::{ExtBackend, Shared, KIND, PINNED};

/// One ext device (`ext:N`).
#[derive(Clone)]
pub struct ExtDevice {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: DeviceId,
    legacy: Arc<LazyStream<ExtStream>>,
}

impl ExtDevice {
    pub(crate) fn new(shared: Arc<Shared>, ordinal: u32) -> Self {
        let legacy = shared.legacy[ordinal as usize].clone();
        ExtDevice { id: DeviceId::new(KIND, ordinal), shared, legacy }
    }

    fn space(&self) -> &Arc<crate::memory::AddressSpace> {
        &self.shared.spaces[self.id.ordinal as usize]
    }

    pub(crate) fn info_for(shared: &Shared, ordinal: u32) -> DeviceInfo {
        DeviceInfo {
            id: DeviceId::new(KIND, ordinal),
            name: format!("gpuport software extension device {ordinal}"),
            total_memory: shared.spaces[ordinal as usize].capacity(),
            compute_capability: None,
            arch: Some("ext".into()),
            multiprocessors: Some(1),
            pci_bus_id: None,
            uuid: None,
        }
    }

    fn check_stream(&self, stream: &ExtStream) -> Result<()> {
        if stream.device_id() != self.id {
            return Err(Error::invalid_argument(format!("stream of {} used with {}", stream.device_id(), self.id)));
        }
        Ok(())
    }
}

impl Device for ExtDevice {
    type Backend = ExtBackend;

    fn id(&self) -> DeviceId {
        self.id
    }
    fn info(&self) -> Result<DeviceInfo> {
        Ok(Self::info_for(&self.shared, self.id.ordinal))
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        self.space().allocate(bytes)
    }
    fn alloc_async(&self, bytes: usize, stream: &ExtStream) -> Result<Buffer> {
        // Memory is usable at once; queued work holds the buffer, so freeing is ordered.
        self.check_stream(stream)?;
        self.alloc(bytes)
    }
    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        host_buffer(&PINNED, self.id, bytes, MemoryKind::PinnedHost, self.shared.host_limit)
    }
    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported(crate::KIND, "managed memory"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        // Ordered after the legacy default stream's work, as cuMemsetD8 is.
        self.default_stream(DefaultStream::Legacy)?.memset_blocking(dst, offset, len, value)
    }
    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<ExtStream> {
        Ok(ExtStream::new(self.shared.clone(), QueueStream::create(self.id, flags)?))
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }
    fn default_stream(&self, which: DefaultStream) -> Result<ExtStream> {
        match which {
            DefaultStream::Legacy => {
                Ok(self.legacy.get_or_create(|| self.create_stream(StreamFlags::empty(), 0))?.to_borrowed())
            }
            DefaultStream::PerThread => Err(Error::unsupported(crate::KIND, "per-thread default streams")),
        }
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<ExtStream> {
        Ok(ExtStream::new(self.shared.clone(), QueueStream::from_raw(self.id, raw)?))
    }
    fn create_event(&self, flags: EventFlags) -> Result<ExtEvent> {
        if flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::unsupported(crate::KIND, "interprocess events"));
        }
        Ok(ExtEvent(QueueEvent::create(self.id, flags)))
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<ExtEvent> {
        Ok(ExtEvent(QueueEvent::from_raw(self.id, raw)?))
    }
    fn synchronize(&self) -> Result<()> {
        self.shared.synchronize(self.id)
    }
    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        // Ext devices model separate cards without a direct link: peers are reached through
        // staged copies (stream copies between two ext devices still work, as
        // cuMemcpyPeer does without peer access).
        Ok(false)
    }
    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        if peer.id == self.id {
            return Err(Error::invalid_argument("a device cannot enable peer access to itself"));
        }
        Err(Error::unsupported(crate::KIND, "peer access (ext devices have no direct link)"))
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        let a = self.space().attributes(addr);
        if a.device.is_some() {
            return Ok(a);
        }
        let pinned = PINNED.attributes(addr);
        Ok(if pinned.device == Some(self.id) { pinned } else { PointerAttributes::unregistered() })
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        kernels::load_module(KIND, self.id, image)
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        kernels::kernel(KIND, self.id, module, name)
    }
}
