//! Devices and their primary contexts: retained once per device while any handle (a
//! device, stream, event, buffer or module) lives, released with the last; made current on
//! the calling thread before each call.

use std::ffi::c_int;
use std::sync::{Arc, Mutex, Weak};

use gpuport_core::{BackendKind, DeviceId, Error, Result};
use gpuport_driver::release::Deferred;
use gpuport_driver::vendor_stream::DeviceStreams;

use crate::result;
use crate::sys::{CUcontext, CUdevice, Driver};

/// One opened device: its primary context, retained.
pub struct DeviceCtx {
    pub(crate) driver: Arc<Driver>,
    pub(crate) id: DeviceId,
    pub(crate) cu_device: CUdevice,
    pub(crate) ctx: CUcontext,
    pub(crate) total_memory: usize,
    /// Its streams' kept errors and default streams.
    pub(crate) streams: DeviceStreams<DeviceCtx>,
    /// Releases the primary context — never on a driver callback thread.
    _retained: Deferred<Retained>,
}

// SAFETY: a CUDA context handle may be used from any thread (the driver serialises); the
// struct is immutable after construction but for `streams`, which locks.
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
static OPEN: Mutex<Vec<Weak<DeviceCtx>>> = Mutex::new(Vec::new());

impl DeviceCtx {
    /// Opens (or shares the already-open) device `ordinal`.
    pub fn open(driver: &Arc<Driver>, ordinal: u32) -> Result<Arc<DeviceCtx>> {
        let api = &driver.api;
        let count = result::device::count(api)?;
        let id = DeviceId::new(BackendKind::Cuda, ordinal);
        if i64::from(ordinal) >= i64::from(count) {
            return Err(Error::DeviceNotFound { device: id, count: count.max(0) as u32 });
        }
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = open.get(ordinal as usize).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let cu_device = result::device::get(api, ordinal as c_int)?;
        let total_memory = result::device::total_mem(api, cu_device)?;
        // Released by `Retained`'s drop.
        let ctx = result::device::primary_ctx_retain(api, cu_device)?;
        let retained = Deferred::new(Retained { driver: driver.clone(), id, cu_device });
        let streams = DeviceStreams::default();
        let dev = Arc::new(DeviceCtx {
            driver: driver.clone(),
            id,
            cu_device,
            ctx,
            total_memory,
            streams,
            _retained: retained,
        });
        if open.len() <= ordinal as usize {
            open.resize_with(ordinal as usize + 1, Weak::new);
        }
        open[ordinal as usize] = Arc::downgrade(&dev);
        Ok(dev)
    }

    /// The live device `ordinal`, if some handle holds it open.
    pub fn live(ordinal: u32) -> Option<Arc<DeviceCtx>> {
        OPEN.lock().unwrap_or_else(|p| p.into_inner()).get(ordinal as usize).and_then(Weak::upgrade)
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
