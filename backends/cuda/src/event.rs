//! CUDA events: the shared vendor event (`gpuport_driver::vendor::event`: ownership,
//! deferred destroy, binding, no blocking inside a host callback) over the driver's event
//! calls (`result::event`).

use gpuport_driver::vendor::VendorEvent;

use crate::context::DeviceCtx;
use crate::CudaBackend;

/// A CUDA event.
#[derive(Clone)]
pub struct CudaEvent(pub(crate) VendorEvent<DeviceCtx>);

gpuport_driver::impl_vendor_event!(CudaEvent, CudaBackend);
