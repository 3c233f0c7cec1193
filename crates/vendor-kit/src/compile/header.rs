//! gpuport's portability header, `<gpuport/kernel.h>` (`kernel.h` beside this file): what
//! differs between NVRTC and hiprtc for one kernel source — which compiler is running, the
//! kernel markers, fixed-width integers, index helpers, warp size, shuffles, atomics. Every
//! compilation gets it as an in-memory header (`docs/kernels.md` lists the dialect).

/// The name kernels include it by.
pub const KERNEL_HEADER_NAME: &str = "gpuport/kernel.h";

/// Its text.
pub const KERNEL_HEADER: &str = include_str!("kernel.h");
