//! CUDA streams: the vendor kit's streams (`gpuport_driver::vendor::stream`: ownership,
//! parked handles, kept errors, host callbacks, default streams, a drop that never blocks,
//! and the whole `Stream` data path) over the driver calls of `calls.rs`.

use gpuport_driver::vendor::VendorStream;

use crate::context::DeviceCtx;
use crate::CudaBackend;

/// A CUDA stream.
#[derive(Clone)]
pub struct CudaStream(pub(crate) VendorStream<DeviceCtx>);

gpuport_driver::impl_vendor_stream!(CudaStream, CudaBackend);
