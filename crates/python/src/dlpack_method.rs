//! `Array.__dlpack__` as a fast-call method of its own, installed on the type when the
//! module is made. A consumer calls it once per exchange with a few keywords (NumPy:
//! `dl_device`, `copy`, `max_version`; gpuport and PyTorch: `stream`, `max_version`), named
//! by interned strings: here they are matched by identity with the module's own interned
//! names, and by text only when a caller's name is not interned. pyo3's generated parser
//! turns every name into UTF-8 and compares text — counted at some 600 instructions a
//! call, more than half the export's own, on the path of every `np.from_dlpack(array)`.

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::Borrowed;

use crate::array::PyArray;
use crate::dlpack;

/// The keywords, in the order [`keywords`] returns their values.
const NAMES: [&str; 4] = ["stream", "max_version", "dl_device", "copy"];

const DOC: &CStr = c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n\
DLPack export (array API standard): a `dltensor` capsule (no `max_version`) or a\n\
`dltensor_versioned` one, zero-copy unless a copy or another device is asked for.";

/// Puts the method on `Array` (replacing nothing: the class defines no `__dlpack__` of its
/// own).
pub fn install(ty: &Bound<'_, PyType>) -> PyResult<()> {
    let py = ty.py();
    // Leaked once per process: CPython keeps a pointer to the definition for as long as
    // the method exists.
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"__dlpack__".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunctionFastWithKeywords: dunder },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: DOC.as_ptr(),
    }));
    // SAFETY: `ty` is a live type object and `def` a method definition that lives for the
    // rest of the process; a NULL result carries the error.
    let descr = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(ty.as_type_ptr(), def))? };
    ty.setattr("__dlpack__", descr)
}

/// The method's C entry. No panic leaves it: one becomes a `RuntimeError`.
unsafe extern "C" fn dunder(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a method with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CPython passes the live receiver, `nargs` positional values at `args`
        // followed by one value per name in `kwnames` (a tuple of strings, or NULL).
        unsafe { call(py, slf, args, nargs, kwnames) }.map(Bound::into_ptr)
    }));
    let err = match result {
        Ok(Ok(object)) => return object,
        Ok(Err(e)) => e,
        Err(_) => PyRuntimeError::new_err("gpuport panicked in Array.__dlpack__ (a bug)"),
    };
    err.restore(py);
    ptr::null_mut()
}

/// # Safety
/// As CPython calls a `METH_FASTCALL | METH_KEYWORDS` method (see [`dunder`]).
unsafe fn call<'py>(
    py: Python<'py>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the receiver is live for the call (the caller's contract).
    let receiver = unsafe { Borrowed::from_ptr(py, slf) };
    let array = receiver.cast::<PyArray>()?;
    if nargs != 0 {
        return Err(PyTypeError::new_err(format!(
            "Array.__dlpack__() takes keyword arguments only ({nargs} positional given)"
        )));
    }
    // SAFETY: forwarded from the caller.
    let [stream, max_version, dl_device, copy] = unsafe { keywords(py, args.add(nargs as usize), kwnames) }?;
    let copy = match copy.filter(|c| !c.is_none()) {
        None => None,
        Some(c) => Some(c.cast::<pyo3::types::PyBool>().map_err(|_| not_bool(&c))?.is_true()),
    };
    dlpack::export(py, &array.get().inner, stream.as_deref(), max_version.as_deref(), dl_device.as_deref(), copy)
}

fn not_bool(c: &Borrowed<'_, '_, PyAny>) -> PyErr {
    let kind = c.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!("copy must be None or a bool, not {kind}"))
}

/// The keyword values, in the order of [`NAMES`]; an unknown or repeated name is TypeError.
///
/// # Safety
/// `kwnames` is NULL or a live tuple of strings, and `values` holds one live object per name.
unsafe fn keywords<'a, 'py>(
    py: Python<'py>,
    values: *const *mut ffi::PyObject,
    kwnames: *mut ffi::PyObject,
) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; 4]> {
    let mut out = [None; 4];
    if kwnames.is_null() {
        return Ok(out);
    }
    // SAFETY: a live tuple (the caller's contract).
    let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
    let interned = interned(py)?;
    for i in 0..names.len() {
        let name = names.get_borrowed_item(i)?;
        let slot = match interned.iter().position(|n| n.as_ptr() == name.as_ptr()) {
            Some(slot) => slot,
            None => by_text(&name)?,
        };
        if out[slot].is_some() {
            return Err(PyTypeError::new_err(format!(
                "Array.__dlpack__() got multiple values for argument '{}'",
                NAMES[slot]
            )));
        }
        // SAFETY: one live value per name, in order (the caller's contract).
        out[slot] = Some(unsafe { Borrowed::from_ptr(py, *values.add(i)) });
    }
    Ok(out)
}

/// The module's interned keyword names.
fn interned(py: Python<'_>) -> PyResult<&[Py<PyString>; 4]> {
    static INTERNED: PyOnceLock<[Py<PyString>; 4]> = PyOnceLock::new();
    INTERNED.get_or_try_init(py, || Ok(NAMES.map(|n| PyString::intern(py, n).unbind())))
}

/// A keyword matched by its text (a name the caller did not intern).
fn by_text(name: &Borrowed<'_, '_, PyAny>) -> PyResult<usize> {
    let name = name.cast::<PyString>()?;
    let text = name.to_str()?;
    NAMES
        .iter()
        .position(|n| *n == text)
        .ok_or_else(|| PyTypeError::new_err(format!("Array.__dlpack__() got an unexpected keyword argument '{text}'")))
}
