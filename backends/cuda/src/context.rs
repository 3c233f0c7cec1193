//! Devices and their primary contexts: retained once per device while any handle (a
//! device, stream, event, buffer or module) lives, released with the last; made current on
//! the calling thread before each call.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{BackendKind, DeviceId, Result};
use gpuport_vendor_kit::release::Deferred;
use gpuport_vendor_kit::{OpenDevices, VendorDevice};

use crate::result;
use crate::sys::{CUcontext, CUdevice, Driver};

/// One opened device: its primary context, retained.
pub struct DeviceCtx {
    pub(crate) driver: Arc<Driver>,
    pub(crate) id: DeviceId,
    pub(crate) cu_device: CUdevice,
    pub(crate) ctx: CUcontext,
    pub(crate) total_memory: usize,
    /// Releases the primary context — never on a driver callback thread.
    _retained: Deferred<Retained>,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver serialises); the
// struct is immutable after construction.
unsafe impl Send for DeviceCtx {}
// SAFETY: as above.
unsafe impl Sync for DeviceCtx {}

/// One retain of a device's primary context, released on drop.
struct Retained {
    driver: Arc<Driver>,
    id: DeviceId,
    cu_device: CUdevice,
}

impl Drop for Retained {
    fn drop(&mut self) {
        // SAFETY: the context was retained once in `open` and is released once here.
        if let Err(e) = unsafe { result::device::primary_ctx_release(&self.driver.api, self.cu_device) } {
            log::warn!("releasing the primary context of {}: {e}", self.id);
        }
    }
}

/// Live devices by ordinal, so every handle of one device shares one retained context and
/// peer copies can find the other device's context.
static OPEN: OpenDevices<DeviceCtx> = OpenDevices::new(BackendKind::Cuda);

impl DeviceCtx {
    /// Opens (or shares the already-open) device `ordinal`.
    pub fn open(driver: &Arc<Driver>, ordinal: u32) -> Result<Arc<VendorDevice<DeviceCtx>>> {
        let api = &driver.api;
        let count = result::device::count(api)?;
        OPEN.open(ordinal, count.max(0) as u32, || {
            let id = DeviceId::new(BackendKind::Cuda, ordinal);
            let cu_device = result::device::get(api, ordinal as c_int)?;
            let total_memory = result::device::total_mem(api, cu_device)?;
            // Released by `Retained`'s drop.
            let ctx = result::device::primary_ctx_retain(api, cu_device)?;
            let retained = Deferred::new(Retained { driver: driver.clone(), id, cu_device });
            Ok(DeviceCtx { driver: driver.clone(), id, cu_device, ctx, total_memory, _retained: retained })
        })
    }

    /// The live device `ordinal`, if some handle holds it open.
    pub fn live(ordinal: u32) -> Option<Arc<VendorDevice<DeviceCtx>>> {
        OPEN.live(ordinal)
    }

    /// Makes the primary context current on this thread (a no-op when it already is).
    pub fn bind(&self) -> Result<()> {
        let api = &self.driver.api;
        if result::ctx::get_current(api)? != self.ctx {
            // SAFETY: `ctx` is retained for as long as `self` lives.
            unsafe { result::ctx::set_current(api, self.ctx) }?;
        }
        Ok(())
    }
}
