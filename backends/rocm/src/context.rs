//! Devices: HIP has no contexts to retain; each call first makes its device current on
//! the calling thread (`hipSetDevice`, skipped when `hipGetDevice` already says so).

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{BackendKind, DeviceId, Result};
use gpuport_vendor_kit::{OpenDevices, VendorDevice};

use crate::result;
use crate::sys::Runtime;
use crate::target::Target;

/// One opened device, shared by every handle of it.
pub struct DeviceCtx {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) id: DeviceId,
    pub(crate) ordinal: c_int,
    pub(crate) total_memory: usize,
    /// The device's target ID, for checking code objects against it (`None` when the
    /// runtime does not say).
    pub(crate) target: Option<Target>,
}

/// Live devices by ordinal, so every handle of one device shares one context (and one
/// record of its streams' errors).
static OPEN: OpenDevices<DeviceCtx> = OpenDevices::new(BackendKind::Rocm);

impl DeviceCtx {
    /// Opens (or shares the already-open) device `ordinal`.
    pub fn open(rt: &Arc<Runtime>, ordinal: u32) -> Result<Arc<VendorDevice<DeviceCtx>>> {
        let api = &rt.api;
        let count = result::device::count(api)?;
        OPEN.open(ordinal, count.max(0) as u32, || {
            let total_memory = result::device::total_mem(api, ordinal as c_int)?;
            let id = DeviceId::new(BackendKind::Rocm, ordinal);
            let target = crate::target::of_device(rt, ordinal);
            Ok(DeviceCtx { rt: rt.clone(), id, ordinal: ordinal as c_int, total_memory, target })
        })
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
