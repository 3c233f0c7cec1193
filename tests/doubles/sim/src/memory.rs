//! Simulated device memory and registered host memory.
//!
//! Each device owns an address range reserved with `PROT_NONE`: its addresses are handed
//! out as device pointers, and any host load or store through one faults at once (as it
//! would on a discrete GPU). The bytes live in a private shadow mapping of the same size
//! that only the double's stream threads touch. Pinned and managed memory are ordinary
//! host mappings, registered so pointer attributes and range checks know them.

use std::collections::BTreeMap;

/// The allocation granularity (and alignment) of device memory, as `cuMemAlloc` gives.
pub const ALIGN: usize = 256;

/// A device's address range and its shadow.
pub struct DeviceSpace {
    /// First device address.
    pub base: usize,
    /// Bytes in the range.
    pub size: usize,
    shadow: usize,
    /// Free ranges: start offset → length.
    free: BTreeMap<usize, usize>,
}

// SAFETY: the space is plain addresses; the mappings live until the process exits.
unsafe impl Send for DeviceSpace {}

fn map(size: usize, prot: libc::c_int) -> Option<usize> {
    // SAFETY: an anonymous private mapping at an address the kernel picks; nothing else
    // refers to it yet.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl DeviceSpace {
    /// Reserves `size` bytes of device addresses and their shadow.
    pub fn new(size: usize) -> Option<DeviceSpace> {
        let base = map(size, libc::PROT_NONE)?;
        let shadow = map(size, libc::PROT_READ | libc::PROT_WRITE)?;
        let mut free = BTreeMap::new();
        free.insert(0, size);
        Some(DeviceSpace { base, size, shadow, free })
    }

    /// Whether `addr` lies in the range.
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.size
    }

    /// The shadow address of device address `addr` (inside the range).
    pub fn shadow_of(&self, addr: usize) -> *mut u8 {
        (self.shadow + (addr - self.base)) as *mut u8
    }

    /// First fit; `None` when no free range is large enough.
    pub fn alloc(&mut self, bytes: usize) -> Option<usize> {
        let len = bytes.checked_add(ALIGN - 1)? / ALIGN * ALIGN;
        let (&start, &free_len) = self.free.iter().find(|(_, &l)| l >= len)?;
        self.free.remove(&start);
        if free_len > len {
            self.free.insert(start + len, free_len - len);
        }
        // Fresh device memory is not cleared (cuMemAlloc and hipMalloc promise nothing):
        // fill it with a pattern so code that assumes zeroes is caught. Large blocks get
        // the pattern on their first 1 MiB only, to keep the process small.
        // SAFETY: the shadow range belongs to this allocation.
        unsafe { std::ptr::write_bytes((self.shadow + start) as *mut u8, 0xA5, len.min(1 << 20)) };
        Some(self.base + start)
    }

    /// Gives `[addr, addr + bytes)` back (bytes as allocated).
    pub fn release(&mut self, addr: usize, bytes: usize) {
        let mut start = addr - self.base;
        let mut len = bytes.div_ceil(ALIGN) * ALIGN;
        // Hand whole pages back to the kernel so freed memory costs nothing.
        let pg = page();
        let lo = (self.shadow + start).div_ceil(pg) * pg;
        let hi = (self.shadow + start + len) / pg * pg;
        if hi > lo {
            // SAFETY: whole pages inside the shadow range of this (freed) allocation.
            unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
        }
        // Merge with the neighbours.
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back() {
            if prev + prev_len == start {
                self.free.remove(&prev);
                start = prev;
                len += prev_len;
            }
        }
        if let Some(&next_len) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += next_len;
        }
        self.free.insert(start, len);
    }
}

/// A block of host memory (pinned or managed), mapped for its allocation.
pub struct HostBlock {
    /// Its address.
    pub addr: usize,
    /// Bytes mapped.
    pub mapped: usize,
}

impl HostBlock {
    /// Maps at least `bytes` bytes.
    pub fn new(bytes: usize) -> Option<HostBlock> {
        let pg = page();
        let mapped = bytes.checked_add(pg - 1)? / pg * pg;
        Some(HostBlock { addr: map(mapped.max(pg), libc::PROT_READ | libc::PROT_WRITE)?, mapped: mapped.max(pg) })
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` and nothing refers to it any more (the
        // machine drops a block only once no queued work uses it).
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_merges_freed_ranges() {
        let mut s = DeviceSpace::new(1 << 20).unwrap();
        let a = s.alloc(100).unwrap();
        let b = s.alloc(1000).unwrap();
        assert_eq!(a, s.base);
        assert_eq!(b, s.base + ALIGN);
        assert!(s.alloc(1 << 20).is_none());
        s.release(a, 100);
        s.release(b, 1000);
        assert_eq!(s.alloc(1 << 20), Some(s.base), "the whole range is free again");
        // SAFETY: a shadow address inside the range, written by the double only.
        unsafe { *s.shadow_of(s.base + 8) = 1 };
        assert!(s.contains(s.base) && !s.contains(s.base + (1 << 20)));
    }
}
