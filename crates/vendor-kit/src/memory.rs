//! A vendor device's memory, written once over [`VendorCalls`]: device, pinned, managed and
//! stream-ordered allocations as `gpuport_core::Buffer`s, each freed once by the release
//! that matches how it was allocated — a stream-ordered one on its stream, whose handle the
//! buffer keeps alive, with a failed free kept as that stream's error. Sizes no device could
//! give are refused before the driver is asked (a managed allocation larger than the card
//! can hang it), and zero-size requests describe no memory. Host memory allocated
//! elsewhere is page-locked for the device's copies by a registration that a buffer over
//! the same bytes holds ([`register_host`]).

use std::sync::Arc;

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, HostAllocFlags, MemoryKind, Release, Result};

use crate::calls::VendorCalls;
use crate::device::VendorDevice;
use crate::stream::VendorStream;
use crate::stream_errors::StreamErrors;

/// How an allocation is freed.
enum Kind<V: VendorCalls> {
    Device,
    Pinned,
    /// Freed on its stream; a failure is kept for that stream's next synchronize.
    StreamOrdered {
        stream: V::Stream,
        errors: Arc<StreamErrors>,
        /// Keeps the vendor stream alive until the free is queued on it (its handle only,
        /// not its state: no cycle when the buffer is parked on its own stream). `None`
        /// when the free goes to a default stream, which is never destroyed.
        _keep: Option<Arc<dyn Send + Sync>>,
    },
}

struct VendorRelease<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    kind: Kind<V>,
}

// SAFETY: the stream handle is only passed to the driver, which is thread-safe; the rest
// is `Send + Sync` by itself.
unsafe impl<V: VendorCalls> Send for VendorRelease<V> {}
// SAFETY: as above.
unsafe impl<V: VendorCalls> Sync for VendorRelease<V> {}

impl<V: VendorCalls> Release for VendorRelease<V> {
    fn release(&mut self, addr: u64, _len: usize) -> Result<()> {
        self.dev.bind()?;
        match &self.kind {
            // SAFETY: `addr` came from the device or managed allocator and is freed once.
            Kind::Device => unsafe { self.dev.mem_free(addr) },
            // SAFETY: `addr` came from the pinned allocator and is freed once.
            Kind::Pinned => unsafe { self.dev.mem_free_host(addr) },
            Kind::StreamOrdered { stream, errors, .. } => {
                // SAFETY: `addr` came from the stream-ordered allocator and is freed once,
                // on its stream, which `_keep` holds alive (or a default stream).
                let freed = unsafe { self.dev.mem_free_async(addr, *stream) };
                if let Err(e) = &freed {
                    errors.record(e.clone());
                }
                freed
            }
        }
    }
}

fn empty(device: DeviceId, memory: MemoryKind) -> Result<Buffer> {
    let host_accessible = memory != MemoryKind::Device;
    let desc = BufferDesc { addr: 0, len: 0, device, memory, host_accessible };
    // SAFETY: a zero-length buffer describes no memory.
    unsafe { Buffer::from_borrowed(desc, None) }
}

fn owned<V: VendorCalls>(
    dev: &Arc<VendorDevice<V>>,
    addr: u64,
    bytes: usize,
    memory: MemoryKind,
    kind: Kind<V>,
) -> Result<Buffer> {
    let host_accessible = matches!(memory, MemoryKind::PinnedHost | MemoryKind::Managed);
    let desc = BufferDesc { addr, len: bytes, device: dev.device_id(), memory, host_accessible };
    // SAFETY: `addr` is a fresh allocation of `bytes` bytes, freed only by the release;
    // pinned and managed memory is host-accessible wherever the vendors' unified
    // addressing runs (64-bit Linux and Windows).
    unsafe { Buffer::from_owned(desc, Box::new(VendorRelease { dev: dev.clone(), kind })) }
}

/// `OutOfMemory` for a size the device could never give.
fn fits(device: DeviceId, bytes: usize, limit: u64) -> Result<()> {
    if bytes as u64 > limit {
        return Err(Error::OutOfMemory { device, bytes });
    }
    Ok(())
}

/// `Device::alloc`: device memory.
pub fn alloc<V: VendorCalls>(dev: &Arc<VendorDevice<V>>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.device_id(), MemoryKind::Device);
    }
    fits(dev.device_id(), bytes, dev.total_memory() as u64)?;
    dev.bind()?;
    let addr = dev.mem_alloc(bytes)?;
    owned(dev, addr, bytes, MemoryKind::Device, Kind::Device)
}

/// `Device::alloc_managed`: memory the host and every device reach (never more than the
/// card has: oversubscribing managed memory can hang it).
pub fn alloc_managed<V: VendorCalls>(dev: &Arc<VendorDevice<V>>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.device_id(), MemoryKind::Managed);
    }
    fits(dev.device_id(), bytes, dev.total_memory() as u64)?;
    dev.bind()?;
    let addr = dev.mem_alloc_managed(bytes)?;
    owned(dev, addr, bytes, MemoryKind::Managed, Kind::Device)
}

/// `Device::alloc_pinned`: page-locked host memory (`HostAllocFlags` bits are the
/// vendors' own).
pub fn alloc_pinned<V: VendorCalls>(dev: &Arc<VendorDevice<V>>, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.device_id(), MemoryKind::PinnedHost);
    }
    fits(dev.device_id(), bytes, gpuport_core::host_memory::host_memory_limit())?;
    dev.bind()?;
    let addr = dev.mem_alloc_host(bytes, flags)?;
    owned(dev, addr, bytes, MemoryKind::PinnedHost, Kind::Pinned)
}

/// `Device::alloc_async`: device memory allocated in `stream`'s order and freed on it —
/// on the legacy default stream for a per-thread one, whose handle means "the calling
/// thread's stream" and so cannot name it from the thread that drops the buffer.
/// `Unsupported` where the driver has no stream-ordered allocator.
pub fn alloc_async<V: VendorCalls>(
    dev: &Arc<VendorDevice<V>>,
    bytes: usize,
    stream: &VendorStream<V>,
) -> Result<Buffer> {
    crate::same_backend("alloc_async", dev.device_id(), stream.device_id())?;
    if stream.device_id() != dev.device_id() {
        return Err(Error::invalid_argument(format!(
            "a stream of {} used with {}",
            stream.device_id(),
            dev.device_id()
        )));
    }
    // Both calls must exist before anything is allocated.
    dev.stream_ordered_supported()?;
    if bytes == 0 {
        return empty(dev.device_id(), MemoryKind::Device);
    }
    fits(dev.device_id(), bytes, dev.total_memory() as u64)?;
    let raw = stream.raw()?;
    let (free_on, keep) =
        if stream.is_per_thread() { (dev.legacy_stream_handle(), None) } else { (raw, Some(stream.handle_keeper())) };
    // SAFETY: `raw` is live (the stream handle holds it) and its device is current.
    let addr = unsafe { dev.mem_alloc_async(bytes, raw) }?;
    let kind = Kind::StreamOrdered { stream: free_on, errors: stream.errors().clone(), _keep: keep };
    owned(dev, addr, bytes, MemoryKind::Device, kind)
}

/// A registration of host memory with a vendor device: unregistered when dropped (the
/// last clone of the buffer that holds it), before the memory it keeps alive is released.
struct Registration<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    addr: u64,
    /// The registered memory, kept allocated while it is registered.
    _host: Buffer,
}

impl<V: VendorCalls> Drop for Registration<V> {
    fn drop(&mut self) {
        // SAFETY: `addr` was registered by `register_host` and is unregistered once, here;
        // the buffer holding this registration is gone, so no queued work uses it (work
        // holds the buffers it touches).
        let done = self.dev.bind().and_then(|_| unsafe { self.dev.host_unregister(self.addr) });
        if let Err(e) = done {
            log::warn!("unregistering host memory at {:#x} from {}: {e}", self.addr, self.dev.device_id());
        }
    }
}

/// `Device::register_host`: `host` page-locked for this device's copies, as a buffer over
/// the same bytes that holds the registration (and `host`) until its last clone drops.
/// This backend's own host-accessible memory (pinned or managed) is already page-locked
/// for it and is returned as it is.
pub fn register_host<V: VendorCalls>(dev: &Arc<VendorDevice<V>>, host: &Buffer) -> Result<Buffer> {
    if !host.is_host_accessible() {
        return Err(Error::invalid_argument(format!(
            "registering {:?} memory of {} with {}: only host-accessible memory can be registered",
            host.memory(),
            host.device(),
            dev.device_id()
        )));
    }
    if host.is_empty() || host.device().kind == dev.kind() {
        return Ok(host.clone());
    }
    dev.bind()?;
    // SAFETY: `host` is host-accessible memory of `len` bytes that the registration keeps
    // allocated (it holds a clone) until it unregisters.
    unsafe { dev.host_register(host.addr(), host.len()) }?;
    let registration = Registration { dev: dev.clone(), addr: host.addr(), _host: host.clone() };
    let desc = BufferDesc {
        addr: host.addr(),
        len: host.len(),
        device: dev.device_id(),
        memory: MemoryKind::PinnedHost,
        host_accessible: true,
    };
    // SAFETY: the bytes are `host`'s, host-accessible, and stay allocated while the
    // registration (which holds `host`) lives.
    unsafe { Buffer::from_borrowed_owned_by(desc, registration) }
}
