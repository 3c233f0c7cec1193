//! Values whose drop may run Python code (a Python object's last reference, a Python
//! producer's DLPack deleter, a held `Py_buffer`) are dropped with the GIL held — and,
//! once the interpreter is finalizing or gone, not at all (leaked), since no Python object
//! may be touched then. gpuport's release path already keeps such drops off driver
//! callback and stream worker threads (`gpuport::release`).

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
        if pyo3::Python::try_attach(|_py| drop(slot.take())).is_none() {
            std::mem::forget(slot);
        }
    }
}
