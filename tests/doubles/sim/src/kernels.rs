//! The kernels the double can run: CPU implementations of gpuport's own test kernels, with
//! the launch geometry given. Any other entry point of a loaded module is `NOT_FOUND` when
//! looked up: the double cannot run code it has only the binary of.
//!
//! `fill_u32(ptr: *mut u32, n: u32, value: u32)` — as gpuport's PTX (`FILL_U32_PTX`) and
//! its AMD code objects (`fill_u32.cl`): thread `i = blockIdx.x * blockDim.x +
//! threadIdx.x` stores `value` at `ptr[i]` when `i < n`. So the elements written are
//! `[0, min(n, gridDim.x * blockDim.x))`; the y and z dimensions only repeat the work.

/// A kernel the double runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `fill_u32(ptr, n, value)`.
    FillU32,
}

/// The kernel called `name`, if the double can run it.
pub fn by_name(name: &str) -> Option<Kernel> {
    match name {
        "fill_u32" => Some(Kernel::FillU32),
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
    pub unsafe fn read(params: *const *const std::ffi::c_void, grid_x: u32, block_x: u32) -> FillLaunch {
        // SAFETY: the caller's contract: the kernel's three parameters, by pointer.
        let (ptr, n, value) = unsafe {
            (
                (*params).cast::<u64>().read_unaligned(),
                (*params.add(1)).cast::<u32>().read_unaligned(),
                (*params.add(2)).cast::<u32>().read_unaligned(),
            )
        };
        let threads = u64::from(grid_x) * u64::from(block_x);
        FillLaunch { ptr, count: u64::from(n).min(threads), value }
    }
}
