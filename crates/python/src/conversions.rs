//! What NumPy users write of an array: `a.item()`, `float(a)`, `int(a)`, `bool(a)`,
//! `complex(a)`, `operator.index(a)` on one-element arrays (NumPy's rules and messages),
//! `np.asarray(a)` through `__array__` (host memory as a view, with NumPy 2's `copy=`; a
//! device array refused with how to copy it to the host, as CuPy and PyTorch refuse), and
//! `==`, which gpuport refuses rather than answer identity.

use gpuport::{Array, DTypeCode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyFloat, PyInt};

use crate::scalar;

/// The one element of `a` as a Python scalar (read from the device, after its pending
/// work): NumPy's `item()`.
pub fn item<'py>(py: Python<'py>, a: &Array) -> PyResult<Bound<'py, PyAny>> {
    if a.numel() != 1 {
        return Err(PyValueError::new_err(format!(
            "can only convert an array of size 1 to a Python scalar (this one has {} elements)",
            a.numel()
        )));
    }
    let bytes = py.detach(|| a.to_bytes()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    scalar::read(py, a.dtype(), &bytes)
}

/// The one element of `a` for `float()`, `int()` and `complex()`: NumPy's TypeError for
/// any other size.
fn only<'py>(py: Python<'py>, a: &Array) -> PyResult<Bound<'py, PyAny>> {
    if a.numel() != 1 {
        return Err(PyTypeError::new_err(format!(
            "only arrays of one element can be converted to Python scalars (this one has {})",
            a.numel()
        )));
    }
    item(py, a)
}

/// `float(a)`.
pub fn to_float(py: Python<'_>, a: &Array) -> PyResult<f64> {
    py.get_type::<PyFloat>().call1((only(py, a)?,))?.extract()
}

/// `int(a)`.
pub fn to_int<'py>(py: Python<'py>, a: &Array) -> PyResult<Bound<'py, PyAny>> {
    py.get_type::<PyInt>().call1((only(py, a)?,))
}

/// `complex(a)`.
pub fn to_complex<'py>(py: Python<'py>, a: &Array) -> PyResult<Bound<'py, PyAny>> {
    py.get_type::<PyComplex>().call1((only(py, a)?,))
}

/// `bool(a)`: the truth of the one element; NumPy's ValueError for any other size (an
/// empty array included).
pub fn to_bool(py: Python<'_>, a: &Array) -> PyResult<bool> {
    match a.numel() {
        1 => py.get_type::<PyBool>().call1((item(py, a)?,))?.extract(),
        0 => Err(PyValueError::new_err("the truth value of an empty array is ambiguous")),
        _ => Err(PyValueError::new_err(
            "the truth value of an array with more than one element is ambiguous (there is no a.any() or \
             a.all() here: compare on the host, e.g. with NumPy)",
        )),
    }
}

/// `operator.index(a)`: integer (and bool) arrays of one element only.
pub fn to_index<'py>(py: Python<'py>, a: &Array) -> PyResult<Bound<'py, PyAny>> {
    let integer = matches!(a.dtype().code(), DTypeCode::Int | DTypeCode::UInt | DTypeCode::Bool);
    if !integer || a.numel() != 1 {
        return Err(PyTypeError::new_err(format!(
            "only integer arrays of one element can be used as an index (this one is {} with {} elements)",
            a.dtype(),
            a.numel()
        )));
    }
    py.get_type::<PyInt>().call1((item(py, a)?,))
}

/// `a.__array__(dtype=None, copy=None)`, NumPy 2's protocol: host memory as a NumPy view
/// (through the buffer protocol, so it shares memory), converted or copied as `dtype` and
/// `copy` ask — `copy=False` with a dtype that needs a conversion is ValueError, as NumPy
/// says. Memory the host cannot read is TypeError saying how to copy it there.
pub fn to_numpy<'py>(
    slf: &Bound<'py, crate::array::PyArray>,
    dtype: Option<&Bound<'py, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let a = &slf.get().inner;
    if !a.buffer().is_host_accessible() {
        return Err(PyTypeError::new_err(format!(
            "a gpuport array on {} is not host memory, so NumPy cannot view it: copy it to the host first, \
             e.g. np.from_dlpack(a.to('host')) or np.asarray(a.to('host'))",
            a.device_id()
        )));
    }
    let numpy = py.import("numpy")?;
    let view = numpy.call_method1("asarray", (py.get_type::<pyo3::types::PyMemoryView>().call1((slf,))?,))?;
    let dtype = dtype.filter(|d| !d.is_none());
    let converts = match dtype {
        Some(d) => !view.getattr("dtype")?.eq(numpy.call_method1("dtype", (d,))?)?,
        None => false,
    };
    match (copy, converts) {
        (Some(false), true) => Err(PyValueError::new_err(
            "Unable to avoid copy while creating an array as requested: the dtype asked for needs a conversion",
        )),
        (Some(true), _) | (None, true) => {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("copy", true)?;
            if let Some(d) = dtype {
                kwargs.set_item("dtype", d)?;
            }
            numpy.call_method("array", (view,), Some(&kwargs))
        }
        _ => Ok(view),
    }
}

/// `a == b`, `a != b`: refused. gpuport arrays do no arithmetic; answering identity (what
/// Python does by default) would be wrong and silent.
pub fn refuse_comparison() -> PyErr {
    PyTypeError::new_err(
        "gpuport.Array does not compare elements: compare on the host, e.g. np.from_dlpack(a.to('host')) == \
         np.from_dlpack(b.to('host')); use `a is b` for identity",
    )
}
