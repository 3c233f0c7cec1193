//! # gpuport-vendor-kit
//!
//! The vendor kit: everything a backend over a vendor runtime library shares, written once
//! over the one call table it implements ([`VendorCalls`]: one checked driver call per
//! method). Its clients are the CUDA and ROCm backends, the loader of device plugins (in
//! `gpuport-runtime`), and a vendor's own port (`examples/vendor-port-template`): each
//! keeps only its declarations, loader, checked calls, context and the call table, and
//! gets the whole `Device` / `Stream` / `Event` contract from here. The software kit
//! (`gpuport-queue`) is its counterpart for devices whose work runs on the CPU; the two are
//! built the same way — a shared core, and one macro per handle type that writes the
//! backend's trait impl from it.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `calls` | [`VendorCalls`], the call table, and [`RawHandle`], the handle conversions |
//! | `device` | [`VendorDevice`], what every handle of one opened device shares (the backend's context and its streams' record), and [`OpenDevices`], the registry of open devices; `impl_vendor_device!` |
//! | `contract` | the whole `Device` contract over the call table: memory, the synchronous memset, streams, events, the device-wide synchronize, peers, pointer attributes, modules |
//! | `memory` | device, pinned, managed and stream-ordered buffers, each released as it was allocated |
//! | `module` | loaded modules and their kernels, unloaded after the last kernel |
//! | `stream` | [`VendorStream`]: ownership, parking, default streams, non-blocking drop, and the `Stream` data path (`impl_vendor_stream!`) |
//! | `stream_errors` | [`StreamErrors`], the first error of a stream's work found outside a call |
//! | `callback` | host callbacks: the trampoline ([`run_host_callback`]) and the rule that a callback makes no call into its own driver ([`refuse_in_callback`]) |
//! | `callback_slots` | where host callbacks wait while the driver holds them: slots reused through per-thread caches rather than allocated per callback |
//! | `event` | [`VendorEvent`]: ownership, deferred destroy, no blocking inside a host callback; `impl_vendor_event!` |
//!
//! | `compile` | kernels compiled from source: the compiler a backend supplies, the portability header `<gpuport/kernel.h>`, the in-process and disk caches |
//! | `loading` | opening the first of several candidate libraries, recording every attempt and the loader's message for `Error::LibraryNotFound` |
//! | `status` | vendor status codes → `gpuport_core::Error` (one table for CUDA and HIP) |
//! | `kernel_args` | kernel arguments packed into typed slots, and the pointer array vendor launches take |
//! | `parking` | keeping queued work's buffers and kernels alive beside a vendor stream until an event after them completes |
//! | `c_text` | text from the fixed `char` buffers vendors fill |
//! | `device_list` | a backend's device list that survives one broken device |
//!
//! Imports run one way — `compile` (which imports nothing of the kit) and `calls` at the
//! bottom; `stream_errors`, `callback_slots`, `callback`, `device`, then `event` and
//! `module`, `stream`, `memory`, and `contract` on top — with one circle: an opened device
//! records its default streams and a stream holds its device, and the events and modules a
//! stream's parked work keeps hold their device too (`xtask`'s layers test checks that no
//! other appears).

//! `release` (the deferred-release thread, defined with `Buffer` in core) is re-exported:
//! drops that may call a driver or foreign code never run on a driver callback thread or
//! a stream worker.

pub mod c_text;
pub mod compile;
pub mod device_list;
pub mod kernel_args;
pub mod loading;
pub mod parking;
pub mod status;

mod callback;
mod callback_slots;
mod calls;
mod contract;
mod device;
mod event;
mod memory;
mod module;
mod stream;
mod stream_errors;

use gpuport_core::{DeviceId, Error, Result};
use std::sync::{Mutex, MutexGuard};

pub use callback::{host_callback_run, refuse_in_callback, run_host_callback, SlotRun};
pub use calls::{memcpy_rows, RawHandle, VendorCalls};
pub use device::{OpenDevices, VendorDevice};
pub use event::VendorEvent;
pub use gpuport_core::release;
pub use stream::{DeviceStreams, RawStream, StreamState, VendorStream, MAX_PITCH};
pub use stream_errors::StreamErrors;

#[doc(hidden)]
pub use gpuport_core as __core;

/// Locks a mutex whose data a panic cannot leave inconsistent (counters, lists, kept
/// errors), so a poisoned lock is still used.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Refuses a handle of another backend given to `operation` of a handle of `mine`'s
/// backend. One backend type can serve several backends (every loaded plugin's handles
/// share the loader's types), so a handle's type says less than its kind: a stream of one
/// plugin must never pass another plugin's event to its table.
fn same_backend(operation: &'static str, mine: DeviceId, theirs: DeviceId) -> Result<()> {
    if mine.kind == theirs.kind {
        Ok(())
    } else {
        Err(Error::mismatch(operation, mine.kind, theirs))
    }
}
