//! `gpuport.empty`, `zeros`, `ones`, `full` and `asarray`. Arrays made from a shape are
//! float64 unless asked otherwise, as NumPy's are.

use gpuport::{AnyDevice, Array, DType};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::array::PyArray;
use crate::device::parse_device;
use crate::errors::{Context, IntoPy};
use crate::placement::place;
use crate::runtime::runtime;
use crate::scalar::{self, Scalar};
use crate::{dtype, from_dlpack, host_import};

/// A shape argument: an int or a sequence of ints (≥ 0).
fn parse_shape(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(n) = shape.extract::<i64>() {
        return Ok(vec![usize::try_from(n).map_err(|_| PyValueError::new_err(format!("negative extent {n}")))?]);
    }
    let dims: Vec<i64> = shape.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "shape must be an int or a tuple of ints, not {}",
            shape.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    dims.into_iter()
        .map(|n| usize::try_from(n).map_err(|_| PyValueError::new_err(format!("negative extent {n}"))))
        .collect()
}

fn device_or_host(device: Option<&Bound<'_, PyAny>>) -> PyResult<AnyDevice> {
    match device.filter(|d| !d.is_none()) {
        Some(d) => parse_device(d),
        None => runtime().device("host").py(),
    }
}

/// `gpuport.empty(shape, dtype=float64, device="host")`: contents unspecified.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None, device = None))]
pub fn empty(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    allocate(py, shape, dtype, device, Array::empty)
}

/// `gpuport.zeros(shape, dtype=float64, device="host")`.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None, device = None))]
pub fn zeros(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    allocate(py, shape, dtype, device, Array::zeros)
}

/// The arguments of `empty`/`zeros` parsed, and `make` run without the GIL.
fn allocate(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    make: fn(&AnyDevice, &[usize], DType) -> gpuport::Result<Array>,
) -> PyResult<Py<PyArray>> {
    let (shape, dtype, dev) = (parse_shape(shape)?, dtype::parse(dtype, DType::F64)?, device_or_host(device)?);
    PyArray::wrap(py, py.detach(|| make(&dev, &shape, dtype)).py()?)
}

/// An array of `shape` holding `bytes` (row-major elements), on `dev`.
fn from_bytes(py: Python<'_>, dev: &AnyDevice, shape: &[usize], dtype: DType, bytes: &[u8]) -> PyResult<Array> {
    py.detach(|| {
        let a = Array::empty(dev, shape, dtype)?;
        a.copy_from_bytes(bytes)?;
        Ok(a)
    })
    .py()
}

/// `gpuport.full(shape, fill_value, dtype=None, device="host")`; the dtype defaults to
/// the one NumPy infers from the value.
#[pyfunction]
#[pyo3(signature = (shape, fill_value, dtype = None, device = None))]
pub fn full(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    let shape = parse_shape(shape)?;
    let (_, inferred, values) = scalar::flatten(fill_value)?;
    let [value] = values[..] else { return Err(PyTypeError::new_err("fill_value must be a scalar")) };
    filled(py, &shape, value, dtype::parse(dtype, inferred)?, device)
}

/// `gpuport.ones(shape, dtype=float64, device="host")`.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None, device = None))]
pub fn ones(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    filled(py, &parse_shape(shape)?, Scalar::Int(1), dtype::parse(dtype, DType::F64)?, device)
}

/// An array of `shape` on `device` with every element `value`.
fn filled(
    py: Python<'_>,
    shape: &[usize],
    value: Scalar,
    dtype: DType,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    let mut one = Vec::new();
    value.write(dtype, &mut one)?;
    let numel: usize = shape.iter().product();
    let bytes = one.repeat(numel);
    PyArray::wrap(py, from_bytes(py, &device_or_host(device)?, shape, dtype, &bytes)?)
}

/// Applies `dtype`/`device`/`copy` to an existing array (no casts: a different dtype is
/// ValueError).
fn finish(
    py: Python<'_>,
    a: Array,
    dtype: Option<DType>,
    device: Option<AnyDevice>,
    copy: Option<bool>,
) -> PyResult<Py<PyArray>> {
    if let Some(d) = dtype.filter(|&d| d != a.dtype()) {
        return Err(PyValueError::new_err(format!(
            "asarray: the data is {} and dtype={d} was asked for; gpuport does not convert element types",
            a.dtype()
        )));
    }
    PyArray::wrap(py, place(py, a, device, copy, Context::General)?)
}

/// `gpuport.asarray(obj, dtype=None, device=None, copy=None)`: a gpuport array, a DLPack
/// producer, a CUDA Array Interface producer, a buffer-protocol / `__array_interface__`
/// object (zero-copy where possible), or Python scalars and nested sequences.
#[pyfunction]
#[pyo3(signature = (obj, dtype = None, device = None, copy = None))]
pub fn asarray(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyArray>> {
    let want_dtype = dtype.filter(|d| !d.is_none()).map(|d| dtype::parse(Some(d), DType::F64)).transpose()?;
    let dev = device.filter(|d| !d.is_none()).map(parse_device).transpose()?;
    if let Ok(a) = obj.cast::<PyArray>() {
        return finish(py, a.get().inner.clone(), want_dtype, dev, copy);
    }
    if obj.hasattr("__dlpack__")? && obj.hasattr("__dlpack_device__")? {
        let a = from_dlpack::from_dlpack(py, obj, None, None)?;
        return finish(py, a.get().inner.clone(), want_dtype, dev, copy);
    }
    if obj.hasattr("__cuda_array_interface__")? {
        let a = crate::cai::as_array(py, obj, "enqueue", None)?;
        return finish(py, a.get().inner.clone(), want_dtype, dev, copy);
    }
    if let Some(a) = host_import::import(obj)? {
        return finish(py, a, want_dtype, dev, copy);
    }
    if copy == Some(false) {
        return Err(PyValueError::new_err("copy=False, but Python data must be copied into an array"));
    }
    let (shape, inferred, values) = scalar::flatten(obj)?;
    let dtype = want_dtype.unwrap_or(inferred);
    let mut bytes = Vec::with_capacity(values.len() * dtype.itemsize().py()?);
    for v in values {
        Scalar::write(v, dtype, &mut bytes)?;
    }
    let dev = match dev {
        Some(d) => d,
        None => runtime().device("host").py()?,
    };
    PyArray::wrap(py, from_bytes(py, &dev, &shape, dtype, &bytes)?)
}

/// An array argument that is worked on where it is (a kernel's, a collective's): a gpuport
/// array, or any other array imported without a copy (DLPack, the CUDA Array Interface);
/// `None` for anything else.
pub(crate) fn array_operand(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<Array>> {
    if let Ok(a) = obj.cast::<PyArray>() {
        return Ok(Some(a.get().inner.clone()));
    }
    if obj.hasattr("__dlpack__")? || obj.hasattr("__cuda_array_interface__")? {
        return Ok(Some(asarray(py, obj, None, None, Some(false))?.get().inner.clone()));
    }
    Ok(None)
}
