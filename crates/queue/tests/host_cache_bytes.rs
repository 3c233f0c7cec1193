//! The host block cache's byte count, which its budget (`GPUPORT_HOST_CACHE_BYTES`) is
//! judged against: a block given back counts, the same block taken out again counts no
//! more, and emptying the cache returns exactly what it held. A count that drifts would
//! keep more than the budget (or less than it) without saying so. Its own test binary: the
//! cache is process-wide.

use gpuport_queue::memory::cache;

#[test]
fn the_cache_counts_exactly_the_bytes_it_holds() {
    // The default budget (a gigabyte), whatever the caller's environment says: read once,
    // at the first block given back, which is below. The binary's only test: no other
    // thread reads the environment.
    std::env::remove_var(cache::BUDGET_ENV);
    let class = cache::class_of(cache::MIN_CACHED * 2 + 1).unwrap();
    assert_eq!(cache::cached_bytes(), 0, "a fresh process caches nothing");
    let block = cache::take(class).expect("a fresh block");
    // SAFETY: a block of `class` bytes from `take`, not used after.
    unsafe { cache::give_back(block, class) };
    assert_eq!(cache::cached_bytes(), class, "a block given back counts");
    let again = cache::take(class).expect("the cached block");
    assert_eq!(again, block, "the same class: the cached block");
    assert_eq!(cache::cached_bytes(), 0, "a block taken out counts no more");
    // SAFETY: as above.
    unsafe { cache::give_back(again, class) };
    assert_eq!(cache::release_all(), class, "emptying returns what the cache held");
    assert_eq!(cache::cached_bytes(), 0);
}
