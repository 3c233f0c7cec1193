//! Freed host blocks kept for reuse, process-wide (the role of PyTorch's caching
//! allocators): a software device's allocation of a size seen before gets warm memory
//! instead of the system allocator's. Large blocks are where it matters: glibc maps them
//! fresh and unmaps them on free, so every reuse pays a page fault per 4 KiB — about
//! 1 ms per MiB allocated and freed on the development machine, against 30 µs to copy it.
//!
//! Blocks of at least [`MIN_CACHED`] bytes are rounded up to a size class (≤ 25 % larger)
//! and kept by class when freed, up to a byte budget (`GPUPORT_HOST_CACHE_BYTES`, read
//! once; default [`DEFAULT_BUDGET`], 0 turns the cache off). A block freed while the
//! cache is full goes back to the system. [`release_all`] empties it; an allocation the
//! system refuses empties it and tries again.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::ALIGNMENT;

/// Smaller blocks go straight to the system allocator (its free lists keep them warm).
pub const MIN_CACHED: usize = 64 << 10;
/// Bytes kept at most unless `GPUPORT_HOST_CACHE_BYTES` says otherwise.
pub const DEFAULT_BUDGET: usize = 1 << 30;
/// The environment variable that sets the budget in bytes.
pub const BUDGET_ENV: &str = "GPUPORT_HOST_CACHE_BYTES";

/// A block's address, kept while no one owns the block.
struct Free(NonNull<u8>);

// SAFETY: a cached block is plain memory owned by the cache alone; the pointer is only
// handed to the one allocation that takes it out.
unsafe impl Send for Free {}

#[derive(Default)]
struct Cache {
    /// Free blocks by class size.
    free: BTreeMap<usize, Vec<Free>>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { free: BTreeMap::new(), bytes: 0 });

fn cache() -> MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| match std::env::var(BUDGET_ENV) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            log::warn!("{BUDGET_ENV}={v:?} is not a byte count; using {DEFAULT_BUDGET}");
            DEFAULT_BUDGET
        }),
        Err(_) => DEFAULT_BUDGET,
    })
}

/// The size actually allocated for a request of `bytes` (≥ 1): itself below
/// [`MIN_CACHED`], else rounded up to a multiple of an eighth of the next power of two.
pub fn class_of(bytes: usize) -> Option<usize> {
    if bytes < MIN_CACHED {
        return Some(bytes);
    }
    let step = bytes.checked_next_power_of_two()? / 8;
    bytes.div_ceil(step).checked_mul(step)
}

/// A block of exactly `class` bytes: a cached one (holding what its last user left) or a
/// fresh zeroed one; `None` when the system refuses even after the cache is emptied.
pub fn take(class: usize) -> Option<NonNull<u8>> {
    if class >= MIN_CACHED {
        let mut c = cache();
        if let Some(block) = c.free.get_mut(&class).and_then(Vec::pop) {
            c.bytes -= class;
            return Some(block.0);
        }
    }
    let layout = Layout::from_size_align(class, ALIGNMENT).ok()?;
    // SAFETY: `layout` has a non-zero size (classes are at least one byte).
    NonNull::new(unsafe { alloc_zeroed(layout) }).or_else(|| {
        release_all();
        // SAFETY: as above.
        NonNull::new(unsafe { alloc_zeroed(layout) })
    })
}

/// Takes back a block of `class` bytes from [`take`]: kept while the budget allows,
/// else freed.
///
/// # Safety
/// `ptr` must come from [`take`] with this `class`, and no one may use it afterwards.
pub unsafe fn give_back(ptr: NonNull<u8>, class: usize) {
    if class >= MIN_CACHED {
        let mut c = cache();
        if c.bytes + class <= budget() {
            c.bytes += class;
            c.free.entry(class).or_default().push(Free(ptr));
            return;
        }
    }
    // SAFETY: the caller's contract: allocated by `take` with this layout, now unused.
    unsafe { dealloc(ptr.as_ptr(), Layout::from_size_align_unchecked(class, ALIGNMENT)) };
}

/// Frees every cached block; returns how many bytes went back to the system.
pub fn release_all() -> usize {
    let free = std::mem::take(&mut *cache());
    for (class, blocks) in free.free {
        for block in blocks {
            // SAFETY: cached blocks were allocated by `take` with this layout, and the
            // cache owned them alone.
            unsafe { dealloc(block.0.as_ptr(), Layout::from_size_align_unchecked(class, ALIGNMENT)) };
        }
    }
    free.bytes
}

/// Bytes the cache holds now.
pub fn cached_bytes() -> usize {
    cache().bytes
}

/// Serialises the tests that empty the cache with those that expect a block back.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_waste_at_most_a_quarter_and_keep_small_sizes() {
        assert_eq!(class_of(1), Some(1));
        assert_eq!(class_of(MIN_CACHED - 1), Some(MIN_CACHED - 1));
        assert_eq!(class_of(1 << 20), Some(1 << 20));
        assert_eq!(class_of((1 << 20) + 1), Some((1 << 20) + (1 << 18)));
        for bytes in [MIN_CACHED, 100_000, 3 << 20, (5 << 20) + 7, 1 << 30] {
            let class = class_of(bytes).unwrap();
            assert!(class >= bytes && class - bytes <= bytes / 4, "{bytes} → {class}");
        }
        assert_eq!(class_of(usize::MAX), None);
    }

    #[test]
    fn freed_blocks_are_reused_by_class() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let class = class_of(200_000).unwrap();
        let a = take(class).unwrap();
        // SAFETY: `a` came from `take(class)` and is not used again.
        unsafe { give_back(a, class) };
        assert!(cached_bytes() >= class);
        let b = take(class).unwrap();
        assert_eq!(a, b, "the freed block is handed out again");
        // SAFETY: as above.
        unsafe { give_back(b, class) };
    }
}
