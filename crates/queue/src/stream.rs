//! Streams of a software device: a [`WorkQueue`] with a process-wide raw handle and
//! ownership, and every stream operation written once over a backend's address
//! resolution. A backend's `Stream` implementation wraps [`QueueStream`] and forwards,
//! passing how it turns a buffer range into a host pointer (the host: host-accessible
//! memory; the ext device: its hidden backing memory too).

use std::sync::Arc;

use gpuport_core::{
    check_copy, check_copy_2d, Buffer, Copy2d, DeviceId, Error, HostCallback, HostFunction, Kernel, KernelArg,
    LaunchConfig, Ownership, Result, StreamFlags, UserPointer,
};

use crate::event::QueueEvent;
use crate::handles::{HandleRegistry, OwnerGuard};
use crate::kernels::{translate_args, HostKernel};
use crate::queue::{copy_bytes, ImplicitRole, Rows, WorkQueue};

/// How a backend turns `len` bytes at `offset` of a buffer into a host pointer for its
/// worker, checking the range and that the buffer is memory it may touch.
pub trait Translate: Fn(&Buffer, usize, usize) -> Result<*mut u8> {}
impl<F: Fn(&Buffer, usize, usize) -> Result<*mut u8>> Translate for F {}

struct StreamCore {
    queue: WorkQueue,
    device: DeviceId,
    flags: StreamFlags,
}

impl StreamCore {
    fn destroy(&self) {
        self.queue.close();
    }
}

static STREAMS: HandleRegistry<StreamCore> = HandleRegistry::new();

/// A stream handle of a software device.
#[derive(Clone)]
pub struct QueueStream {
    inner: Arc<StreamCore>,
    raw: usize,
    owner: Option<Arc<OwnerGuard<StreamCore>>>,
}

/// [`host_range`] for operation `operation`, as a [`Translate`] function: the translation of
/// a device whose streams touch host-accessible memory only.
pub fn host_translator(operation: &'static str) -> impl Fn(&Buffer, usize, usize) -> Result<*mut u8> {
    move |buffer, offset, len| host_range(buffer, offset, len, operation)
}

/// The host pointer of a range of a host-accessible buffer (host memory, or another
/// backend's pinned or managed memory); anything else is `BackendMismatch`.
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

impl QueueStream {
    /// A new owned stream of `device`, taking `role` in the device's implicit
    /// synchronisation with its legacy default stream ([`QueueDevice`](crate::QueueDevice)
    /// gives every stream it makes the role its flags call for).
    pub fn create(device: DeviceId, flags: StreamFlags, role: ImplicitRole) -> Result<Self> {
        let raw = STREAMS.reserve();
        let queue = WorkQueue::with_role(format!("stream {raw:#x} on {device}"), role)?;
        let inner = Arc::new(StreamCore { queue, device, flags });
        STREAMS.register(raw, &inner);
        let owner = OwnerGuard::new(&STREAMS, raw, inner.clone(), StreamCore::destroy);
        Ok(QueueStream { inner, raw, owner: Some(Arc::new(owner)) })
    }

    /// A borrowed handle to the live stream with raw handle `raw`, which must belong to
    /// `device`; a stale, unknown or foreign handle is `InvalidHandle`.
    pub fn from_raw(device: DeviceId, raw: usize) -> Result<Self> {
        let inner = STREAMS
            .get(raw)
            .filter(|s| !s.queue.is_closed() && s.device == device)
            .ok_or_else(|| Error::invalid_handle(format!("{raw:#x} is not a live stream of {device}")))?;
        Ok(QueueStream { inner, raw, owner: None })
    }

    /// A borrowed handle to the same stream.
    pub fn to_borrowed(&self) -> Self {
        QueueStream { inner: self.inner.clone(), raw: self.raw, owner: None }
    }

    /// The queue.
    pub fn queue(&self) -> &WorkQueue {
        &self.inner.queue
    }
    /// The device.
    pub fn device_id(&self) -> DeviceId {
        self.inner.device
    }
    /// Whether this handle owns the stream.
    pub fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.owner.is_some())
    }
    /// The raw handle.
    pub fn raw_handle(&self) -> usize {
        self.raw
    }
    /// Creation flags.
    pub fn flags(&self) -> StreamFlags {
        self.inner.flags
    }

    /// `Stream::copy`: both ranges translated and checked, then queued with the buffers.
    pub fn copy(
        &self,
        src: &Buffer,
        src_offset: usize,
        dst: &Buffer,
        dst_offset: usize,
        len: usize,
        translate: impl Translate,
    ) -> Result<()> {
        check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = translate(src, src_offset, len)?;
        let d = translate(dst, dst_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges were checked against their buffers (which travel with the op)
        // and do not overlap.
        unsafe { self.queue().copy(s, d, len, [Some(src.clone()), Some(dst.clone())]) }
    }

    /// `Stream::copy_2d`: both spans translated and checked, then every row queued as one
    /// operation with the buffers.
    pub fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d, translate: impl Translate) -> Result<()> {
        check_copy_2d(src, dst, copy)?;
        let copy = copy.normalized();
        let s = translate(src, copy.src_offset, copy.src_span()?)?;
        let d = translate(dst, copy.dst_offset, copy.dst_span()?)?;
        if copy.is_empty() {
            return Ok(());
        }
        let rows = Rows { count: copy.height, src_pitch: copy.src_pitch, dst_pitch: copy.dst_pitch };
        // SAFETY: both spans were checked against their buffers (which travel with the op),
        // hold every row, and do not overlap.
        unsafe { self.queue().copy_rows(s, d, copy.width, rows, [Some(src.clone()), Some(dst.clone())]) }
    }

    /// `Stream::memset`.
    pub fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8, translate: impl Translate) -> Result<()> {
        let d = translate(dst, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range was checked and the buffer travels with the op.
        unsafe { self.queue().fill(d, len, value, Some(dst.clone())) }
    }

    /// A synchronous `Device::memset` with CUDA's semantics: queued on this stream (the
    /// legacy default stream) after the work already there, and returns once it has run —
    /// so it never races work already queued on the stream. Errors of earlier work stay
    /// with the stream.
    pub fn memset_blocking(
        &self,
        dst: &Buffer,
        offset: usize,
        len: usize,
        value: u8,
        translate: impl Translate,
    ) -> Result<()> {
        self.memset(dst, offset, len, value, translate)?;
        self.queue().flush()
    }

    /// `Stream::write`: queued after the work already queued; returns once it has run.
    pub fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize, translate: impl Translate) -> Result<()> {
        let d = translate(dst, dst_offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        // On an idle stream, on this thread (no worker to wake).
        // SAFETY: both ranges are valid now; a host slice never overlaps a live allocation.
        if self.queue().run_inline_if_idle(|| unsafe { copy_bytes(src.as_ptr(), d, src.len()) }).is_some() {
            return Ok(());
        }
        // SAFETY: `src` stays borrowed until `flush` returns, by which time the copy has
        // run; `dst` travels with the op. A host slice never overlaps a live allocation.
        unsafe { self.queue().copy(src.as_ptr(), d, src.len(), [None, Some(dst.clone())])? };
        self.queue().flush()
    }

    /// `Stream::read`: queued after the work already queued; returns once it has run.
    pub fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8], translate: impl Translate) -> Result<()> {
        let s = translate(src, src_offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let (d, n) = (dst.as_mut_ptr(), dst.len());
        // SAFETY: as in `write`, with the roles swapped.
        if self.queue().run_inline_if_idle(|| unsafe { copy_bytes(s, d, n) }).is_some() {
            return Ok(());
        }
        // SAFETY: as in `write`, with the roles swapped.
        unsafe { self.queue().copy(s, d, n, [Some(src.clone()), None])? };
        self.queue().flush()
    }

    /// `Stream::record`.
    pub fn record(&self, event: &QueueEvent) -> Result<()> {
        self.queue().record(event.state())
    }

    /// `Stream::wait`: a destroyed event is refused.
    pub fn wait(&self, event: &QueueEvent) -> Result<()> {
        event.state().check_live("wait")?;
        self.queue().wait(event.state())
    }

    /// `Stream::host_callback`.
    pub fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.queue().callback(f)
    }

    /// `Stream::host_function`: the pair queued as it is.
    ///
    /// # Safety
    /// As for `Stream::host_function`.
    pub unsafe fn host_function(&self, func: HostFunction, user: *mut std::ffi::c_void) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { self.queue().host_function(func, UserPointer(user)) }
    }

    /// `Stream::launch` of a registered Rust kernel; a kernel looked up on another device
    /// or backend is `BackendMismatch`.
    pub fn launch(
        &self,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[KernelArg],
        translate: impl Translate,
    ) -> Result<()> {
        let HostKernel(f) = *kernel.handle_on::<HostKernel>(self.device_id(), "launch")?;
        config.validate()?;
        let (translated, keep) = translate_args(args, translate)?;
        let config = *config;
        self.queue().run(Box::new(move || {
            let _keep = keep;
            f(&config, &translated)
        }))
    }

    /// `Stream::run_if_idle`: on this thread while the queue is idle and held (its claim
    /// keeps drainers off until `f` returns; work queued meanwhile runs after it).
    pub fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool {
        self.queue().run_inline_if_idle(f).is_some()
    }

    /// `Stream::query`.
    #[inline]
    pub fn query(&self) -> Result<bool> {
        Ok(self.queue().query())
    }

    /// `Stream::progress`: the queue's counters.
    #[inline]
    pub fn progress(&self) -> gpuport_core::StreamProgress<'_> {
        self.queue().progress()
    }

    /// `Stream::synchronize`.
    pub fn synchronize(&self) -> Result<()> {
        self.queue().synchronize()
    }
}
