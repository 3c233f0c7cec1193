//! Host memory about to be filled from a device. A fresh allocation of tens of MiB is
//! mapped page by page on first touch: a 64 MiB read from an H100 into a new `Vec` took
//! 58 ms on a virtual machine, 51 ms of it in 16,384 page faults (the same read into
//! memory already touched: 7 ms). Large buffers are therefore offered to the kernel as
//! transparent huge pages before anything writes them, as NumPy does for its arrays: 2 MiB
//! pages, 512 times fewer faults. A hint only — where huge pages are off, or on a system
//! without them, nothing changes.

use gpuport_core::Element;

/// Below this, a buffer spans too few 2 MiB pages for the advice to pay for its system
/// call (NumPy's threshold too).
const ADVISE_FROM: usize = 4 << 20;

/// `len` zero bytes, advised as huge pages when large, for a device to write into.
pub(crate) fn zeroed_bytes(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    advise_huge_pages(&mut v);
    v
}

/// `len` zeroed elements, as [`zeroed_bytes`].
pub(crate) fn zeroed_elements<T: Element>(len: usize) -> Vec<T> {
    let mut v = gpuport_core::zeroed_vec::<T>(len);
    advise_huge_pages(gpuport_core::as_bytes_mut(&mut v));
    v
}

/// Advises the whole pages inside `bytes` as huge-page candidates (from [`ADVISE_FROM`]
/// bytes on). Best effort: a refusal (huge pages not built in, an old kernel) is ignored,
/// since the memory works the same either way.
fn advise_huge_pages(bytes: &mut [u8]) {
    if bytes.len() < ADVISE_FROM {
        return;
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        const PAGE: usize = 4096;
        let start = bytes.as_mut_ptr();
        let skip = start.align_offset(PAGE).min(bytes.len());
        let len = (bytes.len() - skip) & !(PAGE - 1);
        // SAFETY: the range lies inside `bytes`, which this function borrows mutably; the
        // advice changes how the kernel backs the pages, never their contents.
        let _ = unsafe { libc::madvise(start.add(skip).cast(), len, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advised_memory_is_zeroed_and_sized() {
        for len in [0, 5, ADVISE_FROM - 1, ADVISE_FROM + 4097] {
            let v = zeroed_bytes(len);
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&b| b == 0));
        }
        let v = zeroed_elements::<f64>((ADVISE_FROM >> 3) + 3);
        assert!(v.len() == (ADVISE_FROM >> 3) + 3 && v.iter().all(|&x| x == 0.0));
    }
}
