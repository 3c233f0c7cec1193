//! CUDA streams. Queued work keeps the buffers (and kernels) it touches alive: each
//! operation's handles are parked on the stream and released once an event recorded
//! after them has completed, or at the next synchronize. Host callbacks run inside
//! `catch_unwind`: nothing unwinds into the driver.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuport_core::{
    BackendKind, Buffer, DeviceId, Error, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream,
    StreamFlags,
};
use gpuport_driver::parking::{Fence, Keep, Parked};
use gpuport_driver::release::Deferred;

use crate::context::DeviceCtx;
use crate::event::CudaEvent;
use crate::module::CudaKernel;
use crate::result::{check, check_ready};
use crate::sys::{self, CUdeviceptr, CUevent, CUstream};
use crate::CudaBackend;

pub(crate) type ErrorSlot = Arc<Mutex<Option<Error>>>;

pub(crate) struct StreamInner {
    pub(crate) dev: Arc<DeviceCtx>,
    pub(crate) raw: CUstream,
    owned: bool,
    flags: StreamFlags,
    priority: i32,
    /// Failures found outside a call (stream-ordered frees, host callbacks), reported by
    /// the next synchronize.
    pub(crate) errors: ErrorSlot,
    parked: Mutex<Parked<CUevent>>,
}

// SAFETY: CUDA stream and event handles may be used from any thread; the parked lists are
// behind a mutex.
unsafe impl Send for StreamInner {}
// SAFETY: as above.
unsafe impl Sync for StreamInner {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StreamInner {
    fn park(&self, items: impl IntoIterator<Item = Keep>) -> Result<()> {
        lock(&self.parked).park(items, self)
    }

    /// Releases every parked handle; call only when the stream is known idle.
    fn release_parked(&self) {
        lock(&self.parked).release_all(self);
    }

    fn has_parked(&self) -> bool {
        !lock(&self.parked).is_empty()
    }
}

impl Fence for StreamInner {
    type Handle = CUevent;

    fn seal(&self) -> Result<CUevent> {
        let api = &self.dev.driver.api;
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 2 = CU_EVENT_DISABLE_TIMING; the context is current.
        check(api, unsafe { (api.cuEventCreate)(&mut ev, 2) }, "cuEventCreate")?;
        // SAFETY: both handles are live.
        if let Err(e) = check(api, unsafe { (api.cuEventRecord)(ev, self.raw) }, "cuEventRecord") {
            self.destroy(ev);
            return Err(e);
        }
        Ok(ev)
    }

    fn done(&self, ev: CUevent) -> Result<bool> {
        let api = &self.dev.driver.api;
        // SAFETY: a live event created by `seal`.
        check_ready(api, unsafe { (api.cuEventQuery)(ev) }, "cuEventQuery")
    }

    fn destroy(&self, ev: CUevent) {
        let api = &self.dev.driver.api;
        // SAFETY: created by `seal`, destroyed once.
        if let Err(e) = check(api, unsafe { (api.cuEventDestroy)(ev) }, "cuEventDestroy") {
            log::warn!("{e}");
        }
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.dev.bind().is_err() {
            return;
        }
        let api = &self.dev.driver.api;
        if self.has_parked() {
            // Parked buffers may still be in use by queued work: wait before releasing.
            // SAFETY: the stream handle is live.
            if let Err(e) = check(api, unsafe { (api.cuStreamSynchronize)(self.raw) }, "cuStreamSynchronize") {
                log::warn!("synchronizing a dropped stream: {e}");
            }
            self.release_parked();
        }
        if self.owned {
            // SAFETY: the stream was created by cuStreamCreateWithPriority and is destroyed
            // once; queued work still completes.
            if let Err(e) = check(api, unsafe { (api.cuStreamDestroy)(self.raw) }, "cuStreamDestroy") {
                log::warn!("{e}");
            }
        }
    }
}

/// A CUDA stream.
#[derive(Clone)]
pub struct CudaStream {
    pub(crate) inner: Arc<Deferred<StreamInner>>,
}

struct Callback {
    f: HostCallback,
    errors: ErrorSlot,
    stream: String,
}

/// The host function handed to `cuLaunchHostFunc`. Never unwinds into the driver.
unsafe extern "C" fn run_callback(user: *mut c_void) {
    // SAFETY: `user` is the `Box<Callback>` leaked by `host_callback`, run exactly once.
    let cb = unsafe { Box::from_raw(user.cast::<Callback>()) };
    // The driver's callback thread may make no CUDA call: everything the callback drops
    // (its captures, the last clone of a handle) is released on the release thread.
    gpuport_driver::release::restricted(move || {
        let Callback { f, errors, stream } = *cb;
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            let err = Error::StreamWork { stream, message: "host callback panicked".into() };
            lock(&errors).get_or_insert(err);
        }
    });
}

impl CudaStream {
    pub(crate) fn create(dev: &Arc<DeviceCtx>, flags: StreamFlags, priority: i32) -> Result<Self> {
        dev.bind()?;
        let api = &dev.driver.api;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: valid out-pointers; the context is current.
        let status = unsafe { (api.cuCtxGetStreamPriorityRange)(&mut least, &mut greatest) };
        check(api, status, "cuCtxGetStreamPriorityRange")?;
        let priority = priority.clamp(greatest.min(least), greatest.max(least));
        let cu_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        let mut raw: CUstream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        let status = unsafe { (api.cuStreamCreateWithPriority)(&mut raw, cu_flags, priority) };
        check(api, status, "cuStreamCreateWithPriority")?;
        Ok(Self::from_parts(dev, raw, true, flags, priority))
    }

    pub(crate) fn from_parts(
        dev: &Arc<DeviceCtx>,
        raw: CUstream,
        owned: bool,
        flags: StreamFlags,
        priority: i32,
    ) -> Self {
        CudaStream {
            inner: Arc::new(Deferred::new(StreamInner {
                dev: dev.clone(),
                raw,
                owned,
                flags,
                priority,
                errors: Arc::default(),
                parked: Mutex::default(),
            })),
        }
    }

    fn api(&self) -> &sys::Api {
        &self.inner.dev.driver.api
    }

    fn name(&self) -> String {
        format!("{:#x} on {}", self.inner.raw as usize, self.inner.dev.id)
    }

    /// The device address for a range of a buffer this stream may touch: memory of any
    /// CUDA device, or host-accessible memory (pageable copies are staged by the driver).
    fn addr(&self, buffer: &Buffer, offset: usize, len: usize, op: &'static str) -> Result<CUdeviceptr> {
        if buffer.device().kind == BackendKind::Cuda || buffer.is_host_accessible() {
            return buffer.range_addr(offset, len);
        }
        Err(Error::BackendMismatch {
            operation: op,
            expected: "CUDA or host-accessible memory".into(),
            found: format!("{:?} memory of {}", buffer.memory(), buffer.device()),
        })
    }

    fn own_memory(&self, buffer: &Buffer, op: &'static str) -> Result<()> {
        if buffer.device().kind != BackendKind::Cuda {
            return Err(Error::BackendMismatch {
                operation: op,
                expected: "CUDA memory".into(),
                found: format!("{:?} memory of {}", buffer.memory(), buffer.device()),
            });
        }
        Ok(())
    }

    /// Reports (and clears) a failure found outside a call.
    fn take_error(&self) -> Result<()> {
        match lock(&self.inner.errors).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(crate) fn same_device(&self, other: DeviceId) -> bool {
        self.inner.dev.id == other
    }
}

impl Stream for CudaStream {
    type Backend = CudaBackend;

    fn device_id(&self) -> DeviceId {
        self.inner.dev.id
    }
    fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.inner.owned)
    }
    fn raw_handle(&self) -> usize {
        self.inner.raw as usize
    }
    fn flags(&self) -> StreamFlags {
        self.inner.flags
    }
    fn priority(&self) -> i32 {
        self.inner.priority
    }

    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = self.addr(src, src_offset, len, "copy")?;
        let d = self.addr(dst, dst_offset, len, "copy")?;
        if len == 0 {
            return Ok(());
        }
        self.inner.dev.bind()?;
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
            // SAFETY: both ranges were checked; contexts are retained by the buffers.
            let status = unsafe { (api.cuMemcpyPeerAsync)(d, dst_ctx, s, src_ctx, len, self.inner.raw) };
            check(api, status, "cuMemcpyPeerAsync")?;
        } else {
            // SAFETY: both ranges were checked; unified addressing resolves the kind.
            check(api, unsafe { (api.cuMemcpyAsync)(d, s, len, self.inner.raw) }, "cuMemcpyAsync")?;
        }
        self.inner.park([Keep::Buffer(src.clone()), Keep::Buffer(dst.clone())])
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.own_memory(dst, "memset")?;
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: the range was checked against a live CUDA allocation.
        check(api, unsafe { (api.cuMemsetD8Async)(d, value, len, self.inner.raw) }, "cuMemsetD8Async")?;
        self.inner.park([Keep::Buffer(dst.clone())])
    }

    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        let d = self.addr(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: `src` is borrowed until the synchronize below has seen the copy finish.
        let status = unsafe { (api.cuMemcpyAsync)(d, src.as_ptr() as usize as CUdeviceptr, src.len(), self.inner.raw) };
        check(api, status, "cuMemcpyAsync")?;
        self.synchronize()
    }

    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        let s = self.addr(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: `dst` is borrowed until the synchronize below has seen the copy finish.
        let status =
            unsafe { (api.cuMemcpyAsync)(dst.as_mut_ptr() as usize as CUdeviceptr, s, dst.len(), self.inner.raw) };
        check(api, status, "cuMemcpyAsync")?;
        self.synchronize()
    }

    fn record(&self, event: &CudaEvent) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: both handles are live.
        check(api, unsafe { (api.cuEventRecord)(event.raw(), self.inner.raw) }, "cuEventRecord")
    }

    fn wait(&self, event: &CudaEvent) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: both handles are live.
        check(api, unsafe { (api.cuStreamWaitEvent)(self.inner.raw, event.raw(), 0) }, "cuStreamWaitEvent")
    }

    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        let user = Box::into_raw(Box::new(Callback { f, errors: self.inner.errors.clone(), stream: self.name() }));
        // SAFETY: `run_callback` takes ownership of `user` when the stream reaches it.
        let status = unsafe { (api.cuLaunchHostFunc)(self.inner.raw, Some(run_callback), user.cast()) };
        if status != sys::SUCCESS {
            // SAFETY: the driver refused the callback, so `user` was not handed over.
            drop(unsafe { Box::from_raw(user) });
        }
        check(api, status, "cuLaunchHostFunc")
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let k = kernel.handle_on::<CudaKernel>(self.device_id(), "launch")?;
        config.validate()?;
        let gpuport_driver::kernel_args::PackedArgs { mut values, mut keep } =
            gpuport_driver::kernel_args::pack_kernel_args(args, |b| self.own_memory(b, "launch"))?;
        keep.push(Keep::Kernel(kernel.clone()));
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();
        self.inner.dev.bind()?;
        let api = self.api();
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        // SAFETY: `params` points at one value per kernel parameter, alive for the call (the
        // driver copies them); the function belongs to this device's context.
        let status = unsafe {
            (api.cuLaunchKernel)(
                k.func,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                config.shared_mem_bytes,
                self.inner.raw,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(api, status, "cuLaunchKernel")?;
        self.inner.park(keep)
    }

    fn query(&self) -> Result<bool> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: the stream handle is live.
        check_ready(api, unsafe { (api.cuStreamQuery)(self.inner.raw) }, "cuStreamQuery")
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: the stream handle is live.
        check(api, unsafe { (api.cuStreamSynchronize)(self.inner.raw) }, "cuStreamSynchronize")?;
        self.inner.release_parked();
        self.take_error()
    }
}
