//! Step B5: the device context — what one opened device needs for every call. This
//! runtime, like HIP, has no context objects: each call goes to the calling thread's
//! current device, so binding a device is `setDevice` (skipped when it is already
//! current). A runtime with contexts retains one here and releases it on drop, on the
//! vendor kit's release thread (wrap it in `gpuport_vendor_kit::release::Deferred`).

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{DeviceId, Result};
use gpuport_vendor_kit::{OpenDevices, VendorDevice};

use crate::loader::Runtime;
use crate::{result, KIND};

/// One opened device.
pub struct DeviceCtx {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) id: DeviceId,
    pub(crate) ordinal: c_int,
    pub(crate) total_memory: usize,
}

/// The open devices: every handle of one device shares one context and one record of its
/// streams.
static OPEN: OpenDevices<DeviceCtx> = OpenDevices::new(KIND);

impl DeviceCtx {
    /// Opens (or shares the already-open) device `ordinal`.
    pub fn open(rt: &Arc<Runtime>, ordinal: u32) -> Result<Arc<VendorDevice<DeviceCtx>>> {
        let count = result::device_count(rt.api)?;
        OPEN.open(ordinal, count, || {
            let total_memory = result::total_memory(rt.api, ordinal as c_int)?;
            Ok(DeviceCtx { rt: rt.clone(), id: DeviceId::new(KIND, ordinal), ordinal: ordinal as c_int, total_memory })
        })
    }

    /// Makes this device current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        if result::current_device(self.rt.api)? != self.ordinal {
            result::set_device(self.rt.api, self.ordinal)?;
        }
        Ok(())
    }
}
