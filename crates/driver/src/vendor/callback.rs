//! Host callbacks of a vendor stream: one trampoline runs every callback inside
//! `catch_unwind` and `release::restricted`, keeps a panic as the stream's error, and marks
//! the thread so that blocking calls into the callback's own driver are refused.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use gpuport_core::{BackendKind, DeviceId, Error, HostCallback, Result};

use super::stream_errors::StreamErrors;

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

/// A stream as an error names it (`0x… on cuda:0`): two words, written out only when a
/// callback's failure is recorded — never on the enqueue path.
#[derive(Clone, Copy)]
pub(super) struct StreamName {
    pub(super) raw: usize,
    pub(super) device: DeviceId,
}

impl std::fmt::Display for StreamName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x} on {}", self.raw, self.device)
    }
}

/// A host callback on its way through the driver.
pub(super) struct Callback {
    f: HostCallback,
    errors: Arc<StreamErrors>,
    stream: StreamName,
    /// The backend whose driver runs it (whose calls it may not make).
    kind: BackendKind,
}

impl Callback {
    pub(super) fn boxed(
        f: HostCallback,
        errors: Arc<StreamErrors>,
        stream: StreamName,
        kind: BackendKind,
    ) -> *mut c_void {
        Box::into_raw(Box::new(Callback { f, errors, stream, kind })).cast()
    }

    /// # Safety
    /// `user` came from [`Callback::boxed`] and was not handed to the driver.
    pub(super) unsafe fn reclaim(user: *mut c_void) -> Box<Callback> {
        // SAFETY: per the contract, the box is still ours.
        unsafe { Box::from_raw(user.cast::<Callback>()) }
    }
}

/// The body of every vendor host-function trampoline (`extern "C" fn(user)`): runs the
/// callback once, never unwinds, keeps a panic as the stream's error, refuses blocking
/// calls made from it, and hands everything it drops to the release thread (the driver's
/// callback thread may make no driver call).
///
/// # Safety
/// `user` is the pointer a [`VendorStream`](super::VendorStream) handed to
/// [`VendorCalls::launch_host_callback`](super::VendorCalls::launch_host_callback), and the driver calls this once for it.
pub unsafe fn run_host_callback(user: *mut c_void) {
    // SAFETY: per the contract, `user` is a leaked `Box<Callback>` run exactly once.
    let callback = unsafe { Callback::reclaim(user) };
    let _ = catch_unwind(AssertUnwindSafe(move || {
        crate::release::restricted(move || {
            let Callback { f, errors, stream, kind } = *callback;
            IN_CALLBACK.with(|c| c.set(Some(kind)));
            let outcome = catch_unwind(AssertUnwindSafe(f));
            IN_CALLBACK.with(|c| c.set(None));
            if let Err(unwound) = outcome {
                let message = gpuport_core::unwound_work_message(&*unwound);
                errors.record(Error::StreamWork { stream: stream.to_string(), message });
            }
        })
    }));
}
