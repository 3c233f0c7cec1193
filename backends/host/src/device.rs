//! The host device (`host:0`).

use std::cell::OnceCell;
use std::sync::{Arc, Mutex, OnceLock};

use gpuport_core::{
    Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel, MemoryKind, Module,
    ModuleImage, PointerAttributes, Result, Stream, StreamFlags,
};

use crate::event::HostEvent;
use crate::kernels::{module_table, HostKernel, HostModule};
use crate::memory;
use crate::queue::QueueTracker;
use crate::stream::HostStream;
use crate::HostBackend;

struct DeviceInner {
    id: DeviceId,
    limit: u64,
    /// Every queue that may still have work, destroyed streams' included.
    queues: Mutex<Vec<QueueTracker>>,
    legacy: OnceLock<HostStream>,
}

/// The CPU as a device. Every handle refers to the one process-wide `host:0`.
#[derive(Clone)]
pub struct HostDevice {
    inner: Arc<DeviceInner>,
}

thread_local! {
    static PER_THREAD: OnceCell<HostStream> = const { OnceCell::new() };
}

impl HostDevice {
    pub(crate) fn shared() -> Self {
        static DEVICE: OnceLock<HostDevice> = OnceLock::new();
        DEVICE
            .get_or_init(|| HostDevice {
                inner: Arc::new(DeviceInner {
                    id: DeviceId::HOST,
                    limit: memory::memory_limit(),
                    queues: Mutex::new(Vec::new()),
                    legacy: OnceLock::new(),
                }),
            })
            .clone()
    }

    fn track(&self, stream: &HostStream) {
        let mut queues = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.retain(QueueTracker::is_live);
        queues.push(stream.queue().tracker());
    }

    fn check_stream(&self, stream: &HostStream) -> Result<()> {
        if stream.device_id() != self.inner.id {
            return Err(Error::invalid_argument(format!(
                "stream of {} used with {}",
                stream.device_id(),
                self.inner.id
            )));
        }
        Ok(())
    }

    pub(crate) fn info_now() -> DeviceInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let name = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH));
        DeviceInfo {
            id: DeviceId::HOST,
            name,
            total_memory: memory::meminfo().0,
            compute_capability: None,
            arch: Some(std::env::consts::ARCH.to_owned()),
            multiprocessors: std::thread::available_parallelism().ok().map(|n| n.get() as u32),
            pci_bus_id: None,
            uuid: None,
        }
    }
}

impl Device for HostDevice {
    type Backend = HostBackend;

    fn id(&self) -> DeviceId {
        self.inner.id
    }

    fn info(&self) -> Result<DeviceInfo> {
        Ok(Self::info_now())
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        memory::allocate(self.inner.id, bytes, MemoryKind::Host, self.inner.limit, true)
    }

    fn alloc_async(&self, bytes: usize, stream: &HostStream) -> Result<Buffer> {
        // Host memory is usable at once; queued work holds the buffer, so the free is
        // already ordered after every use.
        self.check_stream(stream)?;
        self.alloc(bytes)
    }

    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        // Host memory needs no pinning for host streams; the flags have nothing to change.
        memory::allocate(self.inner.id, bytes, MemoryKind::PinnedHost, self.inner.limit, true)
    }

    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported("host", "managed memory (all host memory is already host-accessible)"))
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = crate::stream::host_range(dst, offset, len, "memset")?;
        // SAFETY: the range was checked against a live buffer that `dst` keeps alive.
        unsafe { std::ptr::write_bytes(d, value, len) };
        Ok(())
    }

    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<HostStream> {
        let stream = HostStream::create(self.inner.id, flags)?;
        self.track(&stream);
        Ok(stream)
    }

    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }

    fn default_stream(&self, which: DefaultStream) -> Result<HostStream> {
        let stream = match which {
            DefaultStream::Legacy => match self.inner.legacy.get() {
                Some(s) => s.clone(),
                None => {
                    let created = self.create_stream(StreamFlags::empty(), 0)?;
                    self.inner.legacy.get_or_init(|| created).clone()
                }
            },
            DefaultStream::PerThread => PER_THREAD.with(|cell| match cell.get() {
                Some(s) => Ok(s.clone()),
                None => {
                    let created = self.create_stream(StreamFlags::empty(), 0)?;
                    Ok(cell.get_or_init(|| created).clone())
                }
            })?,
        };
        Ok(stream.to_borrowed())
    }

    unsafe fn wrap_stream(&self, raw: usize) -> Result<HostStream> {
        let stream = HostStream::from_raw(raw)?;
        self.check_stream(&stream)?;
        Ok(stream)
    }

    fn create_event(&self, flags: EventFlags) -> Result<HostEvent> {
        if flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::unsupported("host", "interprocess events"));
        }
        Ok(HostEvent::create(self.inner.id, flags))
    }

    unsafe fn wrap_event(&self, raw: usize) -> Result<HostEvent> {
        HostEvent::from_raw(self.inner.id, raw)
    }

    fn synchronize(&self) -> Result<()> {
        let queues: Vec<QueueTracker> = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner()).clone();
        crate::queue::synchronize_all(&queues)
    }

    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        Ok(true) // there is one host device
    }

    fn enable_peer_access(&self, _peer: &Self) -> Result<()> {
        Ok(())
    }

    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        Ok(memory::attributes(addr))
    }

    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        match image {
            ModuleImage::Registered(name) => Ok(Module::new(self.inner.id, HostModule(module_table(name)?))),
            other => Err(Error::unsupported(
                "host",
                format!("loading a {} (register Rust functions instead)", other.kind_name()),
            )),
        }
    }

    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        let HostModule(table) = module
            .handle::<HostModule>()
            .ok_or_else(|| Error::mismatch("kernel lookup", gpuport_core::BackendKind::Host, module.device()))?;
        let f = table
            .get(name)
            .ok_or_else(|| Error::invalid_argument(format!("host module has no kernel named {name:?}")))?;
        Ok(Kernel::new(self.inner.id, name, HostKernel(*f)))
    }
}
