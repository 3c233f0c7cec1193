//! Errors crossing the C boundary: gpuport's `Error` as the plugin's error object
//! (`gpuport_error`: a kind and a message), and panics caught before they could unwind
//! into the caller.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use gpuport_core::{Error, Result};
use gpuport_plugin_abi as abi;

/// The error object handed to the caller: `Box<ErrorObject>` as `*mut abi::Error`.
struct ErrorObject {
    kind: i32,
    message: CString,
}

/// The ABI's kind for a gpuport error.
fn kind_of(error: &Error) -> i32 {
    match error {
        Error::InvalidArgument { .. } | Error::InvalidLayout { .. } | Error::InvalidDeviceString { .. } => {
            abi::error_kind::INVALID_ARGUMENT
        }
        Error::BackendMismatch { .. } => abi::error_kind::INVALID_ARGUMENT,
        Error::OutOfMemory { .. } => abi::error_kind::OUT_OF_MEMORY,
        Error::Unsupported { .. } => abi::error_kind::UNSUPPORTED,
        Error::NotReady { .. } => abi::error_kind::NOT_READY,
        Error::InvalidHandle { .. } => abi::error_kind::INVALID_HANDLE,
        Error::NoDevice { .. } => abi::error_kind::NO_DEVICE,
        Error::DeviceNotFound { .. } => abi::error_kind::DEVICE_NOT_FOUND,
        Error::WouldDeadlock { .. } => abi::error_kind::WOULD_DEADLOCK,
        _ => abi::error_kind::FAILED,
    }
}

/// A new error object of `kind` with `message` (a NUL inside it is replaced).
pub(crate) fn new_error(kind: i32, message: &str) -> abi::Status {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    Box::into_raw(Box::new(ErrorObject { kind, message })).cast()
}

/// Runs one call of the table: `Ok` is a null status, an error its object, and a panic an
/// error of kind `FAILED` saying so — nothing unwinds out.
#[inline]
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> abi::Status {
    // The call's result becomes the status inside `catch_unwind`, so only a pointer
    // crosses it (a whole `Result` would be stored and reloaded on every call).
    let call = AssertUnwindSafe(|| match f() {
        Ok(()) => std::ptr::null_mut(),
        Err(e) => error_status(e),
    });
    catch_unwind(call).unwrap_or_else(panic_status)
}

/// [`guard`]'s error path, kept out of line (the success path is the hot one).
#[cold]
#[inline(never)]
fn error_status(e: Error) -> abi::Status {
    new_error(kind_of(&e), &e.to_string())
}

#[cold]
#[inline(never)]
fn panic_status(payload: Box<dyn std::any::Any + Send>) -> abi::Status {
    new_error(
        abi::error_kind::FAILED,
        &format!("the plugin panicked: {}", gpuport_core::unwound_work_message(&*payload)),
    )
}

#[cold]
#[inline(never)]
fn null_out() -> Error {
    Error::invalid_argument("a null out-pointer")
}

/// Writes `value` to a caller's out-pointer, refusing a null one.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
#[inline]
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> Result<()> {
    if out.is_null() {
        return Err(null_out());
    }
    // SAFETY: non-null, and valid for the write per the caller.
    unsafe { out.write(value) };
    Ok(())
}

pub(crate) unsafe extern "C" fn error_kind(error: *const abi::Error) -> i32 {
    // SAFETY: a live object this plugin made (the header's contract).
    unsafe { error.cast::<ErrorObject>().as_ref() }.map_or(abi::error_kind::FAILED, |e| e.kind)
}

pub(crate) unsafe extern "C" fn error_message(error: *const abi::Error) -> *const c_char {
    // SAFETY: as above; the message lives until `error_destroy`.
    unsafe { error.cast::<ErrorObject>().as_ref() }.map_or(std::ptr::null(), |e| e.message.as_ptr())
}

pub(crate) unsafe extern "C" fn error_destroy(error: *mut abi::Error) {
    if !error.is_null() {
        // SAFETY: made by `new_error` with `Box::into_raw`, destroyed once (the contract).
        drop(unsafe { Box::from_raw(error.cast::<ErrorObject>()) });
    }
}
