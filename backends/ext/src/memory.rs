//! The ext device's own address space. Every allocation gets an address in a range no
//! host pointer uses (`0xE0_0000_0000_00 + ordinal << 40 …`); the bytes live in a hidden
//! host allocation reached only through the device's copies. Nothing outside this module
//! can turn an ext address into a host pointer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, MemoryKind, PointerAttributes, Release, Result};
use gpuport_queue::memory::HostAllocation;

/// Alignment of ext allocations.
const ALIGNMENT: u64 = 256;
/// Unmapped bytes left between allocations, so an off-by-one never lands in a neighbour.
const GUARD: u64 = 4096;

struct Region {
    len: usize,
    /// The hidden host allocation (in no pointer registry: it is not host memory to
    /// anyone outside this module); dropping the region frees it.
    backing: HostAllocation,
}

/// One ext device's memory: an address allocator, a capacity, and the map from ext
/// addresses to hidden backing memory.
pub struct AddressSpace {
    device: DeviceId,
    next: AtomicU64,
    end: u64,
    capacity: u64,
    used: AtomicU64,
    regions: RwLock<BTreeMap<u64, Region>>,
}

struct ExtRelease(Arc<AddressSpace>);

impl Release for ExtRelease {
    fn release(&mut self, addr: u64, len: usize) -> Result<()> {
        let region = self.0.regions.write().unwrap_or_else(|p| p.into_inner()).remove(&addr);
        self.0.used.fetch_sub(len as u64, Ordering::SeqCst);
        // Dropping the region frees its backing memory.
        drop(region);
        Ok(())
    }
}

impl AddressSpace {
    /// The address space of ext device `ordinal`, with `capacity` bytes of memory.
    pub fn new(device: DeviceId, capacity: u64) -> Arc<Self> {
        let base = (0xE0u64 + u64::from(device.ordinal)) << 40;
        Arc::new(AddressSpace {
            device,
            next: AtomicU64::new(base),
            end: base + (1 << 40),
            capacity,
            used: AtomicU64::new(0),
            regions: RwLock::new(BTreeMap::new()),
        })
    }

    /// Device memory capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Allocates `bytes` of device memory.
    pub fn allocate(self: &Arc<Self>, bytes: usize) -> Result<Buffer> {
        let oom = || Error::OutOfMemory { device: self.device, bytes };
        let desc = |addr| BufferDesc {
            addr,
            len: bytes,
            device: self.device,
            memory: MemoryKind::Device,
            host_accessible: false,
        };
        if bytes == 0 {
            // SAFETY: a zero-length buffer describes no memory.
            return unsafe { Buffer::from_borrowed(desc(0), None) };
        }
        let want = bytes as u64;
        if self.used.fetch_add(want, Ordering::SeqCst).saturating_add(want) > self.capacity {
            self.used.fetch_sub(want, Ordering::SeqCst);
            return Err(oom());
        }
        let reserve = want.div_ceil(ALIGNMENT) * ALIGNMENT + GUARD;
        let addr = self.next.fetch_add(reserve, Ordering::SeqCst);
        let backing = match HostAllocation::new(self.device, bytes, self.capacity) {
            Ok(b) if addr.saturating_add(reserve) <= self.end => b,
            _ => {
                self.used.fetch_sub(want, Ordering::SeqCst);
                return Err(oom());
            }
        };
        self.regions.write().unwrap_or_else(|p| p.into_inner()).insert(addr, Region { len: bytes, backing });
        // SAFETY: the ext address range is reserved for this allocation until
        // `ExtRelease` runs; it is not host-accessible, so nothing dereferences it directly.
        unsafe { Buffer::from_owned(desc(addr), Box::new(ExtRelease(self.clone()))) }
    }

    /// The hidden host pointer behind `len` bytes at `offset` of an ext buffer of this
    /// device. Checks the range twice: against the buffer (which may be a borrowed,
    /// imported one whose length is only its producer's claim), and against the live
    /// allocation it lies in, whose backing is exactly that long — so no claim reaches
    /// bytes the device did not allocate.
    pub fn translate(&self, buffer: &Buffer, offset: usize, len: usize) -> Result<*mut u8> {
        let addr = buffer.range_addr(offset, len)?;
        if len == 0 {
            return Ok(std::ptr::NonNull::dangling().as_ptr());
        }
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let (base, region) =
            regions.range(..=addr).next_back().ok_or_else(|| self.not_allocated(&regions, addr, len))?;
        let at = addr - base;
        if at.checked_add(len as u64).is_none_or(|end| end > region.len as u64) {
            return Err(self.not_allocated(&regions, addr, len));
        }
        // In bounds of the backing, as checked just above.
        Ok(region.backing.ptr().wrapping_add(at as usize))
    }

    /// The error for a range that no live allocation of this device holds whole.
    fn not_allocated(&self, regions: &BTreeMap<u64, Region>, addr: u64, len: usize) -> Error {
        let end = addr.saturating_add(len as u64);
        let near = match regions.range(..=addr).next_back() {
            Some((&base, region)) if addr < base + region.len as u64 => {
                format!("; the allocation there is {base:#x}..{:#x} ({} bytes)", base + region.len as u64, region.len)
            }
            _ => String::new(),
        };
        Error::invalid_handle(format!(
            "{addr:#x}..{end:#x} ({len} bytes) is not inside a live allocation of {}{near}",
            self.device
        ))
    }

    /// What this device knows about `addr`.
    pub fn attributes(&self, addr: u64) -> PointerAttributes {
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        match regions.range(..=addr).next_back() {
            Some((&base, region)) if addr < base + region.len as u64 => PointerAttributes {
                device: Some(self.device),
                memory: MemoryKind::Device,
                host_accessible: false,
                device_accessible: true,
                managed: false,
                allocation: Some((base, region.len)),
            },
            _ => PointerAttributes::unregistered(),
        }
    }
}
