//! # gpuport-port-template
//!
//! A minimal, honest gpuport device: two devices ([`KIND`]`:0` and `:1`) whose memory is the
//! CPU's, whose streams are ordered queues with worker threads and whose events are real
//! completion markers — all from `gpuport-queue`. Two, so that the conformance suite's
//! cases about peers, copies between devices, every device's facts and waits across
//! devices run on it (a port with one device skips them, with the reason). It follows `docs/porting.md` step by
//! step; copy it and replace each piece with your hardware's.

use std::sync::{Arc, OnceLock};

use gpuport_core::{
    Backend, BackendKind, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, DlDeviceType, DlpackDevices, Error,
    EventFlags, HostAllocFlags, Kernel, LoadOptions, MemoryKind, Module, ModuleImage, PointerAttributes, Result,
    Stream, StreamFlags,
};
use gpuport_queue::memory::{host_buffer, PointerRegistry};
use gpuport_queue::{host_translator, QueueDevice, QueueEvent, QueueStream};

/// Step A2: the backend names itself — a plugin kind, never a built-in one.
pub const KIND: BackendKind = BackendKind::Plugin("tmpl");

/// The most one allocation may take: this template's "device memory" (1 GiB).
const CAPACITY: u64 = 1 << 30;

/// How many devices the backend presents. A real port asks its runtime.
pub const DEVICE_COUNT: u32 = 2;

/// Every live allocation of the device, so `pointer_attributes` can answer.
static MEMORY: PointerRegistry = PointerRegistry::new();

/// Step A2: the backend. `load` never panics: a real port opens its runtime here and
/// returns `LibraryNotFound` / `MissingSymbol` / `NoDevice` when it cannot.
#[derive(Clone, Copy, Debug, Default)]
pub struct TemplateBackend;

impl Backend for TemplateBackend {
    const KIND: BackendKind = KIND;
    // Step 6: the DLPack device types of its memory. This device's memory is CPU memory.
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::CPU, pinned_host: Some(DlDeviceType::CPU), managed: None };
    type Device = TemplateDevice;
    type Stream = TemplateStream;
    type Event = TemplateEvent;

    fn load(_opts: &LoadOptions) -> Result<Self> {
        Ok(TemplateBackend)
    }
    fn version(&self) -> String {
        format!("{} {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
    }
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        (0..DEVICE_COUNT).map(|ordinal| self.open(ordinal)?.info()).collect()
    }
    fn open(&self, ordinal: u32) -> Result<TemplateDevice> {
        TemplateDevice::shared(ordinal)
            .ok_or(Error::DeviceNotFound { device: DeviceId::new(KIND, ordinal), count: DEVICE_COUNT })
    }
}

/// Step A3: the device. Handles are cheap clones of one shared state: `gpuport-queue`'s
/// `QueueDevice` (queues, the legacy default stream, streams, events, modules), to which
/// the `Device` methods below forward; memory and the device's facts are the port's own.
#[derive(Clone)]
pub struct TemplateDevice(Arc<QueueDevice<TemplateStream>>);

impl TemplateDevice {
    /// The one shared state of device `ordinal` (every `open` of it hands out a clone);
    /// `None` past the last device.
    fn shared(ordinal: u32) -> Option<Self> {
        static DEVICES: [OnceLock<TemplateDevice>; DEVICE_COUNT as usize] =
            [const { OnceLock::new() }; DEVICE_COUNT as usize];
        let slot = DEVICES.get(ordinal as usize)?;
        Some(slot.get_or_init(|| TemplateDevice(Arc::new(QueueDevice::new(DeviceId::new(KIND, ordinal))))).clone())
    }
}

impl Device for TemplateDevice {
    type Backend = TemplateBackend;

    fn id(&self) -> DeviceId {
        self.0.id()
    }
    fn info(&self) -> Result<DeviceInfo> {
        Ok(DeviceInfo {
            id: self.0.id(),
            name: format!("{} device {}", env!("CARGO_PKG_NAME"), self.0.id().ordinal),
            total_memory: CAPACITY,
            compute_capability: None,
            arch: Some(std::env::consts::ARCH.into()),
            multiprocessors: Some(1),
            pci_bus_id: None,
            uuid: None,
        })
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        host_buffer(&MEMORY, self.0.id(), bytes, MemoryKind::Device, CAPACITY)
    }
    fn alloc_async(&self, bytes: usize, stream: &TemplateStream) -> Result<Buffer> {
        self.0.check_stream(stream.device_id())?;
        // Usable at once; queued work holds the buffer, so the free is ordered after it.
        self.alloc(bytes)
    }
    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        host_buffer(&MEMORY, self.0.id(), bytes, MemoryKind::PinnedHost, CAPACITY)
    }
    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported(KIND, "managed memory"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.0.memset(dst, offset, len, value, TemplateStream)
    }
    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<TemplateStream> {
        self.0.create_stream(flags, TemplateStream)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }
    fn default_stream(&self, which: DefaultStream) -> Result<TemplateStream> {
        self.0.default_stream(which, TemplateStream)
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<TemplateStream> {
        self.0.wrap_stream(raw, TemplateStream)
    }
    fn create_event(&self, flags: EventFlags) -> Result<TemplateEvent> {
        self.0.create_event(flags).map(TemplateEvent)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<TemplateEvent> {
        self.0.wrap_event(raw).map(TemplateEvent)
    }
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        Ok(true) // every device's memory is the CPU's: each reaches the other's
    }
    fn enable_peer_access(&self, _peer: &Self) -> Result<()> {
        Ok(())
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        Ok(MEMORY.attributes(addr))
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        self.0.load_module(image)
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        self.0.kernel(module, name)
    }
}

/// Step A4: the stream — a `gpuport-queue` stream; `impl_queue_stream!` writes the
/// `Stream` impl, every method forwarding to it with this device's address resolution
/// (its memory is host memory, so `host_translator`).
#[derive(Clone)]
pub struct TemplateStream(QueueStream);

gpuport_queue::impl_queue_stream!(TemplateStream, TemplateBackend, 0, |_this, op| host_translator(op), overrides {
    // Step A4b: one data-path method written by the port instead of forwarded (copy,
    // memset, write, read and launch can be). A device with its own fill would queue it
    // here; this one hands the fill to the queue, as the forwarded method does.
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.queue().memset(dst, offset, len, value, self.translator("memset"))
    }
});

/// Step A5: the event — a `gpuport-queue` event; `impl_queue_event!` writes the `Event`
/// impl, every method forwarding to it.
#[derive(Clone)]
pub struct TemplateEvent(QueueEvent);

gpuport_queue::impl_queue_event!(TemplateEvent, TemplateBackend);
