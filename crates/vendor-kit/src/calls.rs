//! The vendor calls the vendor kit makes: one checked driver or runtime call per method,
//! implemented by each vendor backend's device context. Everything the kit builds — the
//! device with its streams' kept errors and default streams, streams with ownership,
//! events, memory, modules, the `Stream` data path, host callbacks — is written once over
//! these calls; a backend writes only them, its loader, its `result` layer, its context
//! handling and its device facts.

use std::ffi::{c_void, CStr};

use crate::kernel_args::ArgSlot;
use gpuport_core::{
    BackendKind, DeviceId, DeviceInfo, DlpackDevices, EventFlags, HostAllocFlags, LaunchConfig, ModuleImage,
    PointerAttributes, Result, StreamFlags,
};

/// A vendor handle and its raw value (what `raw_handle` shows and `wrap_stream` /
/// `wrap_event` take). Vendor handles are opaque pointers; a test's fake may use numbers.
pub trait RawHandle: Copy + PartialEq + 'static {
    /// The raw value.
    fn to_raw(self) -> usize;
    /// The handle of a raw value.
    fn from_raw(raw: usize) -> Self;
}

impl<T: 'static> RawHandle for *mut T {
    fn to_raw(self) -> usize {
        self as usize
    }
    fn from_raw(raw: usize) -> Self {
        raw as *mut T
    }
}

impl RawHandle for usize {
    fn to_raw(self) -> usize {
        self
    }
    fn from_raw(raw: usize) -> Self {
        raw
    }
}

/// The vendor calls the vendor kit makes, implemented by a backend's device context (each
/// method one checked driver call; the kit makes the device current first, except where a
/// method says it binds itself).
pub trait VendorCalls: Send + Sync + Sized + 'static {
    /// The vendor's stream handle (`CUstream`, `hipStream_t`).
    type Stream: RawHandle;
    /// The vendor's event handle.
    type Event: RawHandle;

    /// The device (its `kind` is the backend's: `BackendKind::Cuda`, a plugin's name).
    fn device_id(&self) -> DeviceId;
    /// The backend: the device's kind.
    fn kind(&self) -> BackendKind {
        self.device_id().kind
    }
    /// The DLPack device types of the backend, when only the calls table knows them (a
    /// loaded plugin's table declares its own); `None` keeps the backend's
    /// `Backend::DLPACK`.
    fn dlpack_devices(&self) -> Option<DlpackDevices> {
        None
    }
    /// Makes the device current on the calling thread.
    fn bind(&self) -> Result<()>;
    /// `Device::make_current`, for code outside gpuport that reads the current device:
    /// [`VendorCalls::bind`] (the default). A backend whose binding is no current device
    /// a foreign library could read says `Unsupported` instead.
    fn make_current(&self) -> Result<()> {
        self.bind()
    }

    // --- The device ---------------------------------------------------------------------

    /// Facts about the device (the backend's own queries; binds itself where it must).
    fn info(&self) -> Result<DeviceInfo>;
    /// Whether this device can address `peer`'s memory (`peer` is another device).
    fn can_access_peer(&self, peer: &Self) -> Result<bool>;
    /// Lets this device address `peer`'s memory (`peer` is another device).
    fn enable_peer_access(&self, peer: &Self) -> Result<()>;
    /// What the driver says of `addr` (binds itself).
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes>;

    // --- Streams and events -------------------------------------------------------------

    /// The driver's stream priorities as `(least, greatest)`.
    fn stream_priority_range(&self) -> Result<(i32, i32)>;
    /// A new stream with `flags` and `priority` (already within the driver's range).
    fn stream_create(&self, flags: StreamFlags, priority: i32) -> Result<Self::Stream>;
    /// The per-thread default stream's handle (CUDA's `CU_STREAM_PER_THREAD`), or
    /// `Unsupported` with the reason where the vendor reaches it otherwise.
    fn per_thread_stream_handle(&self) -> Result<Self::Stream>;
    /// The handle of a raw stream value a caller wraps (`Device::wrap_stream`). The
    /// provided method takes the value as it is; a backend whose handles carry more than
    /// the value (a plugin's progress counters) asks for the rest.
    ///
    /// # Safety
    /// `raw` is a live stream of this device.
    unsafe fn wrap_stream_handle(&self, raw: usize) -> Result<Self::Stream> {
        Ok(RawHandle::from_raw(raw))
    }
    /// A new event with `flags` (the vendor's own bits) on the bound device.
    fn event_create(&self, flags: EventFlags) -> Result<Self::Event>;
    /// Blocks until the event's latest record has completed.
    fn event_synchronize(&self, event: Self::Event) -> Result<()>;
    /// Milliseconds between two completed records (`NotReady` while one is pending).
    fn event_elapsed_ms(&self, start: Self::Event, end: Self::Event) -> Result<f32>;
    /// Records `event` on `stream`.
    fn event_record(&self, event: Self::Event, stream: Self::Stream) -> Result<()>;
    /// A new event without timing, recorded on `stream` (destroyed again when the record
    /// fails).
    fn fence_event(&self, stream: Self::Stream) -> Result<Self::Event> {
        let event = self.event_create(EventFlags::DISABLE_TIMING)?;
        if let Err(e) = self.event_record(event, stream) {
            let _ = self.event_destroy(event);
            return Err(e);
        }
        Ok(event)
    }
    /// Whether the event's work has completed.
    fn event_done(&self, event: Self::Event) -> Result<bool>;
    /// Destroys an event (it may still be pending).
    fn event_destroy(&self, event: Self::Event) -> Result<()>;
    /// Whether all of the stream's work has completed.
    fn stream_done(&self, stream: Self::Stream) -> Result<bool>;
    /// Blocks until the stream's work has completed.
    fn stream_synchronize(&self, stream: Self::Stream) -> Result<()>;
    /// Blocks until all of the device's work has completed.
    fn device_synchronize(&self) -> Result<()>;
    /// Destroys a stream (its queued work still completes).
    fn stream_destroy(&self, stream: Self::Stream) -> Result<()>;
    /// Queues a host function on `stream` that calls
    /// [`run_host_callback`](crate::run_host_callback)`(user)` when the
    /// stream reaches it: once everything queued before it has completed (earlier host
    /// functions have returned), with later work waiting until it returns, as
    /// `cuLaunchHostFunc` and `hipLaunchHostFunc` order them — a stream's last callback
    /// frees what its callbacks share. On an error, `user` was not handed over.
    fn launch_host_callback(&self, stream: Self::Stream, user: *mut c_void) -> Result<()>;

    // --- The stream data path -----------------------------------------------------------

    /// Makes later work on `stream` wait for the latest record of `event`.
    fn stream_wait_event(&self, stream: Self::Stream, event: Self::Event) -> Result<()>;
    /// Queues a copy of `len` bytes from `src` to `dst` on `stream`; either address may be
    /// device, pinned, managed or host memory (unified addressing says which).
    ///
    /// # Safety
    /// Both ranges stay valid for `len` bytes until the copy has run.
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, stream: Self::Stream) -> Result<()>;
    /// Queues a copy between the memory of two devices of this backend on `stream`.
    ///
    /// # Safety
    /// As for [`VendorCalls::memcpy_async`]; both devices are open.
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    /// Queues a copy of `height` rows of `width` bytes on `stream`: row `i` from
    /// `src + i * src_pitch` to `dst + i * dst_pitch`, either side device, pinned, managed
    /// or host memory (unified addressing says which). The kit passes only pitches of at
    /// least `width` and at most [`MAX_PITCH`](crate::MAX_PITCH), and at least one
    /// row.
    ///
    /// The provided method queues one [`VendorCalls::memcpy_async`] per row; a runtime
    /// with a 2D copy (`cuMemcpy2DAsync`, `hipMemcpy2DAsync`) overrides it with one call.
    ///
    /// # Safety
    /// As for [`VendorCalls::memcpy_async`], for every row.
    #[allow(clippy::too_many_arguments)] // the driver call's own shape
    unsafe fn memcpy_2d_async(
        &self,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        stream: Self::Stream,
    ) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { memcpy_rows(self, dst, dst_pitch, src, src_pitch, width, height, stream) }
    }
    /// Queues setting `len` bytes at `dst` (this backend's memory) to `value` on `stream`.
    ///
    /// # Safety
    /// The range stays valid until the memset has run.
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, stream: Self::Stream) -> Result<()>;
    /// Sets `len` bytes at `dst` (this backend's memory) to `value`, ordered on the legacy
    /// default stream; it may return before the bytes land (the kit then waits for that
    /// stream).
    ///
    /// # Safety
    /// The range is valid memory of this device.
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()>;
    /// Queues `kernel` on `stream` with the launch geometry of `config` and one packed
    /// argument per kernel parameter (a driver taking a pointer per parameter gets them
    /// from [`param_pointers`](crate::kernel_args::param_pointers)).
    ///
    /// # Safety
    /// The addresses among `args` are memory of this device, alive until the launch has
    /// run; the kernel's module stays loaded until then.
    unsafe fn launch_kernel(
        &self,
        function: Self::Function,
        config: &LaunchConfig,
        stream: Self::Stream,
        args: &mut [ArgSlot],
    ) -> Result<()>;

    /// The legacy default stream's handle (CUDA's `CU_STREAM_LEGACY`, HIP's null stream).
    fn legacy_stream_handle(&self) -> Self::Stream;

    // --- Memory -------------------------------------------------------------------------

    /// The device's memory in bytes (no device allocation larger is asked for).
    fn total_memory(&self) -> usize;
    /// Device memory of `bytes` bytes (the device is current).
    fn mem_alloc(&self, bytes: usize) -> Result<u64>;
    /// Managed memory of `bytes` bytes, attached globally (the device is current).
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64>;
    /// Pinned host memory of `bytes` bytes (the device is current).
    fn mem_alloc_host(&self, bytes: usize, flags: HostAllocFlags) -> Result<u64>;
    /// `Unsupported` unless the driver can both allocate and free in stream order.
    fn stream_ordered_supported(&self) -> Result<()>;
    /// Device memory allocated in `stream`'s order.
    ///
    /// # Safety
    /// `stream` is a live stream of this device, which is current.
    unsafe fn mem_alloc_async(&self, bytes: usize, stream: Self::Stream) -> Result<u64>;
    /// Frees device or managed memory.
    ///
    /// # Safety
    /// `addr` came from [`VendorCalls::mem_alloc`] or [`VendorCalls::mem_alloc_managed`]
    /// and is freed once, with no work left that uses it.
    unsafe fn mem_free(&self, addr: u64) -> Result<()>;
    /// Frees pinned host memory.
    ///
    /// # Safety
    /// `addr` came from [`VendorCalls::mem_alloc_host`] and is freed once, unused.
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()>;
    /// Frees stream-ordered memory on `stream`, after the work queued there.
    ///
    /// # Safety
    /// `addr` came from [`VendorCalls::mem_alloc_async`] and is freed once; `stream` is
    /// live.
    unsafe fn mem_free_async(&self, addr: u64, stream: Self::Stream) -> Result<()>;
    /// Page-locks `len` bytes of host memory at `addr` for every context of the process
    /// (`cuMemHostRegister` / `hipHostRegister`, portable), so that this device copies to
    /// and from it asynchronously. `Unsupported` where the driver has no such call (the
    /// default).
    ///
    /// # Safety
    /// `[addr, addr + len)` is host memory that stays allocated until
    /// [`VendorCalls::host_unregister`] is called for `addr`.
    unsafe fn host_register(&self, addr: u64, len: usize) -> Result<()> {
        let _ = (addr, len);
        Err(gpuport_core::Error::unsupported(self.kind(), "registering host memory"))
    }
    /// Releases a registration made by [`VendorCalls::host_register`] (the memory itself
    /// stays allocated).
    ///
    /// # Safety
    /// `addr` was registered and is unregistered once, with no work left that uses it.
    unsafe fn host_unregister(&self, addr: u64) -> Result<()> {
        let _ = addr;
        Err(gpuport_core::Error::unsupported(self.kind(), "registering host memory"))
    }

    // --- Modules ------------------------------------------------------------------------

    /// A loaded module's handle (`CUmodule`, `hipModule_t`).
    type Module: Copy + 'static;
    /// A kernel function's handle (`CUfunction`, `hipFunction_t`): what a launch takes.
    type Function: Copy + 'static;
    /// Loads `image` after checking it is an image this vendor loads and holds everything
    /// its own headers claim (the drivers read as far as those say, with no length given);
    /// another kind of image is `Unsupported`, a malformed one `InvalidArgument`.
    fn module_load(&self, image: ModuleImage<'_>) -> Result<Self::Module>;
    /// Unloads a module.
    ///
    /// # Safety
    /// `module` came from [`VendorCalls::module_load`], is unloaded once, and no kernel of
    /// it is used afterwards.
    unsafe fn module_unload(&self, module: Self::Module) -> Result<()>;
    /// The kernel `name` of `module`.
    ///
    /// # Safety
    /// `module` is loaded.
    unsafe fn module_function(&self, module: Self::Module, name: &CStr) -> Result<Self::Function>;

    /// The runtime compiler for this device and the target it compiles for, loaded on
    /// first use; `Unsupported` (the provided method) where the backend has none.
    fn compile_target(&self) -> Result<crate::compile::CompileTarget> {
        Err(gpuport_core::Error::unsupported(self.device_id().kind, "compiling kernels from source"))
    }
}

/// A 2D copy as one [`VendorCalls::memcpy_async`] per row: the provided
/// [`VendorCalls::memcpy_2d_async`], and the fallback of a driver whose 2D copy is
/// optional.
///
/// # Safety
/// As for [`VendorCalls::memcpy_2d_async`].
#[allow(clippy::too_many_arguments)] // the driver call's own shape
pub unsafe fn memcpy_rows<V: VendorCalls>(
    calls: &V,
    dst: u64,
    dst_pitch: usize,
    src: u64,
    src_pitch: usize,
    width: usize,
    height: usize,
    stream: V::Stream,
) -> Result<()> {
    for row in 0..height as u64 {
        let (d, s) = (dst + row * dst_pitch as u64, src + row * src_pitch as u64);
        // SAFETY: forwarded, row by row.
        unsafe { calls.memcpy_async(d, s, width, stream) }?;
    }
    Ok(())
}
