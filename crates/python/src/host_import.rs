//! Host data by the buffer protocol or `__array_interface__`, zero-copy: the array holds
//! the exporter (and its `Py_buffer`), released with the GIL.

use gpuport::{Array, DType, ForeignElements, Layout, MemoryKind};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::{ffi, PyErr};

use crate::errors::IntoPy;
use crate::py_owner::PyOwner;
use crate::runtime::runtime;
use crate::{cai, dtype};

/// A `Py_buffer` held for an array's lifetime; released (with the GIL, by `PyOwner`) once.
struct HeldView(Box<ffi::Py_buffer>);

// SAFETY: the view is only touched again by its release, which `PyOwner` runs with the
// GIL held; the memory it describes is what the array shares across threads anyway.
unsafe impl Send for HeldView {}
// SAFETY: as above; no shared access reads the view.
unsafe impl Sync for HeldView {}

impl Drop for HeldView {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released
        // once, with the GIL held (PyOwner).
        unsafe { ffi::PyBuffer_Release(&mut *self.0) }
    }
}

/// An array over host memory whose element 0 is at `addr` — reached through `pointer`
/// where the exporter handed one over (see [`ForeignElements::pointer`]) — kept alive by
/// `keep`.
fn host_array(
    addr: u64,
    pointer: Option<std::ptr::NonNull<u8>>,
    dtype: DType,
    layout: Layout,
    read_only: bool,
    keep: impl Send + Sync + 'static,
) -> gpuport::Result<Array> {
    let host = runtime().device("host")?;
    let at =
        ForeignElements { element0: addr, memory: MemoryKind::Host, host_accessible: true, pointer, attributes: None };
    // SAFETY: the exporter keeps the memory valid while `keep` (which holds it) lives.
    let array = unsafe { Array::from_foreign(host, at, dtype, layout, keep) }?;
    Ok(if read_only { array.into_read_only() } else { array })
}

/// Through the buffer protocol (writable when the exporter allows it).
fn by_buffer(obj: &Bound<'_, PyAny>) -> PyResult<Array> {
    // SAFETY: Py_buffer is plain data; zeroed is its "empty" state.
    let mut view: Box<ffi::Py_buffer> = Box::new(unsafe { std::mem::zeroed() });
    // SAFETY: a live object and a view to fill; on failure an exception is set.
    let mut rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_RECORDS) };
    if rc != 0 {
        drop(PyErr::take(obj.py()));
        // SAFETY: as above, read-only this time.
        rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_RECORDS_RO) };
    }
    if rc != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let held = HeldView(view);
    let v = &*held.0;
    let format = if v.format.is_null() {
        "B".to_owned()
    } else {
        // SAFETY: a non-NULL format is a NUL-terminated string owned by the view.
        unsafe { std::ffi::CStr::from_ptr(v.format) }.to_string_lossy().into_owned()
    };
    let itemsize = v.itemsize as usize;
    let dtype = dtype::from_struct_format(&format, itemsize).map_err(PyBufferError::new_err)?;
    let ndim = v.ndim as usize;
    let (shape, strides): (Vec<usize>, Vec<isize>) = if ndim == 0 {
        (Vec::new(), Vec::new())
    } else {
        // SAFETY: PyBUF_RECORDS(_RO) asks for shape and strides: `ndim` entries each.
        let shape = unsafe { std::slice::from_raw_parts(v.shape, ndim) };
        // SAFETY: as above.
        let strides = unsafe { std::slice::from_raw_parts(v.strides, ndim) };
        (shape.iter().map(|&n| n as usize).collect(), strides.to_vec())
    };
    let layout =
        Layout::from_byte_strides(&shape, &strides, itemsize).map_err(|e| PyBufferError::new_err(e.to_string()))?;
    let (addr, pointer, read_only) = (v.buf.addr() as u64, std::ptr::NonNull::new(v.buf.cast::<u8>()), v.readonly != 0);
    host_array(addr, pointer, dtype, layout, read_only, PyOwner::new(held)).py()
}

/// Through `__array_interface__` (version 3; the `data` entry a `(pointer, read_only)` pair).
fn by_array_interface(obj: &Bound<'_, PyAny>, desc: &Bound<'_, PyAny>) -> PyResult<Array> {
    let interface = cai::parse_interface(desc, "__array_interface__")?;
    let layout = interface.layout().py()?;
    let keep = PyOwner::new(obj.clone().unbind());
    // An address in a dict: no pointer to keep the provenance of.
    host_array(interface.data, None, interface.dtype, layout, interface.read_only, keep).py()
}

/// A zero-copy host array over `obj`'s memory, if it exports it by the buffer protocol or
/// `__array_interface__`; `None` if it does neither.
pub fn import(obj: &Bound<'_, PyAny>) -> PyResult<Option<Array>> {
    // SAFETY: a live object; the check sets no exception.
    if unsafe { ffi::PyObject_CheckBuffer(obj.as_ptr()) } == 1 {
        return by_buffer(obj).map(Some);
    }
    match obj.getattr("__array_interface__") {
        Ok(desc) => by_array_interface(obj, &desc).map(Some),
        Err(_) => Ok(None),
    }
}
