//! Host memory for software devices: 256-byte aligned (DLPack's recommendation),
//! zero-filled allocations, and a registry of live allocations per backend so
//! `pointer_attributes` can answer for their addresses.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::RwLock;

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, MemoryKind, PointerAttributes, Release, Result};

/// Alignment of every allocation.
pub const ALIGNMENT: usize = 256;

/// One aligned, zero-filled block of host memory, freed on drop.
pub struct HostAllocation {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain memory owned by this value; access is ordered by its users.
unsafe impl Send for HostAllocation {}
// SAFETY: as above; `&HostAllocation` only hands out the address.
unsafe impl Sync for HostAllocation {}

impl HostAllocation {
    /// `bytes` (≥ 1) zeroed bytes, or `OutOfMemory` for `device` when the request is above
    /// `limit` or the allocator refuses.
    pub fn zeroed(device: DeviceId, bytes: usize, limit: u64) -> Result<Self> {
        let oom = || Error::OutOfMemory { device, bytes };
        if bytes == 0 || bytes as u64 > limit {
            return Err(oom());
        }
        let layout = Layout::from_size_align(bytes, ALIGNMENT).map_err(|_| oom())?;
        // SAFETY: `layout` has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or_else(oom)?;
        Ok(HostAllocation { ptr, layout })
    }

    /// The block's address.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Always false: blocks have at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for HostAllocation {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc_zeroed(self.layout)` and freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Live host-addressable allocations of one backend, by base address.
pub struct PointerRegistry {
    live: RwLock<BTreeMap<u64, (usize, MemoryKind, DeviceId)>>,
}

impl PointerRegistry {
    /// An empty registry.
    pub const fn new() -> Self {
        PointerRegistry { live: RwLock::new(BTreeMap::new()) }
    }

    fn insert(&self, addr: u64, len: usize, kind: MemoryKind, device: DeviceId) {
        self.live.write().unwrap_or_else(|p| p.into_inner()).insert(addr, (len, kind, device));
    }

    fn remove(&self, addr: u64) {
        self.live.write().unwrap_or_else(|p| p.into_inner()).remove(&addr);
    }

    /// What the registry knows about `addr`.
    pub fn attributes(&self, addr: u64) -> PointerAttributes {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        match live.range(..=addr).next_back() {
            Some((&base, &(len, memory, device))) if addr < base + len as u64 => PointerAttributes {
                device: Some(device),
                memory,
                host_accessible: true,
                device_accessible: true,
                managed: false,
                allocation: Some((base, len)),
            },
            _ => PointerAttributes::unregistered(),
        }
    }
}

impl Default for PointerRegistry {
    fn default() -> Self {
        Self::new()
    }
}

struct Registered {
    registry: &'static PointerRegistry,
    _block: HostAllocation,
}

impl Release for Registered {
    fn release(&mut self, addr: u64, _len: usize) -> Result<()> {
        self.registry.remove(addr);
        Ok(())
    }
}

/// An owned, host-accessible buffer of `bytes` zeroed bytes of `kind` for `device`,
/// entered in `registry` until it is released. Zero bytes gives an empty buffer.
pub fn host_buffer(
    registry: &'static PointerRegistry,
    device: DeviceId,
    bytes: usize,
    kind: MemoryKind,
    limit: u64,
) -> Result<Buffer> {
    if bytes == 0 {
        let desc = BufferDesc { addr: 0, len: 0, device, memory: kind, host_accessible: true };
        // SAFETY: a zero-length buffer describes no memory.
        return unsafe { Buffer::from_borrowed(desc, None) };
    }
    let block = HostAllocation::zeroed(device, bytes, limit)?;
    let addr = block.ptr() as usize as u64;
    registry.insert(addr, bytes, kind, device);
    let desc = BufferDesc { addr, len: bytes, device, memory: kind, host_accessible: true };
    // SAFETY: `block` is a live allocation of `bytes` bytes, readable and writable by the
    // host, freed only when the release (which owns it) is dropped.
    unsafe { Buffer::from_owned(desc, Box::new(Registered { registry, _block: block })) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_registered_until_released() {
        static REGISTRY: PointerRegistry = PointerRegistry::new();
        let b = host_buffer(&REGISTRY, DeviceId::HOST, 1000, MemoryKind::Host, u64::MAX).unwrap();
        assert_eq!(b.addr() % ALIGNMENT as u64, 0);
        let p = b.host_ptr(0, 1000).unwrap();
        // SAFETY: 1000 live bytes, nothing else uses them.
        assert!(unsafe { std::slice::from_raw_parts(p, 1000) }.iter().all(|&x| x == 0));
        let a = REGISTRY.attributes(b.addr() + 999);
        assert_eq!((a.device, a.allocation), (Some(DeviceId::HOST), Some((b.addr(), 1000))));
        let addr = b.addr();
        b.free().unwrap();
        assert_eq!(REGISTRY.attributes(addr), PointerAttributes::unregistered());
        assert!(matches!(
            host_buffer(&REGISTRY, DeviceId::HOST, 4096, MemoryKind::Host, 100),
            Err(Error::OutOfMemory { bytes: 4096, .. })
        ));
    }
}
