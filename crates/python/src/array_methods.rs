//! The Python methods of `gpuport.Array` (a view of an allocation on any device), with the
//! interchange protocols — `__dlpack__`/`__dlpack_device__` (every device), `__cuda_array_interface__`
//! (CUDA and ROCm arrays), `__array_interface__` and the buffer protocol (host memory).

use std::ffi::c_int;
use std::ptr;

use gpuport::{Array, BackendKind, CopyEngine};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{ffi, IntoPyObjectExt};

use crate::array::PyArray;
use crate::device::{parse_device, PyDevice, PyStream};
use crate::errors::IntoPy;
use crate::{cai, conversions, creation, dtype, exchange_api, index, scalar};

/// Arrays of up to this many elements show their values in `repr` (NumPy summarises
/// beyond 1000 elements).
const REPR_VALUES_UP_TO: usize = 1000;

#[pymethods]
impl PyArray {
    /// Extents.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }

    /// Strides in bytes (NumPy's convention).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let item = self.inner.dtype().itemsize().py()? as isize;
        PyTuple::new(py, self.inner.strides().iter().map(|s| s * item))
    }

    /// The element type's name (`"float32"`, `"bfloat16"`, `"bool"`).
    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype().to_string()
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.shape().len()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.inner.numel()
    }

    /// Bytes of the elements.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// Itemsize in bytes.
    #[getter]
    fn itemsize(&self) -> PyResult<usize> {
        self.inner.dtype().itemsize().py()
    }

    /// The device the memory is on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::new(self.inner.device().clone())
    }

    /// True for read-only arrays (writes through them are refused).
    #[getter]
    fn readonly(&self) -> bool {
        self.inner.is_read_only()
    }

    /// The address of element 0 (0 for an empty array).
    #[getter]
    fn data_ptr(&self) -> u64 {
        if self.inner.numel() == 0 {
            0
        } else {
            self.inner.data_addr()
        }
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.shape().first().copied().ok_or_else(|| PyTypeError::new_err("len() of a 0-d array"))
    }

    /// The one element as a Python scalar (read from the device); ValueError for any
    /// other size.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        conversions::item(py, &self.inner)
    }

    fn __float__(&self, py: Python<'_>) -> PyResult<f64> {
        conversions::to_float(py, &self.inner)
    }

    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        conversions::to_int(py, &self.inner)
    }

    fn __complex__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        conversions::to_complex(py, &self.inner)
    }

    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        conversions::to_bool(py, &self.inner)
    }

    fn __index__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        conversions::to_index(py, &self.inner)
    }

    /// NumPy's `__array__` (NumPy 2's `copy=`): host memory as a view; a device array is
    /// TypeError saying how to copy it to the host.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        conversions::to_numpy(slf, dtype, copy)
    }

    /// `==`, `!=` and the orderings: gpuport arrays do not compare elements (TypeError,
    /// never identity).
    fn __richcmp__(&self, _other: &Bound<'_, PyAny>, _op: pyo3::basic::CompareOp) -> PyResult<bool> {
        Err(conversions::refuse_comparison())
    }

    /// Basic indexing: integers, slices (negative steps too) and `...`; views share memory.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyArray>> {
        let steps = index::parse(key, self.inner.shape())?;
        PyArray::wrap(py, index::apply(&self.inner, &steps).py()?)
    }

    /// `a[key] = value`: copies `value` (a gpuport array on any device, anything
    /// `asarray` takes, or a scalar) into the view `a[key]` through the copy engine. The
    /// shapes must match (no broadcasting, but a scalar fills the view).
    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if self.inner.is_read_only() {
            return Err(pyo3::exceptions::PyValueError::new_err("assignment to a read-only array"));
        }
        let steps = index::parse(key, self.inner.shape())?;
        let view = index::apply(&self.inner, &steps).py()?;
        let src = match value.cast::<PyArray>() {
            Ok(a) => a.get().inner.clone(),
            Err(_) => {
                let scalar = scalar::Scalar::extract(value).ok();
                let host = crate::runtime::runtime().device("host").py()?;
                match scalar {
                    Some(v) => {
                        let mut one = Vec::new();
                        v.write(view.dtype(), &mut one)?;
                        let bytes = one.repeat(view.numel());
                        let a = Array::empty(&host, view.shape(), view.dtype()).py()?;
                        a.copy_from_bytes(&bytes).py()?;
                        a
                    }
                    None => creation::asarray(py, value, None, None, None)?.get().inner.clone(),
                }
            }
        };
        if src.shape() != view.shape() || src.dtype() != view.dtype() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cannot assign {} {} to a view of {} {} (no broadcasting or casting)",
                src.dtype(),
                crate::text::tuple(src.shape()),
                view.dtype(),
                crate::text::tuple(view.shape())
            )));
        }
        py.detach(|| gpuport::copy(&src, &view)).py()?;
        Ok(())
    }

    /// A copy on `device`; with `stream` (a stream of that device) the copy is queued there
    /// and this returns at once — later uses of the result order after it.
    #[pyo3(signature = (device, *, stream = None))]
    fn to(&self, py: Python<'_>, device: &Bound<'_, PyAny>, stream: Option<&PyStream>) -> PyResult<Py<PyArray>> {
        let dev = parse_device(device)?;
        let out = py.detach(|| -> gpuport::Result<Array> {
            match stream {
                None => self.inner.to_device(&dev),
                Some(s) => {
                    let out = Array::empty(&dev, self.inner.shape(), self.inner.dtype())?;
                    CopyEngine::default().copy_on(&self.inner, &out, &s.inner)?;
                    Ok(out)
                }
            }
        });
        PyArray::wrap(py, out.py()?)
    }

    /// The array API's name for [`to`](Self::to): a copy on `device` (this array itself
    /// when it is there already, as the standard allows).
    #[pyo3(signature = (device, /, *, stream = None))]
    fn to_device(slf: &Bound<'_, Self>, device: &Bound<'_, PyAny>, stream: Option<&PyStream>) -> PyResult<Py<PyArray>> {
        let dev = parse_device(device)?;
        if dev.id() == slf.get().inner.device_id() && stream.is_none() {
            return Ok(slf.clone().unbind());
        }
        slf.get().to(slf.py(), device, stream)
    }

    /// A C-contiguous copy on the same device.
    fn copy(&self, py: Python<'_>) -> PyResult<Py<PyArray>> {
        let dev = self.inner.device().clone();
        let out = py.detach(|| self.inner.to_device(&dev)).py()?;
        PyArray::wrap(py, out)
    }

    /// Waits for the array's pending work.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    /// The elements as nested Python lists (copied to the host first).
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes = py.detach(|| self.inner.to_bytes()).py()?;
        let dtype = self.inner.dtype();
        let item = dtype.itemsize().py()?;
        let mut values = Vec::with_capacity(self.inner.numel());
        for chunk in bytes.chunks_exact(item.max(1)) {
            values.push(scalar::read(py, dtype, chunk)?);
        }
        nest(py, self.inner.shape(), &mut values.into_iter())
    }

    /// Small arrays show their values, as NumPy's repr does (read from the device, which
    /// waits for the array's pending work): `gpuport.Array([1, 2, 3], dtype=int32,
    /// device='host:0')`. Larger ones, and arrays whose values cannot be read, show their
    /// shape instead.
    fn __repr__(&self, py: Python<'_>) -> String {
        let readonly = if self.inner.is_read_only() { ", readonly=True" } else { "" };
        let (dtype, device) = (self.inner.dtype(), self.inner.device_id());
        if self.inner.numel() <= REPR_VALUES_UP_TO {
            if let Ok(values) = self.tolist(py).and_then(|list| list.repr()) {
                return format!("gpuport.Array({values}, dtype={dtype}, device='{device}'{readonly})");
            }
        }
        let shape = crate::text::tuple(self.inner.shape());
        format!("gpuport.Array(shape={shape}, dtype={dtype}, device='{device}'{readonly})")
    }

    /// The DLPack C exchange table (dlpack.h 1.3), a capsule named `dlpack_exchange_api`.
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(exchange_api::capsule(py)?.into_any().unbind())
    }

    /// The same table's address (the name dlpack.h 1.2 used).
    #[classattr]
    fn __c_dlpack_exchange_api__() -> usize {
        exchange_api::address()
    }

    // `__dlpack__` is a fast-call method of its own (`dlpack_method`), put on the type when
    // the module is made.

    /// `(device_type, device_id)` by DLPack's numbering.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        let d = gpuport_dlpack::dl_device_of(&self.inner).py_exchange()?;
        Ok((d.device_type, d.device_id))
    }

    /// The CUDA Array Interface v3 — for CUDA and ROCm arrays only (AttributeError
    /// elsewhere, so `hasattr` tells consumers the truth).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.inner.device().id().kind {
            BackendKind::Cuda | BackendKind::Rocm => cai::export_dict(py, &self.inner),
            other => Err(PyAttributeError::new_err(format!(
                "__cuda_array_interface__ is for CUDA and ROCm arrays; this one is on {other}"
            ))),
        }
    }

    /// NumPy's array interface (version 3), for host arrays; pending work is waited for
    /// first, since host consumers read at once.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.host_only("__array_interface__")?;
        // The GIL is let go only when there is work to wait for.
        if self.inner.has_pending_work().py()? {
            py.detach(|| self.inner.synchronize()).py()?;
        }
        cai::array_interface_dict(py, &self.inner)
    }

    /// The buffer protocol (host arrays): shape, byte strides and a struct format;
    /// writable unless read-only. Pending work is waited for first.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let owner = slf.clone();
        let this = owner.get();
        if !this.host_visible() {
            return Err(PyBufferError::new_err(format!(
                "the buffer protocol is only for host arrays; this one is on {}",
                this.inner.device_id()
            )));
        }
        let a = &this.inner;
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE && a.is_read_only() {
            return Err(PyBufferError::new_err("the array is read-only"));
        }
        let dtype = a.dtype();
        let format = dtype::struct_format(dtype);
        if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT && format.is_none() {
            return Err(PyBufferError::new_err(format!("{dtype} has no struct format code")));
        }
        let strides_wanted = flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES;
        if !strides_wanted && !a.layout().is_c_contiguous() {
            return Err(PyBufferError::new_err("the array is not C-contiguous and the consumer takes no strides"));
        }
        if flags & ffi::PyBUF_F_CONTIGUOUS == ffi::PyBUF_F_CONTIGUOUS && !a.layout().is_f_contiguous() {
            return Err(PyBufferError::new_err("the array is not Fortran-contiguous"));
        }
        if flags & ffi::PyBUF_C_CONTIGUOUS == ffi::PyBUF_C_CONTIGUOUS && !a.layout().is_c_contiguous() {
            return Err(PyBufferError::new_err("the array is not C-contiguous"));
        }
        let py = slf.py();
        py.detach(|| a.synchronize()).py()?;
        let item = dtype.itemsize().py()?;
        // Shape and byte strides live in one allocation freed by `__releasebuffer__`.
        let dims: Box<[isize]> =
            a.shape().iter().map(|&n| n as isize).chain(a.strides().iter().map(|&s| s * item as isize)).collect();
        let ndim = a.shape().len();
        let dims = Box::into_raw(dims);
        // SAFETY: `view` is the consumer's Py_buffer to fill (CPython's contract); the
        // memory stays valid while `obj` (this array, which holds the allocation) does,
        // and `dims` until `__releasebuffer__` frees it.
        unsafe {
            let base = dims.cast::<isize>();
            (*view).obj = slf.into_any().into_ptr();
            // Exposed provenance: the consumer is CPython code reaching the memory by
            // address (gpuport's own host memory was exposed when it was allocated).
            (*view).buf = std::ptr::with_exposed_provenance_mut(a.data_addr() as usize);
            (*view).len = a.nbytes() as isize;
            (*view).readonly = c_int::from(a.is_read_only());
            (*view).itemsize = item as isize;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                format.map_or(ptr::null_mut(), |f| f.as_ptr().cast_mut())
            } else {
                ptr::null_mut()
            };
            (*view).ndim = ndim as c_int;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND { base } else { ptr::null_mut() };
            (*view).strides = if strides_wanted { base.add(ndim) } else { ptr::null_mut() };
            (*view).suboffsets = ptr::null_mut();
            (*view).internal = dims.cast();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: `internal` is the boxed slice `__getbuffer__` leaked for this view, of
        // 2 × ndim entries; it is freed once, here.
        unsafe {
            let ndim = (*view).ndim as usize;
            let dims = ptr::slice_from_raw_parts_mut((*view).internal.cast::<isize>(), 2 * ndim);
            drop(Box::from_raw(dims));
        }
    }
}

/// Row-major values as nested lists of `shape` (a 0-d shape gives the one value).
fn nest<'py>(
    py: Python<'py>,
    shape: &[usize],
    values: &mut impl Iterator<Item = Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    match shape.split_first() {
        None => values.next().map_or_else(|| py.None().into_bound_py_any(py), Ok),
        Some((&n, rest)) => {
            let items = (0..n).map(|_| nest(py, rest, values)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}
