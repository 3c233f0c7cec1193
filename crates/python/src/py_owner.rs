//! Values whose drop may run Python code (a Python object's last reference, a Python
//! producer's DLPack deleter, a held `Py_buffer`) are dropped with the GIL held — and,
//! once the interpreter is finalizing or gone, not at all (leaked), since no Python object
//! may be touched then. gpuport's release path already keeps such drops off driver
//! callback and stream worker threads (`gpuport::release`).
//!
//! Such a drop can happen while an exception is being raised: an array that holds a
//! producer's deleter is a local of a frame an exception unwinds, or is dropped by gpuport
//! on its way to returning an error. Python code run then (a deleter made with ctypes, a
//! producer's own C code calling back into Python) would see that exception as its own —
//! fail with it, or clear it, so that the error the caller raised is lost (CPython then
//! reports `SystemError: error return without exception set`). [`keeping_exception`] runs
//! every such drop with the exception set aside and put back afterwards.

use pyo3::{ffi, PyErr, Python};

/// Drops its value with the GIL held, or leaks it when Python can no longer be entered.
pub struct PyOwner<T: Send + Sync + 'static>(Option<T>);

impl<T: Send + Sync + 'static> PyOwner<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Self {
        PyOwner(Some(value))
    }
}

impl<T: Send + Sync + 'static> Drop for PyOwner<T> {
    fn drop(&mut self) {
        let mut slot = self.0.take();
        // `try_attach` declines when the interpreter is not initialized or is finalizing;
        // the value then stays in `slot` and is forgotten rather than dropped.
        if Python::try_attach(|py| keeping_exception(py, || drop(slot.take()))).is_none() {
            std::mem::forget(slot);
        }
    }
}

/// Runs `f` — which may run Python code — with the exception being raised, if any, set
/// aside, and puts it back afterwards. An exception `f` leaves set has no caller to go to:
/// it is reported as unraisable (as CPython reports one from a `__del__`), never left
/// behind for an unrelated call to find.
pub fn keeping_exception<R>(py: Python<'_>, f: impl FnOnce() -> R) -> R {
    // Looked for first: fetching when there is none still costs a call per drop.
    // SAFETY: the GIL is held (`py`).
    let pending = if unsafe { ffi::PyErr_Occurred() }.is_null() { None } else { PyErr::take(py) };
    let r = f();
    // SAFETY: as above.
    if !unsafe { ffi::PyErr_Occurred() }.is_null() {
        if let Some(left) = PyErr::take(py) {
            left.write_unraisable(py, None);
        }
    }
    if let Some(e) = pending {
        e.restore(py);
    }
    r
}
