//! # gpuport-core
//!
//! The vendor-neutral core of gpuport: the static trait tier ([`Backend`], [`Device`],
//! [`Stream`], [`Event`]), ids and device strings, [`DType`] and [`Layout`] with checked
//! arithmetic, flag sets, the shared [`Buffer`] handle, [`PointerAttributes`] and the one
//! [`Error`] type: the contract every backend implements and every layer above relies on.
//! No vendor type, no library loading and no helper for backend authors lives here (those
//! are `gpuport-vendor-kit` and `gpuport-queue`); [`release`] is here because [`Buffer`]'s drop
//! obeys it.

mod callback;
mod compile;
mod copy_2d;
mod device_spec;
mod dims;
mod dlpack_device;
mod dtype;
mod error;
mod flags;
pub mod host_memory;
mod id;
mod kernel;
mod layout;
mod live_list;
mod memory;
mod progress;
pub mod release;
mod traits;

pub use callback::{fail_host_callback, host_function_callback, unwound_work_message, UserPointer};
pub use compile::{CompileOptions, CudaOutput, KernelSource};
pub use copy_2d::{check_copy_2d, Copy2d};
pub use device_spec::DeviceSpec;
pub use dims::INLINE_NDIM;
pub use dlpack_device::{DlDeviceType, DlpackDevices};
pub use dtype::{as_bytes, as_bytes_mut, zeroed_vec, DType, DTypeCode, Element};
pub use error::{Error, LoadAttempt, Result};
pub use flags::{DefaultStream, EventFlags, HostAllocFlags, Ownership, StreamFlags};
pub use id::{BackendKind, DeviceId};
pub use kernel::{Kernel, KernelArg, LaunchConfig, Module, ModuleImage, Scalar};
pub use layout::{c_strides, ByteSpan, Layout, MAX_NDIM};
pub use live_list::LiveList;
pub use memory::{check_copy, Buffer, BufferDesc, MemoryKind, PointerAttributes, Release};
pub use progress::{read_counters, ProgressReading, StreamProgress};
pub use traits::{Backend, Device, DeviceInfo, Event, HostCallback, HostFunction, LoadOptions, Stream};
