//! gpuport's errors as Python exceptions of the right kind: bad
//! values are ValueError, bad types TypeError, an impossible export BufferError, a masked
//! CAI NotImplementedError, an unavailable backend or collectives engine
//! `gpuport.BackendUnavailable` (a RuntimeError carrying the reason), out of memory
//! MemoryError, a failed collective RuntimeError.

use gpuport::Error;
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    gpuport,
    BackendUnavailable,
    PyRuntimeError,
    "A backend (or the device asked for) is not available on this machine; `.reason` says why."
);

/// Where an error arose: interchange errors mean different things in different places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Creating arrays, devices, streams: interchange errors are bad values.
    General,
    /// DLPack export or import: an impossible request is a BufferError.
    Exchange,
}

/// The Python exception for `e`.
pub fn to_py(e: Error, context: Context) -> PyErr {
    let text = e.to_string();
    match e {
        Error::LibraryNotFound { .. }
        | Error::MissingSymbol { .. }
        | Error::DriverTooOld { .. }
        | Error::NoDevice { .. }
        | Error::BackendUnavailable { .. }
        | Error::EngineUnavailable { .. } => unavailable(text),
        Error::OutOfMemory { .. } => PyMemoryError::new_err(text),
        Error::InvalidArgument { .. }
        | Error::InvalidDeviceString { .. }
        | Error::InvalidLayout { .. }
        | Error::DeviceNotFound { .. }
        | Error::BackendMismatch { .. }
        | Error::Interchange { .. }
        | Error::Unsupported { .. }
        | Error::EngineUnsupported { .. } => match context {
            Context::Exchange => PyBufferError::new_err(text),
            Context::General => PyValueError::new_err(text),
        },
        _ => PyRuntimeError::new_err(text),
    }
}

/// A `gpuport.BackendUnavailable` whose `.reason` is `reason`.
pub fn unavailable(reason: String) -> PyErr {
    let err = BackendUnavailable::new_err(reason.clone());
    Python::attach(|py| {
        // Setting an attribute on a fresh exception object cannot fail but for memory.
        let _ = err.value(py).setattr("reason", reason);
    });
    err
}

/// `result` with its error as the Python exception for `context`.
pub trait IntoPy<T> {
    /// Maps a general error (creation, devices, streams).
    fn py(self) -> PyResult<T>;
    /// Maps an exchange error (DLPack).
    fn py_exchange(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for gpuport::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| to_py(e, Context::General))
    }
    fn py_exchange(self) -> PyResult<T> {
        self.map_err(|e| to_py(e, Context::Exchange))
    }
}
