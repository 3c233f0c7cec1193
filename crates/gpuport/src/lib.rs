//! # gpuport
//!
//! One GPU hardware-abstraction layer: a single build discovers at run time which vendor
//! runtimes the machine has (NVIDIA CUDA, AMD ROCm — no SDK needed to build) and drives
//! them, and the CPU, through one set of traits.
//!
//! ## Quick start
//!
//! ```
//! use gpuport::prelude::*;
//!
//! # fn main() -> gpuport::Result<()> {
//! // 1. Discover: every backend is available (with its devices) or says why not.
//! let rt = Runtime::discover();
//! println!("{rt}");
//!
//! // 2. Pick a device: by name ("host", "cuda:1", "rocm:0", a plugin's "ext:0"), or the
//! //    best one (GPUPORT_DEVICE, else the first GPU, else the host).
//! let dev = rt.best_device()?;
//!
//! // 3. Streams and events: work is queued and runs asynchronously, in order per stream;
//! //    an event recorded on one stream orders another.
//! let (a, b) = (dev.create_stream(StreamFlags::NON_BLOCKING, 0)?, dev.create_stream(StreamFlags::NON_BLOCKING, 0)?);
//! let done = dev.create_event(EventFlags::empty())?;
//! let (src, dst) = (dev.alloc(1024)?, dev.alloc(1024)?);
//! a.write_slice(&[1.0f32; 256], &src, 0)?;
//! a.record(&done)?;
//! b.wait(&done)?;
//! b.copy(&src, 0, &dst, 0, 1024)?;
//! assert_eq!(b.read_vec::<f32>(&dst, 0, 256)?, vec![1.0; 256]);
//!
//! // 4. Arrays: n-dimensional views with a dtype; views share the allocation's pending
//! //    work, and the copy engine moves them between any two devices.
//! let x = Array::from_slice(&dev, &[1u32, 2, 3, 4, 5, 6], &[2, 3])?;
//! assert_eq!(x.range(1, 1..)?.to_vec::<u32>()?, vec![2, 3, 5, 6]);
//! let on_host = x.to_device(&rt.device("host")?)?;
//! assert_eq!(on_host.to_vec::<u32>()?, vec![1, 2, 3, 4, 5, 6]);
//! # Ok(())
//! # }
//! ```
//!
//! ## Which traits to import
//!
//! `use gpuport::prelude::*` is enough for both tiers:
//!
//! - the **dynamic tier** — [`AnyDevice`], [`AnyStream`], [`AnyEvent`], what [`Runtime`]
//!   hands out — has its methods inherent: no import needed. They dispatch over the
//!   built-in backends and run-time plugins ([`Runtime::register_plugin`]); mixing
//!   backends is [`Error::BackendMismatch`], never a panic. [`dynamic`] holds the
//!   object-safe traits behind them, for code generic over handles.
//! - the **static tier** — a typed backend such as [`host::HostBackend`], zero-cost —
//!   uses the core traits [`Backend`], [`Device`], [`Stream`], [`Event`], which the
//!   prelude brings.
//!
//! Plugins (the ext device, a vendor's port — see `docs/porting.md`) are registered
//! before discovery: `Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default())?)`.
//! `GPUPORT_BACKENDS=host,cuda` limits discovery (a left-out backend's library is never
//! opened); `GPUPORT_DEVICE` names the default device.

mod array;
mod copy;
pub mod dynamic;
mod foreign;
mod fresh_memory;
mod host_copy;
mod mirror;
mod pending;
mod plugin;
mod runtime;

pub use array::Array;
pub use copy::{copy, release_staging_buffers, CopyEngine, CopyRoute};
pub use dynamic::{
    device_into_any, event_into_any, stream_into_any, AnyDevice, AnyEvent, AnyStream, PluginDevice, PluginEvent,
    PluginStream,
};
pub use foreign::ForeignElements;
pub use gpuport_core::release;
pub use gpuport_core::{
    as_bytes, as_bytes_mut, c_strides, check_copy, check_copy_2d, zeroed_vec, Backend, BackendKind, Buffer, BufferDesc,
    ByteSpan, Copy2d, DType, DTypeCode, DefaultStream, Device, DeviceId, DeviceInfo, DeviceSpec, DlDeviceType,
    DlpackDevices, Element, Error, Event, EventFlags, HostAllocFlags, HostCallback, Kernel, KernelArg, LaunchConfig,
    Layout, LoadAttempt, LoadOptions, MemoryKind, Module, ModuleImage, Ownership, PointerAttributes, ProgressReading,
    Release, Result, Scalar, Stream, StreamFlags, StreamProgress, INLINE_NDIM, MAX_NDIM,
};
pub use mirror::{MirroredArray, SharedSyncState, SyncState};
pub use pending::Access;
pub use plugin::{parse_plugin_list, DEFAULT_INIT_TIMEOUT, INIT_TIMEOUT_ENV, MAX_PLUGIN_DEVICES, PLUGINS_ENV};
pub use runtime::{
    parse_backend_list, BackendReport, BackendStatus, DiscoverOptions, Runtime, BACKENDS_ENV, DEVICE_ENV,
};

/// What most users import: `use gpuport::prelude::*;`. The static tier's traits (for
/// typed handles such as `gpuport::host::HostDevice`) and the dynamic tier's handles
/// (whose methods are inherent), with no two traits whose methods collide.
pub mod prelude {
    pub use crate::{
        Access, AnyDevice, AnyEvent, AnyStream, Array, BackendReport, BackendStatus, CopyEngine, MirroredArray, Runtime,
    };
    pub use gpuport_core::{
        Backend, Buffer, DType, DefaultStream, Device, Error, Event, EventFlags, Result, Stream, StreamFlags,
    };
}

/// The CUDA backend.
pub use gpuport_cuda as cuda;
/// The host backend.
pub use gpuport_host as host;
/// The ROCm backend.
pub use gpuport_rocm as rocm;
