//! Device, pinned and managed allocations, and pointer attributes.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use gpuport_core::{
    BackendKind, Buffer, BufferDesc, DeviceId, Error, HostAllocFlags, MemoryKind, PointerAttributes, Release, Result,
};

use gpuport_driver::vendor_stream::StreamErrors;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, CUdeviceptr, CUstream};

/// How a CUDA allocation is freed.
enum Kind {
    Device,
    Pinned,
    /// Freed with `cuMemFreeAsync` on its stream; a failure is kept for that stream's next
    /// synchronize.
    StreamOrdered {
        stream: CUstream,
        errors: Arc<StreamErrors>,
        /// Keeps the vendor stream alive until the free is queued on it (its handle only,
        /// not its state: no cycle when the buffer is parked on its own stream). `None`
        /// when the free goes to a default stream, which is never destroyed.
        _keep: Option<Arc<dyn Send + Sync>>,
    },
}

struct CudaRelease {
    dev: Arc<DeviceCtx>,
    kind: Kind,
}

// SAFETY: the stream handle is only passed to the thread-safe driver.
unsafe impl Send for CudaRelease {}
// SAFETY: as above.
unsafe impl Sync for CudaRelease {}

impl Release for CudaRelease {
    fn release(&mut self, addr: u64, _len: usize) -> Result<()> {
        self.dev.bind()?;
        let driver = &self.dev.driver;
        let api = &driver.api;
        match &self.kind {
            // SAFETY: `addr` came from cuMemAlloc/cuMemAllocManaged and is freed once.
            Kind::Device => unsafe { result::memory::free(api, addr as CUdeviceptr) },
            // SAFETY: `addr` came from cuMemHostAlloc and is freed once.
            Kind::Pinned => unsafe { result::memory::free_host(api, addr as usize as *mut c_void) },
            Kind::StreamOrdered { stream, errors, .. } => {
                // SAFETY: `addr` came from the stream-ordered allocator and is freed once,
                // on its stream, which `_keep` holds alive (or a default stream).
                let freed = unsafe { result::memory::free_async(driver, addr as CUdeviceptr, *stream) };
                if let Err(e) = &freed {
                    errors.record(e.clone());
                }
                freed
            }
        }
    }
}

fn empty(id: DeviceId, memory: MemoryKind, host_accessible: bool) -> Result<Buffer> {
    let desc = BufferDesc { addr: 0, len: 0, device: id, memory, host_accessible };
    // SAFETY: a zero-length buffer describes no memory.
    unsafe { Buffer::from_borrowed(desc, None) }
}

fn owned(dev: &Arc<DeviceCtx>, addr: u64, bytes: usize, memory: MemoryKind, kind: Kind) -> Result<Buffer> {
    let host_accessible = matches!(memory, MemoryKind::PinnedHost | MemoryKind::Managed);
    let desc = BufferDesc { addr, len: bytes, device: dev.id, memory, host_accessible };
    // SAFETY: `addr` is a fresh allocation of `bytes` bytes, freed only by the release;
    // pinned and managed memory is host-accessible on every platform CUDA supports with
    // unified addressing (64-bit Linux and Windows).
    unsafe { Buffer::from_owned(desc, Box::new(CudaRelease { dev: dev.clone(), kind })) }
}

/// `cuMemAlloc`.
pub fn alloc(dev: &Arc<DeviceCtx>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Device, false);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let api = &dev.driver.api;
    let ptr = result::memory::alloc(api, bytes, dev.id)?;
    owned(dev, ptr, bytes, MemoryKind::Device, Kind::Device)
}

/// `cuMemAllocAsync` on `stream`, freed with `cuMemFreeAsync` on `free_on` (the same
/// stream, or the legacy stream for a per-thread one).
pub fn alloc_async(
    dev: &Arc<DeviceCtx>,
    bytes: usize,
    stream: CUstream,
    free_on: CUstream,
    errors: Arc<StreamErrors>,
    keep: Option<Arc<dyn Send + Sync>>,
) -> Result<Buffer> {
    // Both calls must exist before anything is allocated.
    result::memory::has_alloc_async(&dev.driver)?;
    result::memory::has_free_async(&dev.driver)?;
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Device, false);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    // SAFETY: `stream` is live (the caller holds it); the context is current.
    let ptr = unsafe { result::memory::alloc_async(&dev.driver, bytes, stream, dev.id) }?;
    owned(dev, ptr, bytes, MemoryKind::Device, Kind::StreamOrdered { stream: free_on, errors, _keep: keep })
}

/// `cuMemHostAlloc`; the flag bits are the driver's `CU_MEMHOSTALLOC_*`.
pub fn alloc_pinned(dev: &Arc<DeviceCtx>, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::PinnedHost, true);
    }
    if bytes as u64 > gpuport_driver::host_memory::host_memory_limit() {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    // HostAllocFlags' bits are the driver's CU_MEMHOSTALLOC_*.
    let ptr = result::memory::host_alloc(&dev.driver.api, bytes, flags.bits() as c_uint, dev.id)?;
    owned(dev, ptr as usize as u64, bytes, MemoryKind::PinnedHost, Kind::Pinned)
}

/// `cuMemAllocManaged` (attached globally).
pub fn alloc_managed(dev: &Arc<DeviceCtx>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Managed, true);
    }
    if bytes > dev.total_memory {
        // Never ask for more managed memory than the card has: oversubscription can hang it.
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let ptr = result::memory::alloc_managed(&dev.driver.api, bytes, dev.id)?;
    owned(dev, ptr, bytes, MemoryKind::Managed, Kind::Device)
}

/// Decodes `cuPointerGetAttributes` answers.
pub(crate) fn decode_pointer(
    memory_type: c_uint,
    ordinal: c_int,
    managed: bool,
    start: u64,
    size: usize,
) -> PointerAttributes {
    let device = (ordinal >= 0).then(|| DeviceId::new(BackendKind::Cuda, ordinal as u32));
    let (memory, host_accessible) = match (memory_type, managed) {
        (_, true) => (MemoryKind::Managed, true),
        (sys::MEMORYTYPE_HOST, _) => (MemoryKind::PinnedHost, true),
        (sys::MEMORYTYPE_DEVICE | sys::MEMORYTYPE_ARRAY, _) => (MemoryKind::Device, false),
        (sys::MEMORYTYPE_UNIFIED, _) => (MemoryKind::Managed, true),
        _ => return PointerAttributes::unregistered(),
    };
    PointerAttributes {
        device,
        memory,
        host_accessible,
        device_accessible: true,
        managed: memory == MemoryKind::Managed,
        allocation: (start != 0).then_some((start, size)),
    }
}

/// `cuPointerGetAttributes` for `addr`.
pub fn pointer_attributes(dev: &DeviceCtx, addr: u64) -> Result<PointerAttributes> {
    dev.bind()?;
    Ok(match result::memory::pointer_attributes(&dev.driver.api, addr)? {
        Some(p) => decode_pointer(p.memory_type, p.ordinal, p.managed, p.start, p.size),
        // Unregistered host memory, or an address nobody allocated.
        None => PointerAttributes::unregistered(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_attributes_decode() {
        let d = decode_pointer(sys::MEMORYTYPE_DEVICE, 1, false, 0x7000, 4096);
        assert_eq!(d.device, Some(DeviceId::new(BackendKind::Cuda, 1)));
        assert_eq!((d.memory, d.host_accessible, d.managed), (MemoryKind::Device, false, false));
        assert_eq!(d.allocation, Some((0x7000, 4096)));
        let p = decode_pointer(sys::MEMORYTYPE_HOST, 0, false, 0x1000, 64);
        assert_eq!((p.memory, p.host_accessible), (MemoryKind::PinnedHost, true));
        let m = decode_pointer(sys::MEMORYTYPE_DEVICE, 0, true, 0x2000, 64);
        assert_eq!((m.memory, m.host_accessible, m.managed), (MemoryKind::Managed, true, true));
        assert_eq!(decode_pointer(0, -1, false, 0, 0), PointerAttributes::unregistered());
        assert_eq!(decode_pointer(sys::MEMORYTYPE_DEVICE, -1, false, 0, 0).device, None);
    }
}
