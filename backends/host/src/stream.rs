//! Host streams: a [`WorkQueue`] per stream, plus ownership and raw handles.

use std::sync::Arc;

use gpuport_core::{Buffer, DeviceId, Error, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream, StreamFlags};

use crate::event::HostEvent;
use crate::handles::{HandleRegistry, OwnerGuard};
use crate::kernels::{HostArg, HostKernel, HostKernelArgs};
use crate::queue::WorkQueue;
use crate::HostBackend;

pub(crate) struct StreamInner {
    pub(crate) queue: WorkQueue,
    device: DeviceId,
    flags: StreamFlags,
}

impl StreamInner {
    fn destroy(&self) {
        self.queue.close();
    }
}

pub(crate) static STREAMS: HandleRegistry<StreamInner> = HandleRegistry::new();

/// A stream of the host backend: an ordered queue run by its own worker thread.
#[derive(Clone)]
pub struct HostStream {
    pub(crate) inner: Arc<StreamInner>,
    raw: usize,
    owner: Option<Arc<OwnerGuard<StreamInner>>>,
}

/// The host pointer for a range of a buffer a host stream may touch: any host-accessible
/// buffer (host memory, or another backend's pinned or managed memory).
pub fn host_range(buffer: &Buffer, offset: usize, len: usize, operation: &'static str) -> Result<*mut u8> {
    if !buffer.is_host_accessible() {
        return Err(Error::BackendMismatch {
            operation,
            expected: "host-accessible".into(),
            found: format!("{:?} memory of {}", buffer.memory(), buffer.device()),
        });
    }
    buffer.host_ptr(offset, len)
}

impl HostStream {
    /// A new owned stream for `device`. Software devices built on the host backend (the ext
    /// device) create their streams here and keep the device id of their own.
    pub fn create(device: DeviceId, flags: StreamFlags) -> Result<Self> {
        let raw = STREAMS.reserve();
        let queue = WorkQueue::new(format!("stream {raw:#x} on {device}"))?;
        let inner = Arc::new(StreamInner { queue, device, flags });
        STREAMS.register(raw, &inner);
        let owner = OwnerGuard::new(&STREAMS, raw, inner.clone(), StreamInner::destroy);
        Ok(HostStream { inner, raw, owner: Some(Arc::new(owner)) })
    }

    /// A borrowed handle to the live stream with raw handle `raw`; a stale or unknown
    /// handle is `InvalidHandle`.
    pub fn from_raw(raw: usize) -> Result<Self> {
        let inner = STREAMS
            .get(raw)
            .filter(|s| !s.queue.is_closed())
            .ok_or_else(|| Error::invalid_handle(format!("{raw:#x} is not a live host stream")))?;
        Ok(HostStream { inner, raw, owner: None })
    }

    /// A borrowed handle to the same stream.
    pub fn to_borrowed(&self) -> Self {
        HostStream { inner: self.inner.clone(), raw: self.raw, owner: None }
    }

    /// The queue, for software devices built on the host backend.
    pub fn queue(&self) -> &WorkQueue {
        &self.inner.queue
    }
}

impl Stream for HostStream {
    type Backend = HostBackend;

    fn device_id(&self) -> DeviceId {
        self.inner.device
    }
    fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.owner.is_some())
    }
    fn raw_handle(&self) -> usize {
        self.raw
    }
    fn flags(&self) -> StreamFlags {
        self.inner.flags
    }
    fn priority(&self) -> i32 {
        0
    }

    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = host_range(src, src_offset, len, "copy")?;
        let d = host_range(dst, dst_offset, len, "copy")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges were checked against their buffers (which travel with the op)
        // and do not overlap.
        unsafe { self.inner.queue.copy(s, d, len, [Some(src.clone()), Some(dst.clone())]) }
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = host_range(dst, offset, len, "memset")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range was checked and the buffer travels with the op.
        unsafe { self.inner.queue.fill(d, len, value, Some(dst.clone())) }
    }

    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        let d = host_range(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: `src` stays borrowed until `flush` returns, by which time the copy has
        // run; `dst` travels with the op. A host slice never overlaps a live allocation.
        unsafe { self.inner.queue.copy(src.as_ptr(), d, src.len(), [None, Some(dst.clone())])? };
        self.inner.queue.flush()
    }

    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        let s = host_range(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: as in `write`, with the roles swapped.
        unsafe { self.inner.queue.copy(s, dst.as_mut_ptr(), dst.len(), [Some(src.clone()), None])? };
        self.inner.queue.flush()
    }

    fn record(&self, event: &HostEvent) -> Result<()> {
        self.inner.queue.record(&event.state)
    }

    fn wait(&self, event: &HostEvent) -> Result<()> {
        if event.state.is_destroyed() {
            return Err(Error::invalid_handle("waiting on a destroyed event"));
        }
        self.inner.queue.wait(&event.state)
    }

    fn host_callback(&self, f: gpuport_core::HostCallback) -> Result<()> {
        self.inner.queue.run(Box::new(move || {
            f();
            Ok(())
        }))
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let HostKernel(f) = *kernel
            .handle::<HostKernel>()
            .ok_or_else(|| Error::mismatch("launch", gpuport_core::BackendKind::Host, kernel.device()))?;
        config.validate()?;
        let (resolved, keep) = resolve_args(args, |b, offset, len| host_range(b, offset, len, "launch"))?;
        let config = *config;
        self.inner.queue.run(Box::new(move || {
            let _keep = keep;
            f(&config, &resolved)
        }))
    }

    fn query(&self) -> Result<bool> {
        Ok(self.inner.queue.query())
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.queue.synchronize()
    }
}

/// Resolves kernel arguments to host pointers, checking every buffer, and returns the
/// buffers the launch must keep alive. `resolve(buffer, offset, len)` gives the host
/// pointer for a range of a buffer (software devices translate their own addresses).
pub fn resolve_args(
    args: &[KernelArg],
    mut resolve: impl FnMut(&Buffer, usize, usize) -> Result<*mut u8>,
) -> Result<(HostKernelArgs, Vec<Buffer>)> {
    let mut resolved = Vec::with_capacity(args.len());
    let mut keep = Vec::new();
    for arg in args {
        match arg {
            KernelArg::Buffer { buffer, offset } => {
                let len = buffer.len().checked_sub(*offset).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "kernel argument offset {offset} is past a {}-byte buffer",
                        buffer.len()
                    ))
                })?;
                resolved.push(HostArg::Ptr(resolve(buffer, *offset, len)?, len));
                keep.push(buffer.clone());
            }
            KernelArg::Scalar(s) => resolved.push(HostArg::Scalar(*s)),
        }
    }
    Ok((HostKernelArgs::new(resolved), keep))
}
