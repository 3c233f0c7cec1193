//! The host device (`host:0`).

use std::cell::OnceCell;
use std::sync::{Arc, OnceLock};

use gpuport_core::host_memory;
use gpuport_core::{
    BackendKind, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, Error, EventFlags, HostAllocFlags, Kernel,
    MemoryKind, Module, ModuleImage, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_queue::QueueDevice;

use crate::event::HostEvent;
use crate::memory;
use crate::stream::HostStream;
use crate::HostBackend;

struct DeviceInner {
    /// Queues, the legacy default stream, streams, events and modules.
    queue: QueueDevice<HostStream>,
    limit: u64,
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
                    queue: QueueDevice::new(DeviceId::HOST),
                    limit: host_memory::host_memory_limit(),
                }),
            })
            .clone()
    }

    pub(crate) fn info_now() -> DeviceInfo {
        DeviceInfo {
            id: DeviceId::HOST,
            name: cpu_name(),
            // 0 = unknown (shown as such), never a made-up size.
            total_memory: host_memory::host_meminfo().map_or(0, |(total, _swap)| total),
            compute_capability: None,
            arch: Some(std::env::consts::ARCH.to_owned()),
            multiprocessors: std::thread::available_parallelism().ok().map(|n| n.get() as u32),
            pci_bus_id: None,
            uuid: None,
        }
    }
}

/// The CPU's model name: the processor's own brand string (CPUID, no `/proc` needed) on
/// x86, else `/proc/cpuinfo`'s, else the architecture's name.
fn cpu_name() -> String {
    // Miri cannot execute CPUID (an instruction, not a call it shims) and reads no host
    // files under isolation: a name that says where it came from stands in.
    #[cfg(miri)]
    {
        format!("{} CPU (under Miri)", std::env::consts::ARCH)
    }
    #[cfg(not(miri))]
    {
        cpu_name_from_the_processor()
    }
}

#[cfg(not(miri))]
fn cpu_name_from_the_processor() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // CPUID leaves 0x8000_0002..=0x8000_0004 hold the 48-byte brand string where leaf
        // 0x8000_0000 says they exist (every x86-64 processor has CPUID).
        #[allow(unused_unsafe)]
        // SAFETY: CPUID is available on every x86-64 processor and has no side effects.
        let max = unsafe { __cpuid(0x8000_0000) }.eax;
        if max >= 0x8000_0004 {
            let mut brand = Vec::with_capacity(48);
            for leaf in 0x8000_0002u32..=0x8000_0004 {
                #[allow(unused_unsafe)]
                // SAFETY: as above; the leaf exists.
                let r = unsafe { __cpuid(leaf) };
                for word in [r.eax, r.ebx, r.ecx, r.edx] {
                    brand.extend_from_slice(&word.to_le_bytes());
                }
            }
            let text = String::from_utf8_lossy(&brand).trim_matches(char::from(0)).trim().to_owned();
            if !text.is_empty() {
                return text;
            }
        }
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

impl Device for HostDevice {
    type Backend = HostBackend;

    fn id(&self) -> DeviceId {
        self.inner.queue.id()
    }

    fn info(&self) -> Result<DeviceInfo> {
        Ok(Self::info_now())
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        memory::allocate(bytes, MemoryKind::Host, self.inner.limit)
    }

    fn alloc_async(&self, bytes: usize, stream: &HostStream) -> Result<Buffer> {
        // Host memory is usable at once; queued work holds the buffer, so the free is
        // already ordered after every use.
        self.inner.queue.check_stream(stream.device_id())?;
        self.alloc(bytes)
    }

    fn alloc_pinned(&self, bytes: usize, _flags: HostAllocFlags) -> Result<Buffer> {
        // Host memory needs no pinning for host streams; the flags have nothing to change.
        memory::allocate(bytes, MemoryKind::PinnedHost, self.inner.limit)
    }

    fn alloc_managed(&self, _bytes: usize) -> Result<Buffer> {
        Err(Error::unsupported(BackendKind::Host, "managed memory (all host memory is already host-accessible)"))
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.inner.queue.memset(dst, offset, len, value, HostStream)
    }

    fn create_stream(&self, flags: StreamFlags, _priority: i32) -> Result<HostStream> {
        self.inner.queue.create_stream(flags, HostStream)
    }

    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, 0))
    }

    fn default_stream(&self, which: DefaultStream) -> Result<HostStream> {
        match which {
            DefaultStream::Legacy => self.inner.queue.legacy_stream(HostStream),
            // The host has per-thread default streams: one queue per thread, made on first
            // use and handed out borrowed.
            DefaultStream::PerThread => {
                let owned = PER_THREAD.with(|cell| match cell.get() {
                    Some(s) => Ok(s.clone()),
                    None => {
                        let created = self.create_stream(StreamFlags::empty(), 0)?;
                        Ok::<_, Error>(cell.get_or_init(|| created).clone())
                    }
                })?;
                Ok(HostStream(owned.0.to_borrowed()))
            }
        }
    }

    unsafe fn wrap_stream(&self, raw: usize) -> Result<HostStream> {
        self.inner.queue.wrap_stream(raw, HostStream)
    }

    fn create_event(&self, flags: EventFlags) -> Result<HostEvent> {
        self.inner.queue.create_event(flags).map(HostEvent)
    }

    unsafe fn wrap_event(&self, raw: usize) -> Result<HostEvent> {
        self.inner.queue.wrap_event(raw).map(HostEvent)
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.queue.synchronize()
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
        self.inner.queue.load_module(image)
    }

    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        self.inner.queue.kernel(module, name)
    }
}
