//! # gpuport-driver
//!
//! Helpers for backend authors, kept out of the contract crate (`gpuport-core`): what a
//! backend over a vendor runtime loaded from a library needs, written once.
//!
//! - [`loading`]: opening the first of several candidate libraries, recording every
//!   attempt and the loader's message for `Error::LibraryNotFound`;
//! - [`status`]: vendor status codes → `gpuport_core::Error` (one table for CUDA and HIP);
//! - [`kernel_args`]: kernel arguments packed into typed slots, and the pointer array vendor launches take;
//! - [`parking`]: keeping queued work's buffers and kernels alive beside a vendor stream
//!   until an event after them completes;
//! - [`release`]: the deferred-release thread (defined with `Buffer` in core, whose drop
//!   obeys it): drops that may call a driver or foreign code never run on a driver
//!   callback thread or a stream worker;
//! - [`vendor`]: the vendor kit — the one call table a vendor backend implements (one
//!   checked driver call per method) and, written once over it, the opened device and its
//!   whole `Device` contract (`impl_vendor_device!`), streams with the `Stream` data path
//!   (`impl_vendor_stream!`), events (`impl_vendor_event!`), buffers released as they were
//!   allocated, modules, host callbacks and the errors kept for the next synchronize;
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
pub mod vendor;

pub use gpuport_core::release;

#[doc(hidden)]
pub use gpuport_core as __core;
