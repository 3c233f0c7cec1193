//! What the benchmarks share: floors' buffers.
// Each benchmark uses part of this module.
#![allow(dead_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// A page-aligned byte buffer for floors. Not a `Vec`: where a `Vec` lands decides how
/// fast `memcpy` is on some CPUs — on the development machine's AMD EPYC, copying between
/// addresses 16 bytes apart modulo 4 KiB runs 20× slower (glibc's `rep movsb` path), and
/// a floor must not be a straw man. gpuport's host blocks are 256-byte aligned.
pub struct PageBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl PageBuf {
    /// `n` (≥ 1) bytes, each `fill`.
    pub fn new(n: usize, fill: u8) -> PageBuf {
        let layout = Layout::from_size_align(n, 4096).expect("a valid size");
        // SAFETY: `n` ≥ 1 (every caller asks for a real size).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for a floor buffer");
        // SAFETY: `n` bytes just allocated.
        unsafe { ptr.write_bytes(fill, n) };
        PageBuf { ptr, layout }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `layout.size()` initialised bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The bytes as `f32`s (page alignment satisfies `f32`'s).
    pub fn as_f32(&self) -> &[f32] {
        // SAFETY: aligned, initialised, and any bit pattern is an `f32`.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<f32>(), self.layout.size() / 4) }
    }

    /// [`PageBuf::as_f32`], mutably.
    pub fn as_f32_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<f32>(), self.layout.size() / 4) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
