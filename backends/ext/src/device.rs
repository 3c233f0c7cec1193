//! Ext devices.

use std::sync::Arc;

use gpuport_core::{
    Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel, MemoryKind, Module,
    ModuleImage, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_queue::memory::host_buffer;
use gpuport_queue::{QueueDevice, QueueStream};

use crate::stream::{ExtEvent, ExtStream};
use crate::{ExtBackend, Shared, KIND, PINNED};

/// One ext device (`ext:N`).
#[derive(Clone)]
pub struct ExtDevice {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: DeviceId,
}

impl ExtDevice {
    pub(crate) fn new(shared: Arc<Shared>, ordinal: u32) -> Self {
        ExtDevice { id: DeviceId::new(KIND, ordinal), shared }
    }

    /// The device's queues, legacy default stream, streams, events and modules.
    fn queue(&self) -> &QueueDevice<ExtStream> {
        &self.shared.devices[self.id.ordinal as usize]
    }

    /// The port's stream around a queue stream of this device.
    fn wrap(&self) -> impl Fn(QueueStream) -> ExtStream + '_ {
        move |queue| ExtStream::new(self.shared.clone(), queue)
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
        self.queue().check_stream(stream.device_id())?;
        self.alloc(bytes)
    }
    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        host_buffer(&PINNED, self.id, bytes, MemoryKind::PinnedHost, self.shared.host_limit)
    }
    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported(crate::KIND, "managed memory"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.queue().memset(dst, offset, len, value, self.wrap())
    }
    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<ExtStream> {
        self.queue().create_stream(flags, self.wrap())
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }
    fn default_stream(&self, which: DefaultStream) -> Result<ExtStream> {
        self.queue().default_stream(which, self.wrap())
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<ExtStream> {
        self.queue().wrap_stream(raw, self.wrap())
    }
    fn create_event(&self, flags: EventFlags) -> Result<ExtEvent> {
        self.queue().create_event(flags).map(ExtEvent)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<ExtEvent> {
        self.queue().wrap_event(raw).map(ExtEvent)
    }
    fn synchronize(&self) -> Result<()> {
        self.queue().synchronize()
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
    /// What the backend knows about `addr`, whichever ext device owns it: the devices'
    /// address ranges are disjoint (one address space, as CUDA's unified addressing), so
    /// every device answers for every device's memory and pinned memory.
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        for space in self.shared.spaces.iter() {
            let a = space.attributes(addr);
            if a.device.is_some() {
                return Ok(a);
            }
        }
        Ok(PINNED.attributes(addr))
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        self.queue().load_module(image)
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        self.queue().kernel(module, name)
    }
}
