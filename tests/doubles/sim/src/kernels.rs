//! The kernels the double can run: CPU implementations of gpuport's own kernels, with
//! the launch geometry given. Any other entry point of a loaded module is `NOT_FOUND` when
//! looked up: the double cannot run code it has only the binary of.
//!
//! - `fill_u32(ptr: *mut u32, n: u32, value: u32)` — gpuport's test kernel (its PTX
//!   `FILL_U32_PTX`, its AMD code objects `fill_u32.cl`, and `fill_and_scale.cu` compiled
//!   from source): thread `i = blockIdx.x * blockDim.x + threadIdx.x` stores `value` at
//!   `ptr[i]` when `i < n`. So the elements written are `[0, min(n, gridDim.x *
//!   blockDim.x))`; the y and z dimensions only repeat the work.
//! - `gpuport_strided_copy_<N>(src, dst, n: u64, ndim: u32, shape[8]: u64,
//!   src_strides[8]: i64, dst_strides[8]: i64)` — the runtime's copy kernels
//!   (`strided_copy.cu`), 28 parameters: the `n` elements of the `ndim`-axis view, `N`
//!   bytes each, from `src` to `dst` in C order, strides in elements. They loop over the
//!   elements, so every launch geometry copies all of them.

use std::ffi::c_void;

/// A kernel the double runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `fill_u32(ptr, n, value)`.
    FillU32,
    /// `gpuport_strided_copy_<item>`.
    StridedCopy {
        /// The element size in bytes.
        item: usize,
    },
}

/// The kernel called `name`, if the double can run it.
pub fn by_name(name: &str) -> Option<Kernel> {
    match name {
        "fill_u32" => Some(Kernel::FillU32),
        "gpuport_strided_copy_1" => Some(Kernel::StridedCopy { item: 1 }),
        "gpuport_strided_copy_2" => Some(Kernel::StridedCopy { item: 2 }),
        "gpuport_strided_copy_4" => Some(Kernel::StridedCopy { item: 4 }),
        "gpuport_strided_copy_8" => Some(Kernel::StridedCopy { item: 8 }),
        "gpuport_strided_copy_16" => Some(Kernel::StridedCopy { item: 16 }),
        _ => None,
    }
}

/// A launch of `fill_u32`, its arguments read at launch (the driver copies them).
#[derive(Debug, Clone, Copy)]
pub struct FillLaunch {
    /// Device address of the first element.
    pub ptr: u64,
    /// Elements the kernel may write: `min(n, gridDim.x * blockDim.x)`.
    pub count: u64,
    /// The value stored.
    pub value: u32,
}

impl FillLaunch {
    /// Reads the three arguments.
    ///
    /// # Safety
    /// `params` points at three pointers, to a `u64`, a `u32` and a `u32`.
    pub unsafe fn read(params: *const *const c_void, grid_x: u32, block_x: u32) -> FillLaunch {
        // SAFETY: the caller's contract: the kernel's three parameters, by pointer.
        let (ptr, n, value) = unsafe { (arg::<u64>(params, 0), arg::<u32>(params, 1), arg::<u32>(params, 2)) };
        let threads = u64::from(grid_x) * u64::from(block_x);
        FillLaunch { ptr, count: u64::from(n).min(threads), value }
    }
}

/// The most axes a copy kernel takes.
pub const COPY_RANK: usize = 8;

/// A launch of a copy kernel, its arguments read at launch.
#[derive(Debug, Clone)]
pub struct StridedCopyLaunch {
    /// Device address of the source's element 0.
    pub src: u64,
    /// Device address of the destination's element 0.
    pub dst: u64,
    /// Bytes per element.
    pub item: usize,
    /// The extents of the axes, outermost first (`ndim` of them).
    pub shape: Vec<u64>,
    /// The source's strides, in elements.
    pub src_strides: Vec<i64>,
    /// The destination's strides, in elements.
    pub dst_strides: Vec<i64>,
}

impl StridedCopyLaunch {
    /// Reads the 28 arguments; an `ndim` outside 1–8 or an `n` other than the shape's
    /// element count is described (the kernel would copy elements outside the view).
    ///
    /// # Safety
    /// `params` points at 28 pointers, to the kernel's parameters in order.
    pub unsafe fn read(params: *const *const c_void, item: usize) -> Result<StridedCopyLaunch, String> {
        // SAFETY: the caller's contract: 28 parameters, by pointer (the strides are read
        // as `u64` and taken back as the `i64` they are).
        let (src, dst, n, ndim, rest) = unsafe {
            (
                arg::<u64>(params, 0),
                arg::<u64>(params, 1),
                arg::<u64>(params, 2),
                arg::<u32>(params, 3),
                std::array::from_fn::<u64, { 3 * COPY_RANK }, _>(|i| arg::<u64>(params, 4 + i)),
            )
        };
        let ndim = ndim as usize;
        if !(1..=COPY_RANK).contains(&ndim) {
            return Err(format!("ndim = {ndim}: the copy kernels take 1 to {COPY_RANK} axes"));
        }
        let shape = rest[..ndim].to_vec();
        let src_strides = rest[COPY_RANK..COPY_RANK + ndim].iter().map(|&w| w as i64).collect();
        let dst_strides = rest[2 * COPY_RANK..2 * COPY_RANK + ndim].iter().map(|&w| w as i64).collect();
        let count = shape.iter().try_fold(1u64, |a, &b| a.checked_mul(b));
        if count != Some(n) {
            return Err(format!("n = {n} elements for a view of shape {shape:?}"));
        }
        Ok(StridedCopyLaunch { src, dst, item, shape, src_strides, dst_strides })
    }

    /// The byte range one side's elements reach, relative to its element 0:
    /// `(lowest, highest + item)`; `None` on overflow.
    pub fn reach(&self, strides: &[i64]) -> Option<(i64, i64)> {
        let item = i64::try_from(self.item).ok()?;
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&n, &s) in self.shape.iter().zip(strides) {
            let last = i64::try_from(n).ok()?.checked_sub(1)?.checked_mul(s)?.checked_mul(item)?;
            if last < 0 {
                lo = lo.checked_add(last)?;
            } else {
                hi = hi.checked_add(last)?;
            }
        }
        Some((lo, hi.checked_add(item)?))
    }

    /// Every element's byte offset on both sides, relative to element 0, in C order.
    pub fn for_each_element(&self, mut f: impl FnMut(i64, i64)) {
        let item = self.item as i64;
        let count: u64 = self.shape.iter().product();
        for mut i in 0..count {
            let (mut s, mut d) = (0i64, 0i64);
            for axis in (0..self.shape.len()).rev() {
                let c = (i % self.shape[axis]) as i64;
                i /= self.shape[axis];
                s += c * self.src_strides[axis];
                d += c * self.dst_strides[axis];
            }
            f(s * item, d * item);
        }
    }
}

/// Parameter `i` of a launch.
///
/// # Safety
/// `params` holds at least `i + 1` pointers, the `i`th to a readable `T`.
unsafe fn arg<T: Copy>(params: *const *const c_void, i: usize) -> T {
    // SAFETY: the caller's contract.
    unsafe { (*params.add(i)).cast::<T>().read_unaligned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(shape: &[u64], src: &[i64], dst: &[i64], item: usize) -> StridedCopyLaunch {
        StridedCopyLaunch {
            src: 0,
            dst: 0,
            item,
            shape: shape.to_vec(),
            src_strides: src.to_vec(),
            dst_strides: dst.to_vec(),
        }
    }

    #[test]
    fn a_copy_reaches_its_elements_bytes_on_both_sides() {
        // Every 8th of 4 f32: bytes 0..100 on the source, 0..16 packed.
        let l = launch(&[4], &[8], &[1], 4);
        assert_eq!(l.reach(&l.src_strides), Some((0, 100)));
        assert_eq!(l.reach(&l.dst_strides), Some((0, 16)));
        // Reversed rows reach below element 0.
        let l = launch(&[2, 3], &[3, -1], &[3, 1], 2);
        assert_eq!(l.reach(&l.src_strides), Some((-4, 8)));
        let mut seen = Vec::new();
        l.for_each_element(|s, d| seen.push((s, d)));
        assert_eq!(seen, [(0, 0), (-2, 2), (-4, 4), (6, 6), (4, 8), (2, 10)]);
    }
}
