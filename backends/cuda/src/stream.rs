//! CUDA streams: the shared vendor-stream machinery (`gpuport_driver::vendor_stream`:
//! ownership, parked handles, kept errors, host callbacks, default streams, a drop that
//! never blocks) over the driver's stream calls. Queued work keeps the buffers and kernels
//! it touches alive until an event after it completes.

use gpuport_core::{
    BackendKind, Buffer, DeviceId, Error, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream,
    StreamFlags,
};
use gpuport_driver::parking::Keep;
use gpuport_driver::vendor_stream::{refuse_in_callback, VendorStream};

use crate::context::DeviceCtx;
use crate::event::CudaEvent;
use crate::module::CudaKernel;
use crate::result;
use crate::sys::{self, CUdeviceptr};
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

    fn api(&self) -> &sys::Api {
        &self.0.dev().driver.api
    }
}

impl Stream for CudaStream {
    type Backend = CudaBackend;

    fn device_id(&self) -> DeviceId {
        self.0.device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.raw_value()
    }
    fn flags(&self) -> StreamFlags {
        self.0.flags()
    }
    fn priority(&self) -> i32 {
        self.0.priority()
    }

    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = self.0.reachable_addr(src, src_offset, len, "copy")?;
        let d = self.0.reachable_addr(dst, dst_offset, len, "copy")?;
        if len == 0 {
            return Ok(());
        }
        let raw = self.0.raw()?;
        let api = self.api();
        let (sd, dd) = (src.device(), dst.device());
        let peer = sd.kind == BackendKind::Cuda
            && dd.kind == BackendKind::Cuda
            && sd != dd
            && !src.is_host_accessible()
            && !dst.is_host_accessible();
        if peer {
            // Both devices are alive: each buffer keeps its device's context.
            let (src_ctx, dst_ctx) =
                match (crate::context::DeviceCtx::live(sd.ordinal), crate::context::DeviceCtx::live(dd.ordinal)) {
                    (Some(a), Some(b)) => (a.ctx, b.ctx),
                    _ => return Err(Error::invalid_handle("a peer copy's device is not open")),
                };
            // SAFETY: both ranges were checked and are parked below until the copy has run;
            // contexts are retained by the buffers.
            unsafe { result::stream::memcpy_peer_async(api, d, dst_ctx, s, src_ctx, len, raw) }?;
        } else {
            // SAFETY: both ranges were checked and are parked below until the copy has run;
            // unified addressing resolves the kind.
            unsafe { result::stream::memcpy_async(api, d, s, len, raw) }?;
        }
        self.0.park([Keep::Buffer(src.clone()), Keep::Buffer(dst.clone())])
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.0.own_memory(dst, "memset")?;
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let raw = self.0.raw()?;
        let api = self.api();
        // SAFETY: the range was checked against a live CUDA allocation, parked below.
        unsafe { result::stream::memset_d8_async(api, d, value, len, raw) }?;
        self.0.park([Keep::Buffer(dst.clone())])
    }

    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        refuse_in_callback(BackendKind::Cuda, "a blocking Stream::write")?;
        let d = self.0.reachable_addr(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        let raw = self.0.raw()?;
        let api = self.api();
        // SAFETY: `src` is borrowed until the synchronize below has seen the copy finish.
        unsafe { result::stream::memcpy_async(api, d, src.as_ptr() as usize as CUdeviceptr, src.len(), raw) }?;
        self.synchronize()
    }

    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        refuse_in_callback(BackendKind::Cuda, "a blocking Stream::read")?;
        let s = self.0.reachable_addr(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        let raw = self.0.raw()?;
        let api = self.api();
        // SAFETY: `dst` is borrowed until the synchronize below has seen the copy finish.
        unsafe { result::stream::memcpy_async(api, dst.as_mut_ptr() as usize as CUdeviceptr, s, dst.len(), raw) }?;
        self.synchronize()
    }

    fn record(&self, event: &CudaEvent) -> Result<()> {
        let raw = self.0.raw()?;
        let api = self.api();
        // SAFETY: both handles are live.
        unsafe { result::event::record(api, event.0.raw(), raw) }
    }

    fn wait(&self, event: &CudaEvent) -> Result<()> {
        let raw = self.0.raw()?;
        let api = self.api();
        // SAFETY: both handles are live.
        unsafe { result::stream::wait_event(api, raw, event.0.raw()) }
    }

    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.0.host_callback(f)
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let k = kernel.handle_on::<CudaKernel>(self.device_id(), "launch")?;
        let api = self.api();
        self.0.launch(kernel, config, args, |stream, params| {
            // SAFETY: `params` points at one value per kernel parameter, alive for the call (the
            // driver copies them); the function belongs to this device's context, whose
            // module the kernel keeps loaded.
            unsafe {
                result::stream::launch_kernel(
                    api,
                    k.func,
                    config.grid,
                    config.block,
                    config.shared_mem_bytes,
                    stream,
                    params,
                )
            }
        })
    }

    fn query(&self) -> Result<bool> {
        self.0.query()
    }

    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
}
