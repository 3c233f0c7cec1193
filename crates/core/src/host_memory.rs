//! How much memory the host has: the bound every host-side allocation (a software device's,
//! and vendors' pinned memory) is checked against before asking the allocator, since an
//! over-committing kernel would accept an absurd request and kill the process later. Here,
//! beside the contract both kits build on, so neither kit depends on the other for it.

/// `(total RAM, total swap)` in bytes, from `sysinfo(2)` (no `/proc` needed: containers
/// and chroots often lack it); `None` where the system cannot say. Never a sentinel that
/// could be shown as a size.
pub fn host_meminfo() -> Option<(u64, u64)> {
    // Miri has no shim for `sysinfo(2)`: a fixed machine of 16 GiB and no swap stands in,
    // large enough for every test's allocations and small enough that the tests of
    // absurd requests still see them refused.
    #[cfg(miri)]
    {
        Some((16 << 30, 0))
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: an all-zero `sysinfo` is a valid value of this plain C struct.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable `struct sysinfo`.
        if unsafe { libc::sysinfo(&mut info) } != 0 {
            return None;
        }
        let unit = u64::from(info.mem_unit.max(1));
        // `c_ulong` is 32 bits on 32-bit Linux: the conversion is not useless there.
        #[allow(clippy::useless_conversion)]
        Some((u64::from(info.totalram).saturating_mul(unit), u64::from(info.totalswap).saturating_mul(unit)))
    }
    #[cfg(not(any(target_os = "linux", miri)))]
    {
        None
    }
}

/// Physical memory plus swap, in bytes: the most one host allocation can get. Read once
/// per process, so allocation paths never read `/proc`.
pub fn host_memory_limit() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    // Unknown: no limit of gpuport's own (the allocator still refuses what it cannot give).
    *LIMIT.get_or_init(|| host_meminfo().map_or(u64::MAX, |(total, swap)| total.saturating_add(swap)))
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn memory_is_read_without_proc() {
        let (total, _swap) = super::host_meminfo().expect("sysinfo answers on Linux");
        assert!((64 << 20..1 << 50).contains(&total), "an implausible RAM size: {total}");
        // The same figure /proc/meminfo gives, where it is mounted (within a page's rounding).
        if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
            let kb: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|r| r.split_whitespace().next()?.parse().ok())
                .expect("MemTotal");
            assert!(total.abs_diff(kb * 1024) <= 1 << 20, "sysinfo {total} vs /proc {}", kb * 1024);
        }
    }
}
