//! # gpuport-driver
//!
//! Helpers for backend authors, kept out of the contract crate (`gpuport-core`): what a
//! backend over a vendor runtime loaded from a library needs, written once.
//!
//! - [`loading`]: opening the first of several candidate libraries, recording every
//!   attempt and the loader's message for `Error::LibraryNotFound`;
//! - [`status`]: vendor status codes → `gpuport_core::Error` (one table for CUDA and HIP);
//! - [`kernel_args`]: kernel arguments packed into the pointer array vendor launches take;
//! - [`parking`]: keeping queued work's buffers and kernels alive beside a vendor stream
//!   until an event after them completes;
//! - [`release`]: the deferred-release thread (defined with `Buffer` in core, whose drop
//!   obeys it): drops that may call a driver or foreign code never run on a driver
//!   callback thread or a stream worker;
//! - [`vendor_calls`]: the one call table a vendor backend implements — one checked driver
//!   call per method — over which the rest of the vendor kit is written once:
//! - [`vendor_device`]: the opened device shared by its handles (with its streams' kept
//!   errors and default streams), the registry of open devices, and the whole `Device`
//!   contract (`impl_vendor_device!`), modules and kernels included;
//! - [`vendor_stream`]: the stream machinery of a vendor backend (ownership, parking,
//!   kept errors reported by stream and device, the host-callback trampoline, default
//!   streams, non-blocking drop) and the `Stream` data path (`impl_vendor_stream!`);
//! - [`vendor_event`]: the event handle of a vendor backend (ownership, deferred destroy,
//!   binding, no blocking inside a host callback; `impl_vendor_event!`);
//! - [`vendor_memory`]: device, pinned, managed and stream-ordered buffers, each with the
//!   release that matches its allocation;
//! - [`host_memory`]: the host's memory limit, which every host-side allocation is checked
//!   against before the allocator is asked;
//! - [`c_text`]: text from the fixed `char` buffers vendors fill;
//! - [`device_list`]: a backend's device list that survives one broken device.
//!
//! CUDA, ROCm and any vendor port may use it; a software device uses `gpuport-queue`,
//! which builds on it.

pub mod c_text;
pub mod device_list;
pub mod host_memory;
pub mod kernel_args;
pub mod loading;
pub mod parking;
pub mod status;
pub mod vendor_calls;
pub mod vendor_device;
pub mod vendor_event;
pub mod vendor_memory;
mod vendor_module;
pub mod vendor_stream;

pub use gpuport_core::release;

#[doc(hidden)]
pub use gpuport_core as __core;
