//! Host allocations: 256-byte aligned (DLPack's recommendation), zero-filled, and
//! registered so `pointer_attributes` can answer for host addresses.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::sync::RwLock;

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, MemoryKind, PointerAttributes, Release, Result};

/// Alignment of every host allocation.
pub const ALIGNMENT: usize = 256;

/// Live allocations by base address: (length, kind, owning device).
static REGISTRY: RwLock<BTreeMap<u64, (usize, MemoryKind, DeviceId)>> = RwLock::new(BTreeMap::new());

struct HostRelease {
    layout: Layout,
}

impl Release for HostRelease {
    fn release(&mut self, addr: u64, _len: usize) -> Result<()> {
        REGISTRY.write().unwrap_or_else(|p| p.into_inner()).remove(&addr);
        // SAFETY: `addr` came from `alloc_zeroed(self.layout)` and is released once.
        unsafe { dealloc(addr as usize as *mut u8, self.layout) };
        Ok(())
    }
}

/// Allocates `bytes` of zeroed host memory of `kind` for `device`. `limit` is the most
/// the machine can give (physical memory and swap): larger requests are refused up front,
/// since an over-committing kernel would otherwise accept them and kill the process later.
///
/// `host_accessible` is false for devices (the ext device) whose memory must only be
/// reached through their own copies.
pub fn allocate(device: DeviceId, bytes: usize, kind: MemoryKind, limit: u64, host_accessible: bool) -> Result<Buffer> {
    let oom = || Error::OutOfMemory { device, bytes };
    if bytes == 0 {
        let desc = BufferDesc { addr: 0, len: 0, device, memory: kind, host_accessible };
        // SAFETY: a zero-length buffer describes no memory.
        return unsafe { Buffer::from_borrowed(desc, None) };
    }
    if bytes as u64 > limit {
        return Err(oom());
    }
    let layout = Layout::from_size_align(bytes, ALIGNMENT).map_err(|_| oom())?;
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(oom());
    }
    let addr = ptr as usize as u64;
    REGISTRY.write().unwrap_or_else(|p| p.into_inner()).insert(addr, (bytes, kind, device));
    let desc = BufferDesc { addr, len: bytes, device, memory: kind, host_accessible };
    // SAFETY: `ptr` is a live allocation of `bytes` bytes, readable and writable by the
    // host, freed only by `HostRelease`.
    unsafe { Buffer::from_owned(desc, Box::new(HostRelease { layout })) }
}

/// What the registry knows about `addr`, for allocations of `device`'s kind.
pub fn attributes(addr: u64) -> PointerAttributes {
    let registry = REGISTRY.read().unwrap_or_else(|p| p.into_inner());
    match registry.range(..=addr).next_back() {
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

pub use gpuport_core::{host_meminfo as meminfo, host_memory_limit as memory_limit};
