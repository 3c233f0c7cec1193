//! (Its checked calls are `result/event.rs`.) HIP events: the shared vendor event
//! (`gpuport_vendor_kit::event`: ownership,
//! deferred destroy, binding, no blocking inside a host callback) over the runtime's event
//! calls (`result::event`).

use gpuport_vendor_kit::VendorEvent;

use crate::context::DeviceCtx;
use crate::RocmBackend;

/// A HIP event.
#[derive(Clone)]
pub struct RocmEvent(pub(crate) VendorEvent<DeviceCtx>);

gpuport_vendor_kit::impl_vendor_event!(RocmEvent, RocmBackend);
