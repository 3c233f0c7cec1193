//! Devices: HIP has no contexts to retain; each call first makes its device current on
//! the calling thread (`hipSetDevice`, skipped when `hipGetDevice` already says so).

use std::ffi::c_int;
use std::sync::{Arc, Mutex, Weak};

use gpuport_core::{BackendKind, DeviceId, Error, Result};
use gpuport_driver::vendor_stream::DeviceStreams;

use crate::result::check;
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
        let mut count: c_int = 0;
        // SAFETY: valid out-pointer.
        check(api, unsafe { (api.hipGetDeviceCount)(&mut count) }, "hipGetDeviceCount")?;
        let id = DeviceId::new(BackendKind::Rocm, ordinal);
        if i64::from(ordinal) >= i64::from(count) {
            return Err(Error::DeviceNotFound { device: id, backend: "rocm".into(), count: count.max(0) as u32 });
        }
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = open.get(ordinal as usize).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let mut total_memory = 0usize;
        // SAFETY: valid out-pointer; the ordinal is in range.
        check(api, unsafe { (api.hipDeviceTotalMem)(&mut total_memory, ordinal as c_int) }, "hipDeviceTotalMem")?;
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
        let mut current: c_int = -1;
        // SAFETY: valid out-pointer.
        check(api, unsafe { (api.hipGetDevice)(&mut current) }, "hipGetDevice")?;
        if current != self.ordinal {
            // SAFETY: the ordinal was checked at open.
            check(api, unsafe { (api.hipSetDevice)(self.ordinal) }, "hipSetDevice")?;
        }
        Ok(())
    }
}
