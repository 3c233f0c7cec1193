//! (Its checked calls are `result/stream.rs`.) CUDA streams: the vendor kit's streams
//! (`gpuport_vendor_kit::stream`: ownership,
//! parked handles, kept errors, host callbacks, default streams, a drop that never blocks,
//! and the whole `Stream` data path) over the driver calls of `calls.rs`.

use gpuport_vendor_kit::VendorStream;

use crate::context::DeviceCtx;
use crate::CudaBackend;

/// A CUDA stream.
#[derive(Clone)]
pub struct CudaStream(pub(crate) VendorStream<DeviceCtx>);

gpuport_vendor_kit::impl_vendor_stream!(CudaStream, CudaBackend);
