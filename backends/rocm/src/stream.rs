//! (Its checked calls are `result/stream.rs`.) HIP streams: the vendor kit's streams
//! (`gpuport_vendor_kit::stream`: ownership,
//! parked handles, kept errors, host callbacks, default streams, a drop that never blocks,
//! and the whole `Stream` data path) over the runtime calls of `calls.rs`.

use gpuport_vendor_kit::VendorStream;

use crate::context::DeviceCtx;
use crate::RocmBackend;

/// A HIP stream.
#[derive(Clone)]
pub struct RocmStream(pub(crate) VendorStream<DeviceCtx>);

gpuport_vendor_kit::impl_vendor_stream!(RocmStream, RocmBackend);
