//! # gpuport
//!
//! One GPU hardware-abstraction layer: a single build discovers at run time which vendor
//! runtimes the machine has and drives them, and the CPU, through one set of traits.
//!
//! - [`Runtime::discover`] reports every backend as available (with its devices) or
//!   unavailable (with the reason); it never panics.
//! - [`AnyDevice`], [`AnyStream`], [`AnyEvent`] dispatch over the built-in backends and
//!   run-time plugins ([`Runtime::register_plugin`]); mixing backends is
//!   [`Error::BackendMismatch`].
//! - [`Array`] is an n-dimensional view of device memory with a dtype and a checked
//!   layout; every view of one allocation shares its pending work (per-stream read and
//!   write events), so work queued through any view orders correctly.
//!
//! The static, zero-cost tier is re-exported from `gpuport-core` ([`Backend`], [`Device`],
//! [`Stream`], [`Event`]); the host backend from `gpuport-host` as [`host`].
//!
//! ```
//! use gpuport::{Runtime, Array};
//! let rt = Runtime::discover();
//! let dev = rt.device("host")?;
//! let a = Array::from_slice(&dev, &[1.0f32, 2.0, 3.0], &[3])?;
//! assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0]);
//! # Ok::<(), gpuport::Error>(())
//! ```

mod array;
mod copy;
pub mod dynamic;
mod mirror;
mod pending;
mod runtime;

pub use array::Array;
pub use copy::{copy, CopyEngine, CopyRoute};
pub use dynamic::{
    device_into_any, event_into_any, stream_into_any, AnyDevice, AnyEvent, AnyStream, PluginDevice, PluginEvent,
    PluginStream,
};
pub use gpuport_core::*;
pub use mirror::{MirroredArray, SyncState};
pub use pending::Access;
pub use runtime::{
    parse_backend_list, BackendReport, BackendStatus, DiscoverOptions, Runtime, BACKENDS_ENV, DEVICE_ENV,
};

/// What most users import: `use gpuport::prelude::*;`. The static tier's traits (for
/// typed handles such as `gpuport::host::HostDevice`) and the dynamic tier's handles
/// (whose methods are inherent), with no two traits whose methods collide.
pub mod prelude {
    pub use crate::{Access, AnyDevice, AnyEvent, AnyStream, Array, CopyEngine, MirroredArray, Runtime};
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
