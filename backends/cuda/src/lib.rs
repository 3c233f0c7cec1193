//! # gpuport-cuda
//!
//! NVIDIA GPUs through the CUDA **driver** API, loaded at run time with `libloading`:
//! building needs no CUDA toolkit, driver or GPU. Three layers, as in cudarc:
//! `sys` (gpuport's function table over cudarc's ABI types), `result` (each status
//! checked and mapped to `gpuport_core::Error` with the driver's own name and text), and
//! the trait implementations ([`CudaBackend`], [`CudaDevice`], [`CudaStream`],
//! [`CudaEvent`]).
//!
//! Loading: `GPUPORT_CUDA_LIBRARY`, else `libcuda.so.1`, `libcuda.so` (`nvcuda.dll` on
//! Windows); every attempt is recorded. `cuInit` and `cuDriverGetVersion` must exist;
//! the driver must be CUDA 11.4 or newer; the other required symbols resolve through
//! `cuGetProcAddress` at the 12.0 ABI; `cuMemAllocAsync` / `cuMemFreeAsync` resolve
//! lazily and are `Unsupported` when missing. Nothing panics when the library, a symbol
//! or a device is missing.

mod calls;
mod context;
mod device;
mod event;
mod loader;
mod memory;
mod module;
mod nvrtc;
mod result;
mod stream;
mod sys;

use std::sync::Arc;

use gpuport_core::{Backend, BackendKind, DeviceInfo, DlDeviceType, DlpackDevices, LoadOptions, Result};

pub use device::CudaDevice;
pub use event::CudaEvent;
pub use gpuport_vendor_kit::compile::{Compiled, ImageKind};
pub use loader::{inspect_library, load_attempted, LibraryReport, DEFAULT_NAMES, LIBRARY_ENV};
pub use nvrtc::{add_python_site_packages, compile_for_arch, nvrtc_candidates, NVRTC_ENV, NVRTC_NAMES};
pub use stream::CudaStream;
pub use sys::format_version;

/// The CUDA backend: the loaded driver.
#[derive(Clone)]
pub struct CudaBackend {
    driver: Arc<sys::Driver>,
}

impl CudaBackend {
    /// The driver version (`12040` for 12.4).
    pub fn driver_version(&self) -> i32 {
        self.driver.driver_version
    }
}

impl Backend for CudaBackend {
    const KIND: BackendKind = BackendKind::Cuda;
    const DLPACK: DlpackDevices = DlpackDevices {
        device: DlDeviceType::CUDA,
        pinned_host: Some(DlDeviceType::CUDA_HOST),
        managed: Some(DlDeviceType::CUDA_MANAGED),
    };
    type Device = CudaDevice;
    type Stream = CudaStream;
    type Event = CudaEvent;

    /// With `opts.library_path` the given file is loaded (uncached: for tests and tools);
    /// otherwise the process-wide driver (`GPUPORT_CUDA_LIBRARY`, then the default names).
    fn load(opts: &LoadOptions) -> Result<Self> {
        let driver = match &opts.library_path {
            Some(path) => loader::load(Some(path))?,
            None => loader::driver()?,
        };
        Ok(CudaBackend { driver })
    }

    fn version(&self) -> String {
        format!("CUDA driver {} ({})", sys::format_version(self.driver.driver_version), self.driver.library)
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let count = result::device::count(&self.driver.api)?;
        gpuport_vendor_kit::device_list::device_infos(BackendKind::Cuda, count.max(0) as u32, |i| {
            device::info(&self.driver, i)
        })
    }

    fn open(&self, ordinal: u32) -> Result<CudaDevice> {
        Ok(CudaDevice(context::DeviceCtx::open(&self.driver, ordinal)?))
    }
}

/// The entry points the backend needs to load (a missing one makes it unavailable, with
/// `MissingSymbol`); others resolve lazily and are `Unsupported` where missing. Vendor
/// declarations stay private to this crate; only their names are public.
pub fn required_symbols() -> &'static [&'static str] {
    sys::Api::REQUIRED
}

/// A small kernel every CUDA GPU runs, for tests and benchmarks (the conformance suite's
/// test kernel): `fill_u32(ptr: *mut u32, n: u32, value: u32)` sets `ptr[0..n]` to `value`,
/// one element per thread. PTX ISA 7.0 for sm_52, JIT-compiled by any driver ≥ 11.0 for
/// the GPU it runs on.
pub const FILL_U32_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry fill_u32(
    .param .u64 fill_u32_param_0,
    .param .u32 fill_u32_param_1,
    .param .u32 fill_u32_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [fill_u32_param_0];
    ld.param.u32 %r1, [fill_u32_param_1];
    ld.param.u32 %r2, [fill_u32_param_2];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
DONE:
    ret;
}
"#;
