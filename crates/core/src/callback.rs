//! How host work fails. A host callback (`Stream::host_callback`) returns nothing, so it
//! fails by unwinding: with a panic, or — for a typed error it wants kept — with
//! [`fail_host_callback`], which unwinds without running the panic hook (nothing is
//! printed). Either way the stream keeps the failure as `Error::StreamWork` for its next
//! `synchronize` (and the device's), with [`unwound_work_message`] as the message. Every
//! backend runs callbacks inside `catch_unwind` and reports them this way.

use std::any::Any;

use crate::error::Error;
use crate::traits::{HostCallback, HostFunction};

/// The payload [`fail_host_callback`] unwinds with.
struct HostCallbackFailed(Error);

/// Ends the running host callback with `err`, which its stream keeps as its error. Call it
/// only from inside a host callback (anywhere else it unwinds like a panic).
pub fn fail_host_callback(err: Error) -> ! {
    std::panic::resume_unwind(Box::new(HostCallbackFailed(err)))
}

/// The message a stream keeps for host work that unwound with `payload`: the error given
/// to [`fail_host_callback`], or `host work panicked: <the panic message>`.
pub fn unwound_work_message(payload: &(dyn Any + Send)) -> String {
    if let Some(HostCallbackFailed(err)) = payload.downcast_ref::<HostCallbackFailed>() {
        err.to_string()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        format!("host work panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("host work panicked: {s}")
    } else {
        "host work panicked (a payload that is not a message)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_callback_keeps_its_error_and_a_panic_its_message() {
        let failed =
            std::panic::catch_unwind(|| fail_host_callback(Error::invalid_argument("x"))).expect_err("it unwinds");
        assert_eq!(unwound_work_message(&*failed), "invalid argument: x");
        let panicked = std::panic::catch_unwind(|| panic!("boom")).expect_err("it unwinds");
        assert_eq!(unwound_work_message(&*panicked), "host work panicked: boom");
    }
}

/// A host function's pointer on its way to the thread that calls it.
///
/// [`Stream::host_function`](crate::Stream::host_function)'s contract lets `func(user)` run
/// on any thread, so the pointer may travel with it.
#[derive(Clone, Copy, Debug)]
pub struct UserPointer(pub *mut std::ffi::c_void);

// SAFETY: only made for a host function's pointer, which its contract lets cross threads.
unsafe impl Send for UserPointer {}

/// `func(user)` as a [`HostCallback`]: what
/// [`Stream::host_function`](crate::Stream::host_function) queues on a backend whose queue
/// holds only closures (one allocation).
///
/// # Safety
/// `func` may be called once with `user` on any thread, and does not unwind.
pub unsafe fn host_function_callback(func: HostFunction, user: *mut std::ffi::c_void) -> HostCallback {
    let user = UserPointer(user);
    Box::new(move || {
        let user = user;
        // SAFETY: the caller's contract: once, any thread, no unwinding.
        unsafe { func(user.0) }
    })
}
