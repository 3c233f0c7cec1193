//! HIP streams: the vendor kit's streams (`gpuport_driver::vendor_stream`: ownership,
//! parked handles, kept errors, host callbacks, default streams, a drop that never blocks,
//! and the whole `Stream` data path) over the runtime calls of `calls.rs`. Only creation,
//! with its priority range and flags, is HIP's own.

use gpuport_core::{Result, StreamFlags};
use gpuport_driver::vendor_stream::VendorStream;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys;
use crate::RocmBackend;

/// A HIP stream.
#[derive(Clone)]
pub struct RocmStream(pub(crate) VendorStream<DeviceCtx>);

impl RocmStream {
    pub(crate) fn create(dev: &std::sync::Arc<DeviceCtx>, flags: StreamFlags, priority: i32) -> Result<Self> {
        dev.bind()?;
        let api = &dev.rt.api;
        let (least, greatest) = result::device::stream_priority_range(api)?;
        let priority = priority.clamp(greatest.min(least), greatest.max(least));
        let hip_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        let raw = result::stream::create_with_priority(api, hip_flags, priority)?;
        Ok(RocmStream(VendorStream::new(dev, raw, true, flags, priority)))
    }
}

gpuport_driver::impl_vendor_stream!(RocmStream, RocmBackend);
