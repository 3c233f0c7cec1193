//! `gpuport.Array`, the type: a Python object holding one `gpuport::Array`. Its Python
//! methods (the interchange protocols among them) are in `array_methods.rs`, above the
//! modules they call; every other module sees only this type.

use gpuport::{Array, BackendKind};
use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;

/// An n-dimensional array on any device.
#[pyclass(module = "gpuport", name = "Array", frozen)]
pub struct PyArray {
    pub(crate) inner: Array,
}

impl PyArray {
    /// A new Python `Array` for `inner`.
    pub fn wrap(py: Python<'_>, inner: Array) -> PyResult<Py<PyArray>> {
        Py::new(py, PyArray { inner })
    }

    /// True when the elements are in host-addressable memory of the host device (what
    /// `__array_interface__` and the buffer protocol can hand out).
    pub(crate) fn host_visible(&self) -> bool {
        self.inner.device().id().kind == BackendKind::Host && self.inner.buffer().is_host_accessible()
    }

    pub(crate) fn host_only(&self, what: &str) -> PyResult<()> {
        if self.host_visible() {
            return Ok(());
        }
        Err(PyAttributeError::new_err(format!(
            "{what} is only for host arrays; this one is on {} (use __dlpack__, or .to('host'))",
            self.inner.device_id()
        )))
    }
}
