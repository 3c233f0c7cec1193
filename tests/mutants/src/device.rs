//! The mutants' device: the port template's device, with the device-level flaws.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use gpuport_core::{
    BackendKind, Buffer, BufferDesc, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags,
    Kernel, MemoryKind, Module, ModuleImage, PointerAttributes, Result, StreamFlags,
};
use gpuport_queue::kernels::{self, HostKernel};
use gpuport_queue::memory::{host_buffer, PointerRegistry};
use gpuport_queue::{host_translator, ImplicitRole, LazyStream, QueueDevice, QueueStream};

use crate::flaw;
use crate::stream::{MutantEvent, MutantStream, StreamInner};
use crate::{MutantBackend, MUTANTS};

/// The most one allocation may take (1 GiB).
const CAPACITY: u64 = 1 << 30;

/// Devices per mutant: two, so the cases about several devices run on them.
pub(crate) const DEVICE_COUNT: u32 = 2;

/// Every live allocation of every mutant device, for `pointer_attributes`.
static MEMORY: PointerRegistry = PointerRegistry::new();

/// The allocations the stale-table port noted when it made them, never removed.
static NOTED: Mutex<BTreeMap<u64, (usize, DeviceId)>> = Mutex::new(BTreeMap::new());

pub(crate) fn kind<const F: u8>() -> BackendKind {
    BackendKind::Plugin(MUTANTS[F as usize].name)
}

pub(crate) fn id<const F: u8>(ordinal: u32) -> DeviceId {
    DeviceId::new(kind::<F>(), ordinal)
}

/// What every handle of one mutant device shares.
pub(crate) struct Shared {
    /// The shared software-device parts: queues, events, modules. The mutants make their
    /// streams themselves (the out-of-order one runs each on two queues), so the legacy
    /// stream below is theirs and the `QueueDevice` holds no stream (`()`).
    queue: QueueDevice<()>,
    /// The device's streams, for the mutant whose synchronize sees only live ones.
    streams: Mutex<Vec<Weak<StreamInner>>>,
    legacy: LazyStream<Arc<StreamInner>>,
    /// The one queue every created stream shares, for the mutant whose streams never overlap.
    one_queue: LazyStream<Arc<StreamInner>>,
    /// The streams `create_stream` made, for the mutant with a table of sixteen.
    created: Mutex<Vec<Weak<StreamInner>>>,
}

/// The device of mutant `F` (`mut-…:0`).
#[derive(Clone)]
pub struct MutantDevice<const F: u8>(Arc<Shared>);

impl<const F: u8> MutantDevice<F> {
    /// Device `ordinal` of mutant `F`; `None` past the last.
    pub(crate) fn shared(ordinal: u32) -> Option<Self> {
        // A static in a generic function is one for every `F`: index it by `F`.
        static DEVICES: [[OnceLock<Arc<Shared>>; DEVICE_COUNT as usize]; MUTANTS.len()] =
            [const { [const { OnceLock::new() }; DEVICE_COUNT as usize] }; MUTANTS.len()];
        let slot = DEVICES[F as usize].get(ordinal as usize)?;
        let shared = slot.get_or_init(|| {
            Arc::new(Shared {
                queue: QueueDevice::new(id::<F>(ordinal)),
                streams: Mutex::default(),
                legacy: LazyStream::new(),
                one_queue: LazyStream::new(),
                created: Mutex::default(),
            })
        });
        Some(MutantDevice(shared.clone()))
    }

    /// A new stream: the legacy default stream when `legacy`, else one created with
    /// `flags`.
    fn new_stream(&self, flags: StreamFlags, legacy: bool) -> Result<Arc<StreamInner>> {
        let role = match F {
            flaw::NO_IMPLICIT_SYNC => ImplicitRole::Independent,
            flaw::LEGACY_OUTSIDE_IMPLICIT_SYNC if legacy => ImplicitRole::Independent,
            _ if legacy => self.0.queue.legacy_role(),
            flaw::ALL_STREAMS_BLOCKING => self.0.queue.stream_role(StreamFlags::empty()),
            _ => self.0.queue.stream_role(flags),
        };
        let main = QueueStream::create(self.0.queue.id(), flags, role.clone())?;
        self.0.queue.queues().track(&main);
        // The out-of-order mutant runs each stream on two queues in turn.
        let second = if F == flaw::OUT_OF_ORDER {
            let second = QueueStream::create(self.0.queue.id(), flags, role)?;
            self.0.queue.queues().track(&second);
            Some(second)
        } else {
            None
        };
        let inner = Arc::new(StreamInner::new(main, second, false));
        self.0.streams.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&inner));
        Ok(inner)
    }

    /// The legacy default stream, made on first use.
    pub(crate) fn legacy(&self) -> Result<Arc<StreamInner>> {
        self.0.legacy.get_or_create(|| self.new_stream(StreamFlags::empty(), true))
    }

    fn synchronize_live_streams(&self) -> Result<()> {
        let live: Vec<Arc<StreamInner>> =
            self.0.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(Weak::upgrade).collect();
        live.iter().try_for_each(|s| s.main().queue().tracker().synchronize())
    }
}

impl<const F: u8> Device for MutantDevice<F> {
    type Backend = MutantBackend<F>;

    fn id(&self) -> DeviceId {
        self.0.queue.id()
    }
    fn info(&self) -> Result<DeviceInfo> {
        // The flawed device answers with the first device's facts, whichever it is.
        let id = if F == flaw::FACTS_OF_FIRST_DEVICE { id::<F>(0) } else { self.0.queue.id() };
        Ok(DeviceInfo {
            id,
            name: format!("gpuport mutant that breaks a rule: {}", MUTANTS[F as usize].breaks),
            // The flawed device counts its memory in KiB.
            total_memory: if F == flaw::TOTAL_MEMORY_IN_KIB { CAPACITY >> 10 } else { CAPACITY },
            compute_capability: None,
            arch: Some(std::env::consts::ARCH.into()),
            multiprocessors: Some(1),
            pci_bus_id: None,
            uuid: None,
        })
    }
    fn make_current(&self) -> Result<()> {
        if F == flaw::MAKE_CURRENT_FAILS {
            // The flawed device has a binding that cannot succeed here, and says so its own way.
            return Err(Error::invalid_handle(format!("{}: no context to make current", self.id())));
        }
        Err(Error::unsupported(self.id().kind, "a current device (the device is software)"))
    }
    fn dlpack_devices(&self) -> gpuport_core::DlpackDevices {
        let declared = <MutantBackend<F> as gpuport_core::Backend>::DLPACK;
        if F == flaw::DEVICE_DLPACK_DIFFERS {
            // The flawed device says its memory is kDLExtDev's, its backend kDLCPU's.
            return gpuport_core::DlpackDevices { device: gpuport_core::DlDeviceType::EXT_DEV, ..declared };
        }
        declared
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        if F == flaw::ALLOC_ZERO_REFUSED && bytes == 0 {
            return Err(Error::invalid_argument("an allocation of 0 bytes"));
        }
        if F == flaw::OVERSIZE_INVALID_ARGUMENT && bytes as u64 > CAPACITY {
            return Err(Error::invalid_argument(format!("{bytes} bytes is more than the device holds")));
        }
        if F == flaw::SLAB_WRAPS && (1..=slab::SLOT_BYTES).contains(&bytes) {
            return slab::alloc(self.0.queue.id(), bytes);
        }
        let b = host_buffer(&MEMORY, self.0.queue.id(), bytes, MemoryKind::Device, CAPACITY)?;
        if F == flaw::ATTRIBUTES_OUTLIVE_FREE {
            NOTED.lock().unwrap_or_else(|p| p.into_inner()).insert(b.addr(), (bytes, self.id()));
        }
        Ok(b)
    }
    fn alloc_async(&self, bytes: usize, stream: &MutantStream<F>) -> Result<Buffer> {
        self.0.queue.check_stream(gpuport_core::Stream::device_id(stream))?;
        if F == flaw::ALLOC_ASYNC_ROUNDED {
            return self.alloc(bytes.next_multiple_of(256));
        }
        self.alloc(bytes)
    }
    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        let memory = if F == flaw::PINNED_AS_DEVICE_MEMORY { MemoryKind::Device } else { MemoryKind::PinnedHost };
        host_buffer(&MEMORY, self.0.queue.id(), bytes, memory, CAPACITY)
    }
    fn register_host(&self, host: &Buffer) -> Result<Buffer> {
        if !host.is_host_accessible() || host.memory() == MemoryKind::Device {
            return Err(Error::invalid_argument(format!(
                "registering {:?} memory of {}: only host memory can be registered",
                host.memory(),
                host.device()
            )));
        }
        if host.is_empty() || host.device().kind == kind::<F>() {
            return Ok(host.clone());
        }
        if F == flaw::REGISTER_COPIES {
            // The flawed port has no way to lock pages: it hands back pinned memory of its
            // own holding a copy of the bytes.
            let copy = self.alloc_pinned(host.len(), HostAllocFlags::empty())?;
            let (from, to) = (host.host_ptr(0, host.len())?, copy.host_ptr(0, copy.len())?);
            // SAFETY: both ranges are `host.len()` host-accessible bytes of two live,
            // distinct allocations.
            unsafe { std::ptr::copy_nonoverlapping(from.cast_const(), to, host.len()) };
            return Ok(copy);
        }
        let desc = BufferDesc {
            addr: host.addr(),
            len: host.len(),
            device: self.id(),
            memory: MemoryKind::PinnedHost,
            host_accessible: true,
        };
        // SAFETY: the bytes are `host`'s, host-accessible, and stay allocated while the new
        // buffer lives: it holds a clone of `host`.
        unsafe { Buffer::from_borrowed_owned_by(desc, host.clone()) }
    }
    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported(kind::<F>(), "managed memory"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        if F == flaw::DEVICE_MEMSET_UNORDERED
            || (F == flaw::MEMSET_UNORDERED_PAST_FIRST_DEVICE && self.0.queue.id().ordinal > 0)
        {
            // A stream of its own, ordered after nothing.
            let own = QueueStream::create(self.0.queue.id(), StreamFlags::NON_BLOCKING, ImplicitRole::Independent)?;
            return own.memset_blocking(dst, offset, len, value, host_translator("memset"));
        }
        self.legacy()?.main().memset_blocking(dst, offset, len, value, host_translator("memset"))
    }
    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<MutantStream<F>> {
        if F == flaw::STREAMS_SHARE_A_QUEUE {
            let one = self.0.one_queue.get_or_create(|| self.new_stream(StreamFlags::NON_BLOCKING, false))?;
            return Ok(MutantStream::new(Arc::new(one.to_borrowed())));
        }
        if F == flaw::STREAM_TABLE_OF_16 {
            // A fixed table of sixteen slots, a slot free again when its stream drops.
            let mut created = self.0.created.lock().unwrap_or_else(|p| p.into_inner());
            created.retain(|s| s.strong_count() > 0);
            if created.len() >= 16 {
                return Err(Error::OutOfMemory { device: self.id(), bytes: 0 });
            }
            let stream = self.new_stream(flags, false)?;
            created.push(Arc::downgrade(&stream));
            return Ok(MutantStream::new(stream));
        }
        Ok(MutantStream::new(self.new_stream(flags, false)?))
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }
    fn default_stream(&self, which: DefaultStream) -> Result<MutantStream<F>> {
        match which {
            // The flawed device hands out the first device's legacy stream on every device.
            DefaultStream::Legacy if F == flaw::LEGACY_STREAM_OF_FIRST_DEVICE => {
                let first = Self::shared(0).ok_or_else(|| Error::invalid_argument("no device 0"))?;
                Ok(MutantStream::new(Arc::new(first.legacy()?.to_borrowed())))
            }
            DefaultStream::Legacy => Ok(MutantStream::new(Arc::new(self.legacy()?.to_borrowed()))),
            DefaultStream::PerThread => Err(Error::unsupported(kind::<F>(), "per-thread default streams")),
        }
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<MutantStream<F>> {
        let wrapped = QueueStream::from_raw(self.0.queue.id(), raw)?;
        if F == flaw::WRAPPED_STREAM_FRESH {
            return Ok(MutantStream::new(self.new_stream(wrapped.flags(), false)?));
        }
        // The flawed wrapper destroys the stream it borrows when it drops.
        Ok(MutantStream::new(Arc::new(StreamInner::new(wrapped, None, F == flaw::WRAPPED_STREAM_DESTROYED))))
    }
    fn create_event(&self, flags: EventFlags) -> Result<MutantEvent<F>> {
        // The flawed port times every event, reporting the flags it was asked for.
        let made = if F == flaw::UNTIMED_EVENTS_TIME { flags - EventFlags::DISABLE_TIMING } else { flags };
        Ok(MutantEvent::new(self.0.queue.create_event(made)?, flags, false))
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<MutantEvent<F>> {
        let event = self.0.queue.wrap_event(raw)?;
        let flags = event.flags();
        Ok(MutantEvent::new(event, flags, F == flaw::OWNED_WRAPPED_EVENT))
    }
    fn synchronize(&self) -> Result<()> {
        match F {
            flaw::SYNC_AT_ONCE => Ok(()),
            flaw::SYNC_AT_ONCE_PAST_FIRST_DEVICE if self.0.queue.id().ordinal > 0 => Ok(()),
            flaw::LOST_DROPPED_ERRORS => self.synchronize_live_streams(),
            // Waits for every device's streams, not only its own.
            flaw::SYNC_EVERY_DEVICE => {
                (0..DEVICE_COUNT).filter_map(Self::shared).try_for_each(|d| d.0.queue.synchronize())
            }
            _ => self.0.queue.synchronize(),
        }
    }
    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        Ok(true)
    }
    fn enable_peer_access(&self, _peer: &Self) -> Result<()> {
        Ok(())
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        if F == flaw::WRONG_ATTRIBUTES {
            return Ok(PointerAttributes::unregistered());
        }
        let attributes = MEMORY.attributes(addr);
        if F == flaw::ATTRIBUTES_OWN_DEVICE_ONLY && attributes.device != Some(self.id()) {
            return Ok(PointerAttributes::unregistered());
        }
        if F == flaw::ATTRIBUTES_OUTLIVE_FREE && attributes.memory == MemoryKind::Unregistered {
            let noted = NOTED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((&base, &(len, device))) =
                noted.range(..=addr).next_back().filter(|(&b, &(l, _))| addr < b + l as u64)
            {
                return Ok(PointerAttributes {
                    device: Some(device),
                    memory: MemoryKind::Device,
                    host_accessible: true,
                    device_accessible: true,
                    managed: false,
                    allocation: Some((base, len)),
                });
            }
        }
        Ok(attributes)
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        match self.0.queue.load_module(image) {
            Err(_) if F == flaw::ANY_MODULE_LOADS => Ok(Module::new(self.id(), ())),
            result => result,
        }
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        if F == flaw::FOREIGN_KERNELS {
            // Looks the kernel up on whatever device the module came from, and claims it.
            let theirs = kernels::kernel(kind::<F>(), module.device(), module, name)?;
            let HostKernel(f) = *theirs.handle_on::<HostKernel>(module.device(), "kernel lookup")?;
            return Ok(Kernel::new(self.0.queue.id(), name, HostKernel(f)));
        }
        self.0.queue.kernel(module, name)
    }
}

/// The flawed allocator of `mut-slab-wraps`: a port whose table of small allocations has
/// 256 slots and, once that many allocations are live, hands a new one the last slot again.
mod slab {
    use std::sync::atomic::{AtomicU64, Ordering};

    use gpuport_core::{Buffer, BufferDesc, DeviceId, MemoryKind, Release, Result};

    use super::{host_buffer, CAPACITY, MEMORY};

    /// The largest allocation the table takes.
    pub(super) const SLOT_BYTES: usize = 4096;
    /// Live allocations the table holds.
    const SLOTS: usize = 256;

    /// The address of the last allocation the table gave a slot of its own.
    static LAST: AtomicU64 = AtomicU64::new(0);

    /// The release of a slot handed out twice: the slot's first owner frees it.
    struct SharedSlot;

    impl Release for SharedSlot {
        fn release(&mut self, _addr: u64, _len: usize) -> Result<()> {
            Ok(())
        }
    }

    pub(super) fn alloc(device: DeviceId, bytes: usize) -> Result<Buffer> {
        let last = LAST.load(Ordering::Relaxed);
        // The flaw shows only with the table full, and only where the last slot is live and
        // large enough (a crash would hide which case caught it).
        let shared = MEMORY.live_count() >= SLOTS
            && matches!(MEMORY.attributes(last).allocation, Some((base, len)) if base == last && len >= bytes);
        if !shared {
            let b = host_buffer(&MEMORY, device, bytes, MemoryKind::Device, CAPACITY)?;
            LAST.store(b.addr(), Ordering::Relaxed);
            return Ok(b);
        }
        let desc = BufferDesc { addr: last, len: bytes, device, memory: MemoryKind::Device, host_accessible: true };
        // SAFETY: (the flaw) the last slot's allocation, live and at least `bytes` long (the
        // registry says so); the host may read and write it.
        unsafe { Buffer::from_owned(desc, Box::new(SharedSlot)) }
    }
}
