//! HIP streams. Queued work's buffers and kernels are parked (see
//! `gpuport_driver::parking`) until an event after them completes. Host callbacks use
//! `hipLaunchHostFunc` where the runtime has it, else `hipStreamAddCallback` (ROCm 5.2);
//! both run the closure inside `catch_unwind`, so nothing unwinds into the runtime.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuport_core::{
    BackendKind, Buffer, DeviceId, Error, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream,
    StreamFlags,
};
use gpuport_driver::parking::{Fence, Keep, Parked};
use gpuport_driver::release::Deferred;

use crate::context::DeviceCtx;
use crate::event::RocmEvent;
use crate::module::RocmKernel;
use crate::result::{check, check_ready};
use crate::sys::{self, hipEvent_t, hipStream_t, Status};
use crate::RocmBackend;

pub(crate) type ErrorSlot = Arc<Mutex<Option<Error>>>;

pub(crate) struct StreamInner {
    pub(crate) dev: Arc<DeviceCtx>,
    pub(crate) raw: hipStream_t,
    owned: bool,
    flags: StreamFlags,
    priority: i32,
    pub(crate) errors: ErrorSlot,
    parked: Mutex<Parked<hipEvent_t>>,
}

// SAFETY: HIP stream and event handles may be used from any thread; the parked lists are
// behind a mutex.
unsafe impl Send for StreamInner {}
// SAFETY: as above.
unsafe impl Sync for StreamInner {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Fence for StreamInner {
    type Handle = hipEvent_t;

    fn seal(&self) -> Result<hipEvent_t> {
        let api = &self.dev.rt.api;
        let mut ev: hipEvent_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 2 = hipEventDisableTiming.
        check(api, unsafe { (api.hipEventCreateWithFlags)(&mut ev, 2) }, "hipEventCreateWithFlags")?;
        // SAFETY: both handles are live.
        if let Err(e) = check(api, unsafe { (api.hipEventRecord)(ev, self.raw) }, "hipEventRecord") {
            self.destroy(ev);
            return Err(e);
        }
        Ok(ev)
    }

    fn done(&self, ev: hipEvent_t) -> Result<bool> {
        let api = &self.dev.rt.api;
        // SAFETY: a live event created by `seal`.
        check_ready(api, unsafe { (api.hipEventQuery)(ev) }, "hipEventQuery")
    }

    fn destroy(&self, ev: hipEvent_t) {
        let api = &self.dev.rt.api;
        // SAFETY: created by `seal`, destroyed once.
        if let Err(e) = check(api, unsafe { (api.hipEventDestroy)(ev) }, "hipEventDestroy") {
            log::warn!("{e}");
        }
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.dev.bind().is_err() {
            return;
        }
        let api = &self.dev.rt.api;
        if !lock(&self.parked).is_empty() {
            // Parked buffers may still be in use by queued work: wait before releasing.
            // SAFETY: the stream handle is live.
            if let Err(e) = check(api, unsafe { (api.hipStreamSynchronize)(self.raw) }, "hipStreamSynchronize") {
                log::warn!("synchronizing a dropped stream: {e}");
            }
            lock(&self.parked).release_all(&*self);
        }
        if self.owned {
            // SAFETY: created by hipStreamCreateWithPriority, destroyed once.
            if let Err(e) = check(api, unsafe { (api.hipStreamDestroy)(self.raw) }, "hipStreamDestroy") {
                log::warn!("{e}");
            }
        }
    }
}

/// A HIP stream.
#[derive(Clone)]
pub struct RocmStream {
    pub(crate) inner: Arc<Deferred<StreamInner>>,
}

struct Callback {
    f: HostCallback,
    errors: ErrorSlot,
    stream: String,
}

fn run_boxed(user: *mut c_void) {
    // SAFETY: `user` is the `Box<Callback>` leaked by `host_callback`, run exactly once.
    let cb = unsafe { Box::from_raw(user.cast::<Callback>()) };
    // The runtime's callback thread may make no HIP call: everything the callback drops
    // (its captures, the last clone of a handle) is released on the release thread.
    gpuport_driver::release::restricted(move || {
        let Callback { f, errors, stream } = *cb;
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            lock(&errors).get_or_insert(Error::StreamWork { stream, message: "host callback panicked".into() });
        }
    });
}

/// For `hipLaunchHostFunc`.
unsafe extern "C" fn host_fn(user: *mut c_void) {
    run_boxed(user);
}

/// For `hipStreamAddCallback`.
unsafe extern "C" fn stream_callback(_stream: hipStream_t, _status: Status, user: *mut c_void) {
    run_boxed(user);
}

impl RocmStream {
    pub(crate) fn create(dev: &Arc<DeviceCtx>, flags: StreamFlags, priority: i32) -> Result<Self> {
        dev.bind()?;
        let api = &dev.rt.api;
        let (mut least, mut greatest): (c_int, c_int) = (0, 0);
        // SAFETY: valid out-pointers.
        let status = unsafe { (api.hipDeviceGetStreamPriorityRange)(&mut least, &mut greatest) };
        check(api, status, "hipDeviceGetStreamPriorityRange")?;
        let priority = priority.clamp(greatest.min(least), greatest.max(least));
        let hip_flags = if flags.contains(StreamFlags::NON_BLOCKING) { sys::STREAM_NON_BLOCKING } else { 0 };
        let mut raw: hipStream_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the device is current.
        let status = unsafe { (api.hipStreamCreateWithPriority)(&mut raw, hip_flags, priority) };
        check(api, status, "hipStreamCreateWithPriority")?;
        Ok(Self::from_parts(dev, raw, true, flags, priority))
    }

    pub(crate) fn from_parts(
        dev: &Arc<DeviceCtx>,
        raw: hipStream_t,
        owned: bool,
        flags: StreamFlags,
        priority: i32,
    ) -> Self {
        RocmStream {
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
        &self.inner.dev.rt.api
    }

    fn park(&self, items: impl IntoIterator<Item = Keep>) -> Result<()> {
        lock(&self.inner.parked).park(items, &**self.inner)
    }

    fn addr(&self, buffer: &Buffer, offset: usize, len: usize, op: &'static str) -> Result<u64> {
        if buffer.device().kind == BackendKind::Rocm || buffer.is_host_accessible() {
            return buffer.range_addr(offset, len);
        }
        Err(Error::BackendMismatch {
            operation: op,
            expected: "ROCm or host-accessible memory".into(),
            found: format!("{:?} memory of {}", buffer.memory(), buffer.device()),
        })
    }

    fn own_memory(&self, buffer: &Buffer, op: &'static str) -> Result<()> {
        if buffer.device().kind != BackendKind::Rocm {
            return Err(Error::mismatch(op, BackendKind::Rocm, buffer.device()));
        }
        Ok(())
    }

    pub(crate) fn same_device(&self, other: DeviceId) -> bool {
        self.inner.dev.id == other
    }
}

fn ptr(addr: u64) -> *mut c_void {
    addr as usize as *mut c_void
}

impl Stream for RocmStream {
    type Backend = RocmBackend;

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
        let peer = sd.kind == BackendKind::Rocm
            && dd.kind == BackendKind::Rocm
            && sd != dd
            && !src.is_host_accessible()
            && !dst.is_host_accessible();
        let status = if peer {
            // SAFETY: both ranges were checked; both devices exist.
            unsafe {
                (api.hipMemcpyPeerAsync)(ptr(d), dd.ordinal as c_int, ptr(s), sd.ordinal as c_int, len, self.inner.raw)
            }
        } else {
            // SAFETY: both ranges were checked; unified addressing infers the direction.
            unsafe { (api.hipMemcpyAsync)(ptr(d), ptr(s), len, sys::MEMCPY_DEFAULT, self.inner.raw) }
        };
        check(api, status, if peer { "hipMemcpyPeerAsync" } else { "hipMemcpyAsync" })?;
        self.park([Keep::Buffer(src.clone()), Keep::Buffer(dst.clone())])
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.own_memory(dst, "memset")?;
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: the range was checked against a live ROCm allocation.
        check(api, unsafe { (api.hipMemsetAsync)(ptr(d), c_int::from(value), len, self.inner.raw) }, "hipMemsetAsync")?;
        self.park([Keep::Buffer(dst.clone())])
    }

    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        let d = self.addr(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: `src` stays borrowed until the synchronize below.
        let status = unsafe {
            (api.hipMemcpyAsync)(ptr(d), src.as_ptr().cast(), src.len(), sys::MEMCPY_DEFAULT, self.inner.raw)
        };
        check(api, status, "hipMemcpyAsync")?;
        self.synchronize()
    }

    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        let s = self.addr(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: `dst` stays borrowed until the synchronize below.
        let status = unsafe {
            (api.hipMemcpyAsync)(dst.as_mut_ptr().cast(), ptr(s), dst.len(), sys::MEMCPY_DEFAULT, self.inner.raw)
        };
        check(api, status, "hipMemcpyAsync")?;
        self.synchronize()
    }

    fn record(&self, event: &RocmEvent) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: both handles are live.
        check(api, unsafe { (api.hipEventRecord)(event.raw(), self.inner.raw) }, "hipEventRecord")
    }

    fn wait(&self, event: &RocmEvent) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: both handles are live.
        check(api, unsafe { (api.hipStreamWaitEvent)(self.inner.raw, event.raw(), 0) }, "hipStreamWaitEvent")
    }

    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.inner.dev.bind()?;
        let rt = &self.inner.dev.rt;
        let stream = format!("{:#x} on {}", self.inner.raw as usize, self.inner.dev.id);
        let user = Box::into_raw(Box::new(Callback { f, errors: self.inner.errors.clone(), stream })).cast::<c_void>();
        let (status, call) = match rt.launch_host_func() {
            // SAFETY: `host_fn` takes ownership of `user` when the stream reaches it.
            Some(launch) => (unsafe { launch(self.inner.raw, Some(host_fn), user) }, "hipLaunchHostFunc"),
            // SAFETY: as above, through the older callback API.
            None => (
                unsafe { (rt.api.hipStreamAddCallback)(self.inner.raw, Some(stream_callback), user, 0) },
                "hipStreamAddCallback",
            ),
        };
        if status != sys::SUCCESS {
            // SAFETY: the runtime refused the callback, so `user` was not handed over.
            drop(unsafe { Box::from_raw(user.cast::<Callback>()) });
        }
        check(&rt.api, status, call)
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let k = kernel.handle_on::<RocmKernel>(self.device_id(), "launch")?;
        config.validate()?;
        let gpuport_driver::kernel_args::PackedArgs { mut values, mut keep } =
            gpuport_driver::kernel_args::pack_kernel_args(args, |b| self.own_memory(b, "launch"))?;
        keep.push(Keep::Kernel(kernel.clone()));
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();
        self.inner.dev.bind()?;
        let api = self.api();
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        // SAFETY: one value per kernel parameter, alive for the call (the runtime copies
        // them); the function belongs to this device.
        let status = unsafe {
            (api.hipModuleLaunchKernel)(
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
        check(api, status, "hipModuleLaunchKernel")?;
        self.park(keep)
    }

    fn query(&self) -> Result<bool> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: live stream handle.
        check_ready(api, unsafe { (api.hipStreamQuery)(self.inner.raw) }, "hipStreamQuery")
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.dev.bind()?;
        let api = self.api();
        // SAFETY: live stream handle.
        check(api, unsafe { (api.hipStreamSynchronize)(self.inner.raw) }, "hipStreamSynchronize")?;
        lock(&self.inner.parked).release_all(&**self.inner);
        match lock(&self.inner.errors).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
