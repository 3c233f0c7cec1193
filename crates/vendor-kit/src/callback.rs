//! Host callbacks of a vendor stream: one trampoline runs every callback inside
//! `catch_unwind` and `release::restricted`, keeps a panic as the stream's error, and marks
//! the thread so that blocking calls into the callback's own driver are refused.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use gpuport_core::{BackendKind, Error, HostCallback, Result};

pub use crate::callback_slots::SlotRun;
use crate::callback_slots::{with_slot, Reporter};

thread_local! {
    /// The backend whose host callback runs on this (driver-owned) thread, if one does.
    pub(super) static IN_CALLBACK: Cell<Option<BackendKind>> = const { Cell::new(None) };
}

/// `WouldDeadlock` inside a host callback of backend `kind`: a vendor callback may make no
/// call into its own driver, and a blocking one would wait for the callback itself.
/// Another backend's calls are allowed — a CUDA callback may wait for a ROCm event, which
/// is how work on a CUDA stream is ordered after ROCm work.
pub fn refuse_in_callback(kind: BackendKind, call: &str) -> Result<()> {
    if IN_CALLBACK.with(Cell::get) == Some(kind) {
        return Err(Error::would_deadlock(format!("{call} inside a host callback of {kind}")));
    }
    Ok(())
}

/// The body of every vendor host-function trampoline (`extern "C" fn(user)`): runs the
/// callback once, never unwinds, keeps a panic as the stream's error, refuses blocking
/// calls made from it, and hands everything it drops to the release thread (the driver's
/// callback thread may make no driver call). A NULL `user`, or a callback that has run
/// already, runs nothing and is logged as the driver's fault ([`host_callback_run`] says
/// which, for a backend that reports it instead).
///
/// # Safety
/// `user` is NULL or a pointer a [`VendorStream`](crate::VendorStream) handed to
/// [`VendorCalls::launch_host_callback`](crate::VendorCalls::launch_host_callback).
///
/// Inlined into each backend's `extern "C"` trampoline, so that a callback costs the driver
/// one frame of gpuport's.
#[inline(always)]
pub unsafe fn run_host_callback(user: *mut c_void) {
    // SAFETY: the caller's contract.
    let run = unsafe { host_callback_run(user) };
    if run != SlotRun::Ran {
        log_stray_run(run);
    }
}

/// [`run_host_callback`], answering what the run found instead of logging a stray run:
/// for a backend whose driver is foreign code to be held to account (the plugin loader
/// reports such runs as the plugin's errors).
///
/// # Safety
/// As for [`run_host_callback`].
#[inline(always)]
pub unsafe fn host_callback_run(user: *mut c_void) -> SlotRun {
    let run = |f: HostCallback, reporter: &Reporter| {
        // Nothing unwinds out: the callback's panic is kept, and a panic while keeping it
        // (a message's `Display`) is dropped here rather than cross the driver's frames.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            crate::release::restricted(move || {
                IN_CALLBACK.with(|c| c.set(Some(reporter.kind)));
                let outcome = catch_unwind(AssertUnwindSafe(f));
                IN_CALLBACK.with(|c| c.set(None));
                if let Err(unwound) = outcome {
                    keep_panic(reporter, unwound);
                }
            })
        }));
    };
    // SAFETY: per the contract, `user` is NULL or a slot handed to the driver; the closure
    // above never unwinds, so a slot that runs is always given back.
    unsafe { with_slot(user, run) }
}

/// Logs a run of a trampoline that found no callback to run: the driver's fault, which
/// gpuport survives (nothing ran).
#[cold]
#[inline(never)]
fn log_stray_run(run: SlotRun) {
    match run {
        SlotRun::Ran => {}
        SlotRun::NullUser => log::error!("a driver ran gpuport's host function with a NULL user pointer; nothing ran"),
        SlotRun::RanBefore => {
            log::error!("a driver ran a host function a second time, or after it was done with it; nothing ran")
        }
    }
}

/// Keeps a callback's panic as its stream's error. Out of line, so that the trampoline's
/// frame is the size of the path every callback takes.
#[cold]
#[inline(never)]
fn keep_panic(reporter: &Reporter, unwound: Box<dyn std::any::Any + Send>) {
    let message = gpuport_core::unwound_work_message(&*unwound);
    reporter.errors.record(Error::StreamWork { stream: reporter.stream.to_string(), message });
}
