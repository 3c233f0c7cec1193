//! The static trait tier: [`Backend`], [`Device`], [`Stream`], [`Event`].
//!
//! These are zero-cost when the backend is known at compile time (compare wgpu-hal's
//! `Api`). The facade crate adds object-safe twins and enum dispatch on top.

use std::path::PathBuf;

use crate::compile::{CompileOptions, KernelSource};
use crate::copy_2d::Copy2d;
use crate::dlpack_device::DlpackDevices;
use crate::dtype::{as_bytes, as_bytes_mut, zeroed_vec, Element};
use crate::error::{Error, Result};
use crate::flags::{DefaultStream, EventFlags, HostAllocFlags, Ownership, StreamFlags};
use crate::id::{BackendKind, DeviceId};
use crate::kernel::{Kernel, KernelArg, LaunchConfig, Module, ModuleImage};
use crate::memory::{Buffer, PointerAttributes};

/// A closure run on the host when a stream reaches it.
pub type HostCallback = Box<dyn FnOnce() + Send + 'static>;

/// A C function run on the host when a stream reaches it, with the pointer it was queued
/// with: the shape C APIs take (`cuLaunchHostFunc`, a plugin's table), queued by
/// [`Stream::host_function`] without wrapping it in a closure. It must not unwind: a Rust
/// function passed as one catches its own panics (`catch_unwind`), or the process aborts
/// at the `extern "C"` boundary.
pub type HostFunction = unsafe extern "C" fn(user: *mut std::ffi::c_void);

/// How to load a backend.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// An exact library file to open instead of the default search (the value of
    /// `GPUPORT_CUDA_LIBRARY` / `GPUPORT_HIP_LIBRARY` when read from the environment).
    pub library_path: Option<PathBuf>,
}

/// Facts about a device. Fields a backend cannot answer are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's id.
    pub id: DeviceId,
    /// Marketing or model name.
    pub name: String,
    /// Total memory in bytes; 0 when the backend cannot tell.
    pub total_memory: u64,
    /// CUDA compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Architecture name: AMD's target ID with its feature settings
    /// (`gfx90a:sramecc+:xnack-`, as `gcnArchName`), the host's CPU architecture, ….
    pub arch: Option<String>,
    /// Streaming multiprocessors / compute units / CPU threads.
    pub multiprocessors: Option<u32>,
    /// PCI bus id (`0000:65:00.0`).
    pub pci_bus_id: Option<String>,
    /// Device UUID.
    pub uuid: Option<[u8; 16]>,
}

/// A family of devices reached through one runtime: the host, CUDA, ROCm, a plugin.
pub trait Backend: Send + Sync + Sized + 'static {
    /// Which kind of backend this is. A backend type that serves several backends named at
    /// run time (device plugins loaded from libraries, each named by its table) gives its
    /// family here and each one's kind through [`Backend::kind`].
    const KIND: BackendKind;
    /// The DLPack device types of its device, pinned host and managed memory. The
    /// interchange layer reads this for every backend, plugins included (through
    /// [`Backend::dlpack_devices`] and [`Device::dlpack_devices`], which a backend type
    /// serving several backends answers for each).
    const DLPACK: DlpackDevices;
    /// Its device handle.
    type Device: Device<Backend = Self>;
    /// Its stream handle.
    type Stream: Stream<Backend = Self>;
    /// Its event handle.
    type Event: Event<Backend = Self>;

    /// Loads the runtime (opens the library and resolves required symbols). Never panics:
    /// a missing library, symbol or device is an error that says which.
    fn load(opts: &LoadOptions) -> Result<Self>;
    /// This backend's kind: [`Backend::KIND`] unless the backend is named at run time.
    /// Its devices' ids carry this kind.
    fn kind(&self) -> BackendKind {
        Self::KIND
    }
    /// This backend's DLPack device types: [`Backend::DLPACK`] unless they are known only
    /// at run time.
    fn dlpack_devices(&self) -> DlpackDevices {
        Self::DLPACK
    }
    /// Runtime and driver versions, in the vendor's words.
    fn version(&self) -> String;
    /// The devices this backend can open.
    fn devices(&self) -> Result<Vec<DeviceInfo>>;
    /// Opens device `ordinal`.
    fn open(&self, ordinal: u32) -> Result<Self::Device>;
}

/// One device. Handles are cheap to clone and keep the device's context alive.
pub trait Device: Clone + Send + Sync + 'static {
    /// The backend.
    type Backend: Backend<Device = Self>;

    /// The device's id.
    fn id(&self) -> DeviceId;
    /// Facts about the device.
    fn info(&self) -> Result<DeviceInfo>;
    /// The DLPack device types of its backend ([`Backend::dlpack_devices`]).
    fn dlpack_devices(&self) -> DlpackDevices {
        <Self::Backend as Backend>::DLPACK
    }

    /// Allocates `bytes` of device memory, synchronously. Zero bytes gives an empty buffer.
    fn alloc(&self, bytes: usize) -> Result<Buffer>;
    /// Allocates `bytes` of device memory ordered on `stream`: usable by work queued on
    /// `stream` after this call, freed in stream order when dropped.
    fn alloc_async(&self, bytes: usize, stream: &<Self::Backend as Backend>::Stream) -> Result<Buffer>;
    /// Allocates page-locked host memory usable for asynchronous copies.
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer>;
    /// Allocates managed (unified) memory, where the vendor has it.
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer>;
    /// Page-locks host memory someone else allocated (another backend's pinned memory,
    /// or any host-accessible buffer) for this device's copies (`cuMemHostRegister`,
    /// `hipHostRegister`): the returned buffer names the same bytes as `host`, keeps it
    /// alive, and unregisters them when its last clone drops. Copies between this
    /// device and the returned buffer are asynchronous, where copies into memory the
    /// driver does not know as page-locked make the caller wait until they are done.
    ///
    /// Memory this backend already knows as page-locked (its own pinned or managed
    /// memory) is returned as it is; memory that is not host-accessible is
    /// `InvalidArgument`. `Unsupported` where the backend has no such call (the default:
    /// a backend whose copies never wait on the host has nothing to gain).
    fn register_host(&self, host: &Buffer) -> Result<Buffer> {
        let _ = host;
        Err(Error::unsupported(self.id().kind, "registering host memory"))
    }
    /// Sets `len` bytes at `offset` of `dst` to `value`, synchronously.
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;

    /// Creates a stream. `priority` is clamped into [`Device::stream_priority_range`].
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<<Self::Backend as Backend>::Stream>;
    /// `(least, greatest)` stream priority; lower numbers are higher priority, as in CUDA.
    fn stream_priority_range(&self) -> Result<(i32, i32)>;
    /// The legacy or per-thread default stream, as a borrowed handle.
    fn default_stream(&self, which: DefaultStream) -> Result<<Self::Backend as Backend>::Stream>;
    /// Wraps a stream handle created by someone else, without owning it.
    ///
    /// # Safety
    /// `raw` must be a live stream handle of this backend on this device and stay live while
    /// the returned handle (and work queued through it) is in use. Backends that can check
    /// a handle do, and return [`crate::Error::InvalidHandle`].
    unsafe fn wrap_stream(&self, raw: usize) -> Result<<Self::Backend as Backend>::Stream>;
    /// Creates an event.
    fn create_event(&self, flags: EventFlags) -> Result<<Self::Backend as Backend>::Event>;
    /// Wraps an event handle created by someone else, without owning it.
    ///
    /// # Safety
    /// As for [`Device::wrap_stream`], for an event handle.
    unsafe fn wrap_event(&self, raw: usize) -> Result<<Self::Backend as Backend>::Event>;
    /// Blocks until all work on all of this device's streams has completed.
    fn synchronize(&self) -> Result<()>;
    /// Makes this device the calling thread's current device in its vendor's runtime (a
    /// CUDA primary context, HIP's `hipSetDevice`), for code outside gpuport that takes
    /// the current device rather than a device argument — NCCL's `ncclCommInitRank`, a
    /// cuBLAS handle. gpuport's own calls never need it (each makes its device current
    /// itself), and any of them may change what is current, so call this right before the
    /// foreign call. `Unsupported` (the default) where the backend has no such notion.
    fn make_current(&self) -> Result<()> {
        Err(crate::Error::unsupported(
            self.id().kind,
            "a current device (the backend has no per-thread current device)",
        ))
    }

    /// Whether this device can access `peer`'s memory directly.
    fn can_access_peer(&self, peer: &Self) -> Result<bool>;
    /// Enables direct access from this device to `peer`'s memory (idempotent).
    fn enable_peer_access(&self, peer: &Self) -> Result<()>;
    /// What this backend knows about `addr`.
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes>;

    /// Loads a module.
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module>;
    /// Looks up a kernel of a module loaded on this device: by its name in the image, or
    /// by a name expression the module was compiled with (`scale<float>`).
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel>;

    /// Compiles `source` for this device with the vendor's runtime compiler and loads the
    /// result (NVRTC on CUDA, hiprtc on ROCm; cached on disk and in the process). A
    /// compile error is [`crate::Error::Compile`] with the compiler's log; a backend
    /// without a compiler answers `Unsupported` (the provided method: software devices'
    /// kernels are registered Rust functions).
    fn compile(&self, source: &KernelSource, options: &CompileOptions) -> Result<Module> {
        let _ = (source, options);
        Err(crate::Error::unsupported(
            self.id().kind,
            "compiling kernels from source (this backend's kernels are registered functions or prebuilt images)",
        ))
    }
}

/// An ordered queue of work on one device. Operations return once queued; the work runs
/// asynchronously, in order. Cloning shares the stream; an owned stream is destroyed (after
/// its queued work) when the last owned clone drops.
pub trait Stream: Clone + Send + Sync + 'static {
    /// The backend.
    type Backend: Backend<Stream = Self>;

    /// The device it runs on.
    fn device_id(&self) -> DeviceId;
    /// Whether this handle owns the stream.
    fn ownership(&self) -> Ownership;
    /// The vendor handle (`CUstream`, `hipStream_t`, the host backend's stream id).
    fn raw_handle(&self) -> usize;
    /// Creation flags.
    fn flags(&self) -> StreamFlags;
    /// Priority (after clamping).
    fn priority(&self) -> i32;

    /// Copies `len` bytes from `src[src_offset..]` to `dst[dst_offset..]`. The copy kind
    /// (host↔device, device↔device, peer) follows from the buffers. Overlapping ranges are
    /// an error ([`crate::check_copy`]).
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()>;
    /// Copies `copy.height` rows of `copy.width` bytes from `src` to `dst`, each side's rows
    /// `pitch` bytes apart ([`Copy2d`]): a strided block in one call. Checked as a whole
    /// before anything is queued ([`crate::check_copy_2d`]); the same kinds of memory as
    /// [`Stream::copy`].
    ///
    /// The provided method queues one [`Stream::copy`] per row. A backend whose runtime
    /// has a 2D copy (`cuMemcpy2DAsync`, `hipMemcpy2DAsync`) or whose queue can carry the
    /// rows as one operation overrides it.
    fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()> {
        crate::check_copy_2d(src, dst, copy)?;
        if copy.is_empty() {
            return Ok(());
        }
        for row in 0..copy.height {
            let (s, d) = copy.row_offsets(row);
            self.copy(src, s, dst, d, copy.width)?;
        }
        Ok(())
    }
    /// Sets `len` bytes at `offset` of `dst` to `value`.
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// Copies host bytes into `dst` after the work already queued; returns once the copy
    /// has completed (so `src` may be reused).
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()>;
    /// Copies from `src` into host bytes after the work already queued; returns once the
    /// bytes are in `dst`.
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Typed [`Stream::write`]: `src`'s elements into `dst` at byte offset `dst_offset`.
    fn write_slice<T: Element>(&self, src: &[T], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.write(as_bytes(src), dst, dst_offset)
    }
    /// Typed [`Stream::read`]: `len` elements of `src` from byte offset `src_offset`.
    fn read_vec<T: Element>(&self, src: &Buffer, src_offset: usize, len: usize) -> Result<Vec<T>> {
        let mut out = zeroed_vec::<T>(len);
        self.read(src, src_offset, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// Records `event` at the current end of this stream.
    fn record(&self, event: &<Self::Backend as Backend>::Event) -> Result<()>;
    /// Makes later work on this stream wait until `event`'s recorded work completes.
    fn wait(&self, event: &<Self::Backend as Backend>::Event) -> Result<()>;
    /// Runs `f` on a host thread when the stream reaches this point; later work waits for it.
    fn host_callback(&self, f: HostCallback) -> Result<()>;
    /// [`Stream::host_callback`] for a C function and its pointer: `func(user)` runs once on a
    /// host thread when the stream reaches this point. On an error nothing was queued and
    /// `func` is never called (the caller still owns what `user` points at).
    ///
    /// The provided method wraps the pair in a closure (one allocation); a backend whose
    /// queue can hold the pair as it is overrides it, which is what makes a plugin's host
    /// function as cheap as a linked-in callback.
    ///
    /// # Safety
    /// `func` may be called once with `user` on any thread, and does not unwind.
    unsafe fn host_function(&self, func: HostFunction, user: *mut std::ffi::c_void) -> Result<()> {
        // SAFETY: forwarded: the caller's contract is the closure's.
        self.host_callback(unsafe { crate::host_function_callback(func, user) })
    }
    /// Launches a kernel.
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()>;

    /// Runs `f` on the calling thread now, when the stream has nothing pending — the same
    /// as queuing it as a host callback and waiting for it, without waking a thread — and
    /// returns `true`; returns `false` without running `f` when work is pending, when the
    /// stream is being drained, or on the stream's own worker. While `f` runs, work queued
    /// on the stream (by `f` itself, or by another thread) waits for it. For work that
    /// would otherwise pay a thread hand-off per call (a collective on host memory).
    ///
    /// The provided method never runs `f`: a stream that cannot tell and hold its idleness
    /// (a GPU's, whose work the driver owns) keeps it.
    fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool {
        let _ = f;
        false
    }
    /// True when all queued work has completed.
    fn query(&self) -> Result<bool>;
    /// The counters this stream keeps of its work, where it keeps them in memory
    /// ([`StreamProgress`](crate::StreamProgress)): whoever holds them can tell whether the work is done without
    /// calling [`Stream::query`] (the plugin boundary reads them instead of crossing it).
    /// The counters live as long as the stream. `None` (the provided method): the stream
    /// keeps none, and every query is a call.
    ///
    /// What they say must agree with [`Stream::query`]: the conformance suite checks both
    /// while work is held back and after it has run.
    fn progress(&self) -> Option<crate::StreamProgress<'_>> {
        None
    }
    /// Blocks until all queued work has completed. Reports the first error of queued work
    /// (a failed host callback, a failed kernel) since the last call.
    fn synchronize(&self) -> Result<()>;
}

/// A completion marker recorded on a stream.
pub trait Event: Clone + Send + Sync + 'static {
    /// The backend.
    type Backend: Backend<Event = Self>;

    /// The device it belongs to.
    fn device_id(&self) -> DeviceId;
    /// Whether this handle owns the event.
    fn ownership(&self) -> Ownership;
    /// The vendor handle.
    fn raw_handle(&self) -> usize;
    /// Creation flags.
    fn flags(&self) -> EventFlags;
    /// True when the work recorded has completed (also for a never-recorded event).
    fn query(&self) -> Result<bool>;
    /// Blocks until the work recorded has completed.
    fn synchronize(&self) -> Result<()>;
    /// Milliseconds between this event and `end`; both must have completed and time.
    fn elapsed_ms(&self, end: &Self) -> Result<f32>;
}

/// Implements [`Event`] for a newtype whose field `0` has inherent methods of the same
/// names and signatures (`device_id`, `ownership`, `raw_handle`, `flags`, `query`,
/// `synchronize`, `elapsed_ms(&inner)`): every method forwards. The event types of
/// `gpuport-queue` (software devices) and `gpuport-vendor-kit` (vendor runtimes) are such
/// fields; their `impl_queue_event!` / `impl_vendor_event!` call this.
/// `forward_event!(MyEvent, MyBackend)`.
#[macro_export]
macro_rules! forward_event {
    ($event:ty, $backend:ty) => {
        impl $crate::Event for $event {
            type Backend = $backend;

            fn device_id(&self) -> $crate::DeviceId {
                self.0.device_id()
            }
            fn ownership(&self) -> $crate::Ownership {
                self.0.ownership()
            }
            fn raw_handle(&self) -> usize {
                self.0.raw_handle()
            }
            fn flags(&self) -> $crate::EventFlags {
                self.0.flags()
            }
            fn query(&self) -> $crate::Result<bool> {
                self.0.query()
            }
            fn synchronize(&self) -> $crate::Result<()> {
                self.0.synchronize()
            }
            fn elapsed_ms(&self, end: &Self) -> $crate::Result<f32> {
                self.0.elapsed_ms(&end.0)
            }
        }
    };
}
