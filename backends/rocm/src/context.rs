//! Devices: HIP has no contexts to retain; each call first makes its device current on
//! the calling thread (`hipSetDevice`, skipped when `hipGetDevice` already says so).

use std::ffi::c_int;
use std::sync::{Arc, Mutex, Weak};

use gpuport_core::{BackendKind, DeviceId, Error, Result};
use gpuport_driver::vendor_stream::DeviceStreams;

use crate::result;
use crate::sys::Runtime;

/// One opened device, shared by every handle of it.
pub struct DeviceCtx {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) id: DeviceId,
    pub(crate) ordinal: c_int,
    pub(crate) total_memory: usize,
    /// Its streams' kept errors and default streams.
    pub(crate) streams: DeviceStreams<DeviceCtx>,
}

/// Live devices by ordinal, so every handle of one device shares one context (and one
/// record of its streams' errors).
static OPEN: Mutex<Vec<Weak<DeviceCtx>>> = Mutex::new(Vec::new());

impl DeviceCtx {
    /// Opens (or shares the already-open) device `ordinal`.
    pub fn open(rt: &Arc<Runtime>, ordinal: u32) -> Result<Arc<DeviceCtx>> {
        let api = &rt.api;
        let count = result::device::count(api)?;
        let id = DeviceId::new(BackendKind::Rocm, ordinal);
        if i64::from(ordinal) >= i64::from(count) {
            return Err(Error::DeviceNotFound { device: id, count: count.max(0) as u32 });
        }
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = open.get(ordinal as usize).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let total_memory = result::device::total_mem(api, ordinal as c_int)?;
        let streams = DeviceStreams::default();
        let dev = Arc::new(DeviceCtx { rt: rt.clone(), id, ordinal: ordinal as c_int, total_memory, streams });
        if open.len() <= ordinal as usize {
            open.resize_with(ordinal as usize + 1, Weak::new);
        }
        open[ordinal as usize] = Arc::downgrade(&dev);
        Ok(dev)
    }

    /// Makes this device current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        let api = &self.rt.api;
        if result::device::get_current(api)? != self.ordinal {
            result::device::set_current(api, self.ordinal)?;
        }
        Ok(())
    }
}
