//! (Its checked calls are `result/event.rs`.) CUDA events: the shared vendor event
//! (`gpuport_vendor_kit::event`: ownership,
//! deferred destroy, binding, no blocking inside a host callback) over the driver's event
//! calls (`result::event`).

use gpuport_vendor_kit::VendorEvent;

use crate::context::DeviceCtx;
use crate::CudaBackend;

/// A CUDA event.
#[derive(Clone)]
pub struct CudaEvent(pub(crate) VendorEvent<DeviceCtx>);

gpuport_vendor_kit::impl_vendor_event!(CudaEvent, CudaBackend);
