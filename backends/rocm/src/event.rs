//! HIP events: the shared vendor event (`gpuport_driver::vendor::event`: ownership,
//! deferred destroy, binding, no blocking inside a host callback) over the runtime's event
//! calls (`result::event`).

use gpuport_driver::vendor::VendorEvent;

use crate::context::DeviceCtx;
use crate::RocmBackend;

/// A HIP event.
#[derive(Clone)]
pub struct RocmEvent(pub(crate) VendorEvent<DeviceCtx>);

gpuport_driver::impl_vendor_event!(RocmEvent, RocmBackend);
