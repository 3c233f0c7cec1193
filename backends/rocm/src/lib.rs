//! # gpuport-rocm
//!
//! AMD GPUs through the HIP runtime API, loaded at run time with `libloading`: building
//! needs no ROCm. Three layers: `sys` (gpuport's own declarations of the HIP subset it
//! uses), `result` (`hipError_t` → `gpuport_core::Error` with `hipGetErrorName` /
//! `hipGetErrorString`), and the trait implementations ([`RocmBackend`], [`RocmDevice`],
//! [`RocmStream`], [`RocmEvent`]).
//!
//! Loading: `GPUPORT_HIP_LIBRARY`, else `libamdhip64.so.7`, `.so.6`, `.so.5`, a future
//! `.so.8` reporting a HIP major gpuport knows, `libamdhip64.so` — by soname, then in the
//! ROCm folders ([`library_candidates`], which also finds `libhiprtc` and `librccl`);
//! every attempt recorded. `hipInit` and the version getters must exist;
//! the other required symbols resolve once (through `hipGetProcAddress` on ROCm ≥ 6.2,
//! else `dlsym`). `hipMallocAsync` / `hipFreeAsync` / `hipLaunchHostFunc` /
//! `hipMemGetAddressRange` resolve lazily: stream-ordered allocation is `Unsupported`
//! without the first two, host callbacks fall back to `hipStreamAddCallback` (ROCm 5.2 has
//! no `hipLaunchHostFunc`), and pointer attributes report no allocation range without the
//! last.

#[cfg(all(test, feature = "hip-sys"))]
mod abi_check;
mod bundle;
mod calls;
mod comgr;
mod context;
mod device;
mod event;
#[cfg(test)]
mod header_check;
mod hiprtc;
mod loader;
mod locate;
mod memory;
mod module;
mod result;
mod stream;
mod sys;
pub mod target;

use std::sync::Arc;

use gpuport_core::{Backend, BackendKind, DeviceInfo, DlDeviceType, DlpackDevices, LoadOptions, Result};

pub use bundle::offload_bundle;
pub use device::RocmDevice;
pub use event::RocmEvent;
pub use hiprtc::{compile_for_arch, HIPRTC_ENV};
pub use loader::{
    format_version, inspect_library, load_attempted, unknown_major, LibraryReport, DEFAULT_NAMES, LIBRARY_ENV,
};
pub use locate::{library_candidates, HIPRTC_NAMES, RCCL_NAMES};
pub use stream::RocmStream;

/// The ROCm backend: the loaded HIP runtime.
#[derive(Clone)]
pub struct RocmBackend {
    rt: Arc<sys::Runtime>,
}

impl RocmBackend {
    /// The loaded runtime's `hipRuntimeGetVersion` (`70253211` for 7.2.53211): the version
    /// whose behaviour gpuport follows (stream handles, lookup, memory-type numbering).
    pub fn runtime_version(&self) -> i32 {
        self.rt.runtime_version
    }
}

impl Backend for RocmBackend {
    const KIND: BackendKind = BackendKind::Rocm;
    // HIP has managed memory, but DLPack has no ROCm managed type: it is not exported as one.
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::ROCM, pinned_host: Some(DlDeviceType::ROCM_HOST), managed: None };
    type Device = RocmDevice;
    type Stream = RocmStream;
    type Event = RocmEvent;

    /// With `opts.library_path` the given file is loaded (uncached); otherwise the
    /// process-wide runtime (`GPUPORT_HIP_LIBRARY`, then the default names).
    fn load(opts: &LoadOptions) -> Result<Self> {
        let rt = match &opts.library_path {
            Some(path) => loader::load(Some(path))?,
            None => loader::runtime()?,
        };
        Ok(RocmBackend { rt })
    }

    fn version(&self) -> String {
        format!(
            "HIP runtime {}, driver {} ({})",
            loader::format_version(self.rt.runtime_version),
            loader::format_version(self.rt.driver_version),
            self.rt.library
        )
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let count = result::device::count(&self.rt.api)?;
        gpuport_vendor_kit::device_list::device_infos(BackendKind::Rocm, count.max(0) as u32, |i| {
            device::info(&self.rt, i, target::of_device(&self.rt, i).as_ref())
        })
    }

    fn open(&self, ordinal: u32) -> Result<RocmDevice> {
        Ok(RocmDevice(context::DeviceCtx::open(&self.rt, ordinal)?))
    }
}

/// The entry points the backend needs to load (a missing one makes it unavailable, with
/// `MissingSymbol`); others resolve lazily and are `Unsupported` where missing. Vendor
/// declarations stay private to this crate; only their names are public.
pub fn required_symbols() -> &'static [&'static str] {
    sys::Api::REQUIRED
}
