//! Host memory for software devices: 256-byte aligned (DLPack's recommendation)
//! allocations served through a process-wide cache of freed blocks ([`cache`]), and a
//! registry of live allocations per backend so `pointer_attributes` can answer for their
//! addresses.
//!
//! Like `cudaMalloc`'s, an allocation's contents are unspecified: a fresh block is zeroed,
//! a reused one holds what its last user left (never uninitialised memory, so reading it
//! is sound); `Array::zeros` and `memset` clear.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::RwLock;

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, MemoryKind, PointerAttributes, Release, Result};

pub mod cache;

/// Alignment of every allocation.
pub const ALIGNMENT: usize = 256;

/// One aligned block of host memory, given back to the [`cache`] on drop.
pub struct HostAllocation {
    ptr: NonNull<u8>,
    len: usize,
    /// The block's real size ([`cache::class_of`] `len`).
    class: usize,
}

// SAFETY: the block is plain memory owned by this value; access is ordered by its users.
unsafe impl Send for HostAllocation {}
// SAFETY: as above; `&HostAllocation` only hands out the address.
unsafe impl Sync for HostAllocation {}

impl HostAllocation {
    /// `bytes` (≥ 1) bytes of unspecified but initialised contents (zero when fresh, a
    /// reused block's old bytes otherwise), or `OutOfMemory` for `device` when the request
    /// is above `limit` or the system refuses.
    pub fn new(device: DeviceId, bytes: usize, limit: u64) -> Result<Self> {
        let oom = || Error::OutOfMemory { device, bytes };
        if bytes == 0 || bytes as u64 > limit || bytes > isize::MAX as usize - ALIGNMENT {
            return Err(oom());
        }
        let class = cache::class_of(bytes).ok_or_else(oom)?;
        let ptr = cache::take(class).ok_or_else(oom)?;
        Ok(HostAllocation { ptr, len: bytes, class })
    }

    /// The block's address.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes (as requested).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: blocks have at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for HostAllocation {
    fn drop(&mut self) {
        // SAFETY: the block came from `cache::take(self.class)` and is dropped once.
        unsafe { cache::give_back(self.ptr, self.class) };
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

    /// How many allocations are live.
    pub fn live_count(&self) -> usize {
        self.live.read().unwrap_or_else(|p| p.into_inner()).len()
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

/// An owned, host-accessible buffer of `bytes` bytes of `kind` for `device` (contents
/// unspecified, see the module docs), entered in `registry` until it is released. Zero
/// bytes gives an empty buffer.
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
    let block = HostAllocation::new(device, bytes, limit)?;
    let base = block.ptr;
    // Exposed: the address leaves Rust's view (exports hand it to other libraries, and a
    // consumer in this process may turn it back into a pointer).
    let addr = base.as_ptr().expose_provenance() as u64;
    registry.insert(addr, bytes, kind, device);
    let desc = BufferDesc { addr, len: bytes, device, memory: kind, host_accessible: true };
    // SAFETY: `block` is a live allocation of `bytes` bytes at `base`, readable and
    // writable by the host, freed only when the release (which owns it) is dropped.
    unsafe { Buffer::from_owned_host(base, desc, Box::new(Registered { registry, _block: block })) }
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

    #[test]
    fn large_blocks_are_reused_after_release_with_their_old_bytes() {
        let _serial = cache::TEST_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        // A size no other test allocates, so the cached block is this test's.
        let bytes = cache::MIN_CACHED * 3 + 17;
        let first = HostAllocation::new(DeviceId::HOST, bytes, u64::MAX).unwrap();
        let addr = first.ptr();
        // SAFETY: `bytes` bytes of the block, owned here.
        unsafe { addr.write_bytes(0xA5, bytes) };
        drop(first);
        let again = HostAllocation::new(DeviceId::HOST, bytes - 5, u64::MAX).unwrap();
        assert_eq!(again.ptr(), addr, "same class: the cached block");
        assert_eq!(again.len(), bytes - 5);
        // SAFETY: the block's bytes are initialised (written above).
        assert_eq!(unsafe { *again.ptr().add(100) }, 0xA5, "contents are left as they were");
        assert_eq!(again.ptr() as usize % ALIGNMENT, 0);
        drop(again);
        assert!(cache::cached_bytes() >= bytes);
        assert!(cache::release_all() >= bytes, "the cached block went back to the system");
    }
}
