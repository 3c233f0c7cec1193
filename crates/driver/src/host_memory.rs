//! How much memory the host has: the bound every host-side allocation (the host backend's,
//! and vendors' pinned memory) is checked against before asking the allocator, since an
//! over-committing kernel would accept an absurd request and kill the process later.

/// `(MemTotal, SwapTotal)` in bytes from `/proc/meminfo`; `(u64::MAX / 2, 0)` where it
/// cannot be read.
pub fn host_meminfo() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    };
    match field("MemTotal:") {
        Some(total) => (total, field("SwapTotal:").unwrap_or(0)),
        None => (u64::MAX / 2, 0),
    }
}

/// Physical memory plus swap, in bytes: the most one host allocation can get. Read once
/// per process, so allocation paths never read `/proc`.
pub fn host_memory_limit() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let (total, swap) = host_meminfo();
        total.saturating_add(swap)
    })
}
