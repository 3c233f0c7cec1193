//! # gpuport-core
//!
//! The vendor-neutral core of gpuport: the static trait tier ([`Backend`], [`Device`],
//! [`Stream`], [`Event`]), ids and device strings, [`DType`] and [`Layout`] with checked
//! arithmetic, flag sets, the shared [`Buffer`] handle and the one [`Error`] type. No
//! vendor type appears here.

mod dtype;
mod error;
mod flags;
mod host_memory;
mod id;
mod kernel;
mod layout;
pub mod loading;
mod memory;
pub mod parking;
mod traits;
pub mod vendor;

pub use dtype::{DType, DTypeCode, Element};
pub use error::{Error, LoadAttempt, Result};
pub use flags::{DefaultStream, EventFlags, HostAllocFlags, Ownership, StreamFlags};
pub use host_memory::{host_meminfo, host_memory_limit};
pub use id::{BackendKind, DeviceId, DeviceSpec};
pub use kernel::{Kernel, KernelArg, LaunchConfig, Module, ModuleImage, Scalar};
pub use layout::{c_strides, ByteSpan, Layout, MAX_NDIM};
pub use memory::{check_copy, Buffer, BufferDesc, MemoryKind, PointerAttributes, Release};
pub use traits::{Backend, Device, DeviceInfo, Event, HostCallback, LoadOptions, Stream};
