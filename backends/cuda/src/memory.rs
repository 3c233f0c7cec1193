//! Device, pinned and managed allocations, and pointer attributes.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, Weak};

use gpuport_core::{
    BackendKind, Buffer, BufferDesc, DeviceId, Error, HostAllocFlags, MemoryKind, PointerAttributes, Release, Result,
};

use gpuport_driver::vendor_stream::StreamErrors;

use crate::context::DeviceCtx;
use crate::result::{check, check_alloc};
use crate::sys::{self, CUdeviceptr, CUpointer_attribute, CUstream};

/// How a CUDA allocation is freed.
enum Kind {
    Device,
    Pinned,
    /// Freed with `cuMemFreeAsync` on its stream; a failure is kept for that stream's next
    /// synchronize.
    StreamOrdered {
        stream: CUstream,
        errors: Arc<StreamErrors>,
        /// The stream's handle, weakly: a buffer parked on its own stream must not keep
        /// that stream alive (a cycle). Once the stream is gone, no work on it can still
        /// use the buffer (its drop waited for what it had parked), so the free goes to
        /// the null stream.
        alive: Weak<dyn Send + Sync>,
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
            Kind::Device => check(api, unsafe { (api.cuMemFree)(addr as CUdeviceptr) }, "cuMemFree"),
            // SAFETY: `addr` came from cuMemHostAlloc and is freed once.
            Kind::Pinned => check(api, unsafe { (api.cuMemFreeHost)(addr as usize as *mut c_void) }, "cuMemFreeHost"),
            Kind::StreamOrdered { stream, errors, alive } => {
                let free = driver.mem_free_async().ok_or_else(|| Error::unsupported("cuda", "cuMemFreeAsync"))?;
                // The stream, while it lives (held across the call); else the null stream.
                let live = alive.upgrade();
                let target = if live.is_some() { *stream } else { std::ptr::null_mut() };
                // SAFETY: `addr` came from the stream-ordered allocator and is freed once;
                // `target` is the live allocating stream or the null stream.
                let result = check(api, unsafe { free(addr as CUdeviceptr, target) }, "cuMemFreeAsync");
                if let Err(e) = &result {
                    errors.record(e.clone());
                }
                result
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
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the context is current.
    check_alloc(api, unsafe { (api.cuMemAlloc)(&mut ptr, bytes) }, "cuMemAlloc", dev.id, bytes)?;
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
    alive: Weak<dyn Send + Sync>,
) -> Result<Buffer> {
    let alloc = dev.driver.mem_alloc_async().ok_or_else(|| {
        Error::unsupported(
            "cuda",
            format!("stream-ordered allocation (driver {})", crate::loader::format_version(dev.driver.driver_version)),
        )
    })?;
    dev.driver.mem_free_async().ok_or_else(|| Error::unsupported("cuda", "cuMemFreeAsync"))?;
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Device, false);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; `stream` is live (the caller holds it); the context is current.
    let status = unsafe { alloc(&mut ptr, bytes, stream) };
    if status == sys::ERROR_NOT_SUPPORTED {
        // A driver that has the call, on a device without memory pools.
        return Err(Error::unsupported("cuda", format!("stream-ordered allocation on {} (no memory pools)", dev.id)));
    }
    check_alloc(&dev.driver.api, status, "cuMemAllocAsync", dev.id, bytes)?;
    owned(dev, ptr, bytes, MemoryKind::Device, Kind::StreamOrdered { stream: free_on, errors, alive })
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
    let api = &dev.driver.api;
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid out-pointer; PORTABLE = 1, DEVICEMAP = 2, WRITECOMBINED = 4 as in cuda.h.
    let status = unsafe { (api.cuMemHostAlloc)(&mut ptr, bytes, flags.bits() as c_uint) };
    check_alloc(api, status, "cuMemHostAlloc", dev.id, bytes)?;
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
    let api = &dev.driver.api;
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: valid out-pointer; the context is current.
    let status = unsafe { (api.cuMemAllocManaged)(&mut ptr, bytes, sys::MEM_ATTACH_GLOBAL) };
    check_alloc(api, status, "cuMemAllocManaged", dev.id, bytes)?;
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
    let api = &dev.driver.api;
    let mut memory_type: c_uint = 0;
    let mut ordinal: c_int = -1;
    let mut managed: c_uint = 0;
    let mut start: CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attrs = [
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR as c_int,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE as c_int,
    ];
    let mut data: [*mut c_void; 5] = [
        (&mut memory_type as *mut c_uint).cast(),
        (&mut ordinal as *mut c_int).cast(),
        (&mut managed as *mut c_uint).cast(),
        (&mut start as *mut CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: five attributes, each with a pointer to storage of the documented type.
    let status = unsafe { (api.cuPointerGetAttributes)(5, attrs.as_mut_ptr(), data.as_mut_ptr(), addr) };
    match status {
        sys::SUCCESS => Ok(decode_pointer(memory_type, ordinal, managed != 0, start, size)),
        // Unregistered host memory, or an address nobody allocated.
        sys::ERROR_INVALID_VALUE => Ok(PointerAttributes::unregistered()),
        _ => check(api, status, "cuPointerGetAttributes").map(|_| PointerAttributes::unregistered()),
    }
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
