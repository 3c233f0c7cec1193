//! # gpuport-runtime
//!
//! What the `gpuport` crate is built on, and re-exports whole: [`Runtime`] discovery, the
//! dynamic tier ([`AnyDevice`], [`AnyStream`], [`AnyEvent`]), [`Array`] with its pending
//! work, the copy engine and [`MirroredArray`], and device plugins (loaded through
//! `gpuport-loaded`). It is a
//! crate of its own so that the interchange crates (`gpuport-dlpack`, `gpuport-cai`),
//! which build on it, can be re-exported by `gpuport` too: a program depends on `gpuport`
//! alone. Depend on this crate directly only to build beside the interchange crates.
//!
//! ```
//! use gpuport_runtime::prelude::*;
//!
//! # fn main() -> gpuport_runtime::Result<()> {
//! let rt = Runtime::discover();
//! let host = rt.device("host")?;
//! let x = Array::from_slice(&host, &[1u32, 2, 3, 4, 5, 6], &[2, 3])?;
//! assert_eq!(x.range(1, 1..)?.to_vec::<u32>()?, vec![2, 3, 5, 6]);
//! # Ok(())
//! # }
//! ```

mod array;
mod copy;
pub mod dynamic;
mod foreign;
mod fresh_memory;
mod host_copy;
mod launch;
mod mirror;
mod pending;
mod runtime;
mod strided;

pub use array::Array;
pub use copy::{copy, release_copy_resources, CopyEngine, CopyRoute};
pub use dynamic::{
    device_into_any, event_into_any, stream_into_any, AnyDevice, AnyEvent, AnyStream, LoadedDevice, LoadedEvent,
    LoadedStream, RegisteredDevice, RegisteredEvent, RegisteredStream,
};
pub use foreign::ForeignElements;
pub use gpuport_core::release;
pub use gpuport_core::{
    as_bytes, as_bytes_mut, c_strides, check_copy, check_copy_2d, zeroed_vec, Backend, BackendKind, Buffer, BufferDesc,
    ByteSpan, CompileOptions, Copy2d, CudaOutput, DType, DTypeCode, DefaultStream, Device, DeviceId, DeviceInfo,
    DeviceSpec, DlDeviceType, DlpackDevices, Element, Error, Event, EventFlags, HostAllocFlags, HostCallback, Kernel,
    KernelArg, KernelSource, LaunchConfig, Layout, LoadAttempt, LoadOptions, MemoryKind, Module, ModuleImage,
    Ownership, PointerAttributes, ProgressReading, Release, Result, Scalar, Stream, StreamFlags, StreamProgress,
    INLINE_NDIM, MAX_NDIM,
};
pub use gpuport_loaded::{DEFAULT_INIT_TIMEOUT, INIT_TIMEOUT_ENV, MAX_PLUGIN_DEVICES};
pub use launch::{launch_on_arrays, LaunchArg};
pub use mirror::{MirroredArray, SharedSyncState, SyncState};
pub use pending::Access;
pub use runtime::{
    parse_backend_list, parse_plugin_list, BackendReport, BackendStatus, DiscoverOptions, Runtime, BACKENDS_ENV,
    DEVICE_ENV, PLUGINS_ENV,
};
pub use strided::{strided_copy_kernels, COPY_KERNELS_ENV};

/// What most users import: `use gpuport::prelude::*;`. The static tier's traits (for
/// typed handles such as `gpuport_runtime::host::HostDevice`) and the dynamic tier's handles
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
