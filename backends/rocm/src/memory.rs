//! Device, pinned and managed allocations, and pointer attributes.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use gpuport_core::{
    BackendKind, Buffer, BufferDesc, DeviceId, Error, HostAllocFlags, MemoryKind, PointerAttributes, Release, Result,
};

use gpuport_driver::vendor_stream::StreamErrors;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, hipPointerAttribute_t, hipStream_t, MemoryType};

enum Kind {
    Device,
    Pinned,
    /// Freed with `hipFreeAsync` on its stream; a failure is kept for that stream's next
    /// synchronize.
    StreamOrdered {
        stream: hipStream_t,
        errors: Arc<StreamErrors>,
        /// Keeps the vendor stream alive until the free is queued on it (its handle only,
        /// not its state: no cycle when the buffer is parked on its own stream). `None`
        /// when the free goes to a default stream, which is never destroyed.
        _keep: Option<Arc<dyn Send + Sync>>,
    },
}

struct HipRelease {
    dev: Arc<DeviceCtx>,
    kind: Kind,
}

// SAFETY: the stream handle is only passed to the thread-safe runtime.
unsafe impl Send for HipRelease {}
// SAFETY: as above.
unsafe impl Sync for HipRelease {}

impl Release for HipRelease {
    fn release(&mut self, addr: u64, _len: usize) -> Result<()> {
        self.dev.bind()?;
        let rt = &self.dev.rt;
        let api = &rt.api;
        let ptr = addr as usize as *mut c_void;
        match &self.kind {
            // SAFETY: `ptr` came from hipMalloc/hipMallocManaged and is freed once.
            Kind::Device => unsafe { result::memory::free(api, ptr) },
            // SAFETY: `ptr` came from hipHostMalloc and is freed once.
            Kind::Pinned => unsafe { result::memory::host_free(api, ptr) },
            Kind::StreamOrdered { stream, errors, .. } => {
                // SAFETY: `ptr` came from the stream-ordered allocator and is freed once, on
                // its stream, which `_keep` holds alive.
                let freed = unsafe { result::memory::free_async(rt, ptr, *stream) };
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

fn owned(dev: &Arc<DeviceCtx>, ptr: *mut c_void, bytes: usize, memory: MemoryKind, kind: Kind) -> Result<Buffer> {
    let host_accessible = matches!(memory, MemoryKind::PinnedHost | MemoryKind::Managed);
    let desc = BufferDesc { addr: ptr as usize as u64, len: bytes, device: dev.id, memory, host_accessible };
    // SAFETY: `ptr` is a fresh allocation of `bytes` bytes freed only by the release;
    // pinned and managed HIP memory is host-accessible.
    unsafe { Buffer::from_owned(desc, Box::new(HipRelease { dev: dev.clone(), kind })) }
}

/// `hipMalloc`.
pub fn alloc(dev: &Arc<DeviceCtx>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Device, false);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let ptr = result::memory::malloc(&dev.rt.api, bytes, dev.id)?;
    owned(dev, ptr, bytes, MemoryKind::Device, Kind::Device)
}

/// `hipMallocAsync` on `stream`, freed with `hipFreeAsync` there.
pub fn alloc_async(
    dev: &Arc<DeviceCtx>,
    bytes: usize,
    stream: hipStream_t,
    errors: Arc<StreamErrors>,
    keep: Option<Arc<dyn Send + Sync>>,
) -> Result<Buffer> {
    // Both calls must exist before anything is allocated.
    result::memory::has_stream_ordered(&dev.rt)?;
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Device, false);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    // SAFETY: `stream` is live (the caller holds it).
    let ptr = unsafe { result::memory::malloc_async(&dev.rt, bytes, stream, dev.id) }?;
    owned(dev, ptr, bytes, MemoryKind::Device, Kind::StreamOrdered { stream, errors, _keep: keep })
}

/// `hipHostMalloc`; `HostAllocFlags` bits are HIP's (`Portable` 1, `Mapped` 2,
/// `WriteCombined` 4).
pub fn alloc_pinned(dev: &Arc<DeviceCtx>, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::PinnedHost, true);
    }
    if bytes as u64 > gpuport_driver::host_memory::host_memory_limit() {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let ptr = result::memory::host_malloc(&dev.rt.api, bytes, flags.bits() as c_uint, dev.id)?;
    owned(dev, ptr, bytes, MemoryKind::PinnedHost, Kind::Pinned)
}

/// `hipMallocManaged` (attached globally).
pub fn alloc_managed(dev: &Arc<DeviceCtx>, bytes: usize) -> Result<Buffer> {
    if bytes == 0 {
        return empty(dev.id, MemoryKind::Managed, true);
    }
    if bytes > dev.total_memory {
        return Err(Error::OutOfMemory { device: dev.id, bytes });
    }
    dev.bind()?;
    let ptr = result::memory::malloc_managed(&dev.rt.api, bytes, dev.id)?;
    owned(dev, ptr, bytes, MemoryKind::Managed, Kind::Device)
}

/// Decodes a `hipPointerAttribute_t` from a runtime of major version `major`.
pub(crate) fn decode_pointer(major: u32, attrs: &hipPointerAttribute_t) -> PointerAttributes {
    let (memory, host_accessible) = match sys::decode_memory_type(major, attrs.memoryType) {
        _ if attrs.isManaged != 0 => (MemoryKind::Managed, true),
        Some(MemoryType::Host) => (MemoryKind::PinnedHost, true),
        Some(MemoryType::Device) => (MemoryKind::Device, false),
        Some(MemoryType::Managed) => (MemoryKind::Managed, true),
        Some(MemoryType::Unregistered) | None => return PointerAttributes::unregistered(),
    };
    PointerAttributes {
        device: (attrs.device >= 0).then(|| DeviceId::new(BackendKind::Rocm, attrs.device as u32)),
        memory,
        host_accessible,
        device_accessible: true,
        managed: memory == MemoryKind::Managed,
        allocation: None,
    }
}

/// `hipPointerGetAttributes` for `addr`.
pub fn pointer_attributes(dev: &DeviceCtx, addr: u64) -> Result<PointerAttributes> {
    dev.bind()?;
    Ok(match result::memory::pointer_attributes(&dev.rt.api, addr as usize as *const c_void)? {
        Some(attrs) => decode_pointer(dev.rt.major(), &attrs),
        // Unregistered host memory, or an address nobody allocated.
        None => PointerAttributes::unregistered(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_int;

    fn attrs(memory_type: c_int, device: c_int, managed: bool) -> hipPointerAttribute_t {
        hipPointerAttribute_t {
            memoryType: memory_type,
            device,
            devicePointer: std::ptr::null_mut(),
            hostPointer: std::ptr::null_mut(),
            isManaged: c_int::from(managed),
            allocationFlags: 0,
        }
    }

    #[test]
    fn rocm5_and_rocm6_memory_types_decode() {
        let d5 = decode_pointer(5, &attrs(sys::memory_type_v5::DEVICE, 1, false));
        assert_eq!((d5.memory, d5.device), (MemoryKind::Device, Some(DeviceId::new(BackendKind::Rocm, 1))));
        let d6 = decode_pointer(6, &attrs(sys::memory_type_v6::DEVICE, 0, false));
        assert_eq!(d6.memory, MemoryKind::Device);
        // The same number means different things in 5 and 6.
        assert_eq!(decode_pointer(5, &attrs(1, 0, false)).memory, MemoryKind::Device);
        assert_eq!(decode_pointer(6, &attrs(1, 0, false)).memory, MemoryKind::PinnedHost);
        assert_eq!(decode_pointer(5, &attrs(0, 0, false)).memory, MemoryKind::PinnedHost);
        assert_eq!(decode_pointer(6, &attrs(0, -1, false)), PointerAttributes::unregistered());
        let m = decode_pointer(5, &attrs(sys::memory_type_v5::DEVICE, 0, true));
        assert!(m.managed && m.host_accessible);
        assert_eq!(decode_pointer(6, &attrs(77, 0, false)), PointerAttributes::unregistered());
    }
}
