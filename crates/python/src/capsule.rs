//! DLPack capsules: `dltensor` / `dltensor_versioned`, renamed `used_…` by the consumer
//! that takes the tensor. The destructor deletes the tensor only while the capsule is
//! unused, never unwinds, and leaves any exception being raised as it was.

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use gpuport_dlpack::{ManagedTensor, RawManaged};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use pyo3::{ffi, PyErr};

use crate::py_owner::keeping_exception;

/// `dltensor`. A static, not a constant: the capsule destructor knows its own capsules'
/// names by address.
pub static LEGACY: &CStr = c"dltensor";
/// `used_dltensor`.
pub const USED_LEGACY: &CStr = c"used_dltensor";
/// `dltensor_versioned` (a static, as [`LEGACY`]).
pub static VERSIONED: &CStr = c"dltensor_versioned";
/// `used_dltensor_versioned`.
pub const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The capsule destructor: deletes the tensor of an unused capsule.
unsafe extern "C" fn destroy(capsule: *mut ffi::PyObject) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CPython calls capsule destructors with the GIL held, with a live capsule.
        let py = unsafe { Python::assume_attached() };
        // Told by the name's address, without comparing text: `wrap` names every capsule
        // with one of two statics, and a consumer that takes the tensor renames the
        // capsule (`used_…`, a string of its own).
        // SAFETY: a live capsule of this module's (`wrap`): GetName returns its name and
        // sets no exception, and GetPointer, asked with that very name, its non-NULL
        // pointer.
        let raw = unsafe {
            let name = ffi::PyCapsule_GetName(capsule);
            if name == VERSIONED.as_ptr() {
                NonNull::new(ffi::PyCapsule_GetPointer(capsule, name)).map(|p| RawManaged::Versioned(p.cast()))
            } else if name == LEGACY.as_ptr() {
                NonNull::new(ffi::PyCapsule_GetPointer(capsule, name)).map(|p| RawManaged::Legacy(p.cast()))
            } else {
                None // consumed (`used_…`): its consumer owns the tensor now
            }
        };
        if let Some(raw) = raw {
            // The deleter may run Python code (a producer's): keep an exception being
            // raised. (Nothing above runs any: a consumed capsule, every exchange's, goes
            // without the look.)
            // SAFETY: an unused capsule owns its tensor; it is deleted once, here.
            keeping_exception(py, || drop(unsafe { ManagedTensor::from_raw(raw) }));
        }
    }));
}

/// A capsule owning `tensor` (named by its kind). If the capsule cannot be made, the
/// tensor is deleted.
pub fn wrap(py: Python<'_>, tensor: ManagedTensor) -> PyResult<Bound<'_, PyAny>> {
    let raw = tensor.into_raw();
    let (ptr, name) = match raw {
        RawManaged::Legacy(p) => (p.cast(), LEGACY),
        RawManaged::Versioned(p) => (p.cast(), VERSIONED),
    };
    // SAFETY: the capsule owns the live tensor; `destroy` deletes it unless consumed.
    match unsafe { PyCapsule::new_with_pointer_and_destructor(py, ptr, name, Some(destroy)) } {
        Ok(c) => Ok(c.into_any()),
        Err(e) => {
            // SAFETY: no capsule took the tensor: it is still ours to delete.
            drop(unsafe { ManagedTensor::from_raw(raw) });
            Err(e)
        }
    }
}

/// True when `obj` is a capsule.
pub fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyCapsule>()
}

/// Takes the tensor out of a DLPack capsule, renaming it `used_…`. A used capsule is
/// ValueError; anything else TypeError.
pub fn consume(obj: &Bound<'_, PyAny>) -> PyResult<ManagedTensor> {
    if !is_capsule(obj) {
        return Err(PyTypeError::new_err(format!("expected a DLPack capsule, not {}", obj.get_type().name()?)));
    }
    let cap = obj.as_ptr();
    for (name, used, versioned) in [(VERSIONED, USED_VERSIONED, true), (LEGACY, USED_LEGACY, false)] {
        // SAFETY: `cap` is a live capsule (checked above); IsValid sets no exception.
        if unsafe { ffi::PyCapsule_IsValid(cap, name.as_ptr()) } != 1 {
            continue;
        }
        // SAFETY: a valid capsule of this name: its pointer is the producer's tensor.
        let ptr = unsafe { ffi::PyCapsule_GetPointer(cap, name.as_ptr()) };
        // SAFETY: renaming a live capsule; the static name outlives it.
        if unsafe { ffi::PyCapsule_SetName(cap, used.as_ptr()) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        // SAFETY: renamed, the capsule no longer deletes the tensor: it is ours.
        return unsafe {
            if versioned {
                ManagedTensor::from_versioned(ptr.cast())
            } else {
                ManagedTensor::from_legacy(ptr.cast())
            }
        }
        .map_err(|e| PyValueError::new_err(e.to_string()));
    }
    for used in [USED_VERSIONED, USED_LEGACY] {
        // SAFETY: as above.
        if unsafe { ffi::PyCapsule_IsValid(cap, used.as_ptr()) } == 1 {
            return Err(PyValueError::new_err("this DLPack capsule was already consumed (a capsule is used once)"));
        }
    }
    Err(PyTypeError::new_err("the capsule is not a DLPack capsule ('dltensor' or 'dltensor_versioned')"))
}
