//! # gpuport-vendor-port-template
//!
//! A gpuport port over a vendor runtime library — the shape of a port to a real GPU's
//! runtime. The vendor here is `fakevendor` (`fake-runtime/`): a C API with status codes,
//! opaque handles and one entry symbol handing out a function table, loaded at run time.
//! The port is only what is the vendor's own; the vendor kit (`gpuport-vendor-kit`) writes the
//! rest once, for CUDA, ROCm and this port alike:
//!
//! | file | step | what it holds |
//! | --- | --- | --- |
//! | `sys.rs` | B2 | the C declarations, from the vendor's header |
//! | `loader.rs` | B3 | finding the library, the entry symbol, the version check |
//! | `result.rs` | B4 | one checked function per call |
//! | `context.rs` | B5 | an opened device, and making it current |
//! | `calls.rs` | B5 | the kit's call table (`VendorCalls`) over `result` |
//! | `lib.rs` | B5, 6 | the backend, and the handle types the kit's macros implement |
//!
//! It follows `docs/porting.md` ("a port over a vendor runtime") step by step; copy it and
//! replace each piece with your runtime's.

mod calls;
mod context;
pub mod loader;
mod result;
mod sys;

use std::sync::Arc;

use gpuport_core::{Backend, BackendKind, DeviceInfo, DlDeviceType, DlpackDevices, LoadOptions, Result};
use gpuport_vendor_kit::VendorDevice;
use gpuport_vendor_kit::VendorEvent;
use gpuport_vendor_kit::VendorStream;

pub use calls::IMAGE_FORMAT;
use context::DeviceCtx;

/// Step B5: the backend names itself — a plugin kind, never a built-in one.
pub const KIND: BackendKind = BackendKind::Plugin("fakevendor");

/// Step B5: the backend — the loaded runtime. `load` never panics: a missing library,
/// entry symbol or device is an error that discovery reports as the reason the backend is
/// unavailable.
#[derive(Clone)]
pub struct VendorBackend {
    rt: Arc<loader::Runtime>,
}

impl Backend for VendorBackend {
    const KIND: BackendKind = KIND;
    // Step 6: the DLPack device types of its memory: device memory is the vendor's own (no DLPack
    // type of its own, so the extension type); pinned memory is ordinary host memory.
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::EXT_DEV, pinned_host: Some(DlDeviceType::CPU), managed: None };
    type Device = VendorPortDevice;
    type Stream = VendorPortStream;
    type Event = VendorPortEvent;

    /// With `opts.library_path` that file is loaded (uncached: for tests and tools);
    /// otherwise the process-wide runtime (`FAKEVENDOR_LIBRARY`, then the default name).
    fn load(opts: &LoadOptions) -> Result<Self> {
        let rt = match &opts.library_path {
            Some(path) => loader::load(Some(path))?,
            None => loader::runtime()?,
        };
        Ok(VendorBackend { rt })
    }
    fn version(&self) -> String {
        format!("fakevendor runtime ({})", self.rt.library)
    }
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let count = result::device_count(self.rt.api)?;
        gpuport_vendor_kit::device_list::device_infos(KIND, count, |i| {
            let dev = DeviceCtx::open(&self.rt, i)?;
            gpuport_vendor_kit::VendorCalls::info(&**dev)
        })
    }
    fn open(&self, ordinal: u32) -> Result<VendorPortDevice> {
        Ok(VendorPortDevice(DeviceCtx::open(&self.rt, ordinal)?))
    }
}

/// Step B5: the handle types — newtypes over the kit's, whose trait impls the kit's
/// macros write (every method forwards to the kit, which makes the calls of `calls.rs`).
#[derive(Clone)]
pub struct VendorPortDevice(Arc<VendorDevice<DeviceCtx>>);

/// A stream of the vendor's runtime.
#[derive(Clone)]
pub struct VendorPortStream(VendorStream<DeviceCtx>);

/// An event of the vendor's runtime.
#[derive(Clone)]
pub struct VendorPortEvent(VendorEvent<DeviceCtx>);

gpuport_vendor_kit::impl_vendor_device!(VendorPortDevice, VendorBackend, VendorPortStream, VendorPortEvent);
gpuport_vendor_kit::impl_vendor_stream!(VendorPortStream, VendorBackend);
gpuport_vendor_kit::impl_vendor_event!(VendorPortEvent, VendorBackend);
