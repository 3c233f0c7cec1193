//! CUDA streams: the vendor kit's streams (`gpuport_driver::vendor_stream`: ownership,
//! parked handles, kept errors, host callbacks, default streams, a drop that never blocks,
//! and the whole `Stream` data path) over the driver calls of `calls.rs`. Only creation,
//! with its priority range and flags, is CUDA's own.

use gpuport_core::{Result, StreamFlags};
use gpuport_driver::vendor_stream::VendorStream;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys;
use crate::CudaBackend;

/// A CUDA stream.
#[derive(Clone)]
pub struct CudaStream(pub(crate) VendorStream<DeviceCtx>);

impl CudaStream {
    pub(crate) fn create(dev: &std::sync::Arc<DeviceCtx>, flags: StreamFlags, priority: i32) -> Result<Self> {
        dev.bind()?;
        let api = &dev.driver.api;
        let (least, greatest) = result::ctx::stream_priority_range(api)?;
        let priority = priority.clamp(greatest.min(least), greatest.max(least));
        let cu_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        let raw = result::stream::create_with_priority(api, cu_flags, priority)?;
        Ok(CudaStream(VendorStream::new(dev, raw, true, flags, priority)))
    }
}

gpuport_driver::impl_vendor_stream!(CudaStream, CudaBackend);
