//! The producer side: the one process-lifetime table gpuport publishes on
//! `gpuport.Array`'s type, and its five functions.

use std::ffi::{c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use gpuport::{Array, DType, DlDeviceType, Layout};
use gpuport_dlpack::abi::{
    DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader, DLPackSetError, DLTensor,
};
use gpuport_dlpack::{DLDataType, DLDevice, ExportRequest, ImportRequest, ManagedTensor, DLPACK_VERSION};
use pyo3::exceptions::{PyBufferError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use super::CAPSULE_NAME;
use crate::array::PyArray;
use crate::counters::{count, count_without_gil, Counter};
use crate::dlpack;
use crate::errors::IntoPy;
use crate::runtime::runtime;

/// The table, immutable for the life of the process.
struct Table(DLPackExchangeAPI);

// SAFETY: the table is never written after its static initialization; its only pointer
// (`prev_api`) is NULL.
unsafe impl Sync for Table {}

static TABLE: Table = Table(DLPackExchangeAPI {
    header: DLPackExchangeAPIHeader { version: DLPACK_VERSION, prev_api: ptr::null_mut() },
    managed_tensor_allocator: Some(allocator),
    managed_tensor_from_py_object_no_sync: Some(from_py_object_no_sync),
    managed_tensor_to_py_object_no_sync: Some(to_py_object_no_sync),
    dltensor_from_py_object_no_sync: Some(dltensor_from_py_object_no_sync),
    current_work_stream: Some(current_work_stream),
});

/// `type(Array).__dlpack_c_exchange_api__`.
pub fn capsule(py: Python<'_>) -> PyResult<Bound<'_, PyCapsule>> {
    let table = ptr::NonNull::from(&TABLE.0).cast::<c_void>();
    // SAFETY: the table is static and never written; the capsule has no destructor.
    unsafe { PyCapsule::new_with_pointer(py, table, CAPSULE_NAME) }
}

/// `type(Array).__c_dlpack_exchange_api__`: the table's address.
pub fn address() -> usize {
    ptr::from_ref(&TABLE.0) as usize
}

/// Runs `f`, turning a panic into `-1` with `on_panic` told.
fn guard(on_panic: impl FnOnce(&str), f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(_) => {
            on_panic("gpuport panicked in the DLPack exchange API (a bug)");
            -1
        }
    }
}

/// Sets a Python exception (the GIL is held in the `*_py_object_*` functions).
fn raise(e: PyErr) -> c_int {
    // SAFETY: these functions are called with the GIL held (dlpack.h's contract for them).
    let py = unsafe { Python::assume_attached() };
    e.restore(py);
    -1
}

fn raise_panic(msg: &str) {
    raise(PyRuntimeError::new_err(msg.to_owned()));
}

/// The `gpuport.Array` behind a borrowed object pointer.
fn array_of<'py>(py: Python<'py>, obj: *mut c_void) -> PyResult<Bound<'py, PyArray>> {
    if obj.is_null() {
        return Err(PyBufferError::new_err("a NULL object"));
    }
    // SAFETY: the caller passes a borrowed, live object pointer.
    let any = unsafe { Bound::from_borrowed_ptr(py, obj.cast()) };
    Ok(any.cast_into::<PyArray>()?)
}

/// Exports without any synchronization (`stream=-1`), as a versioned tensor.
fn export_no_sync(array: &Array) -> gpuport::Result<ManagedTensor> {
    let here = gpuport_dlpack::dl_device_of(array)?;
    let no_stream = gpuport_dlpack::takes_no_stream(DlDeviceType(here.device_type));
    let request = ExportRequest {
        max_version: Some(DLPACK_VERSION),
        dl_device: None,
        copy: None,
        stream: (!no_stream).then_some(-1),
    };
    gpuport_dlpack::to_dlpack(runtime(), array, &request)
}

unsafe extern "C" fn from_py_object_no_sync(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int {
    guard(raise_panic, || {
        // SAFETY: called with the GIL held.
        let py = unsafe { Python::assume_attached() };
        if out.is_null() {
            return raise(PyBufferError::new_err("a NULL out pointer"));
        }
        let result = array_of(py, py_object).and_then(|a| export_no_sync(&a.get().inner).py_exchange());
        match result {
            Ok(tensor) => match tensor.into_raw() {
                gpuport_dlpack::RawManaged::Versioned(p) => {
                    count(py, Counter::ProducerExchangeApi);
                    // SAFETY: `out` is the caller's non-NULL slot.
                    unsafe { *out = p.as_ptr() };
                    0
                }
                raw @ gpuport_dlpack::RawManaged::Legacy(_) => {
                    // SAFETY: ours to delete (never handed out).
                    drop(unsafe { ManagedTensor::from_raw(raw) });
                    raise(PyBufferError::new_err("internal: a legacy tensor for a versioned request"))
                }
            },
            Err(e) => raise(e),
        }
    })
}

unsafe extern "C" fn to_py_object_no_sync(tensor: *mut DLManagedTensorVersioned, out: *mut *mut c_void) -> c_int {
    guard(raise_panic, || {
        // SAFETY: called with the GIL held.
        let py = unsafe { Python::assume_attached() };
        // SAFETY: the caller hands over a live tensor it owns (the function consumes it).
        let tensor = match unsafe { ManagedTensor::from_versioned(tensor) } {
            Ok(t) => t,
            Err(e) => return raise(PyBufferError::new_err(e.to_string())),
        };
        if out.is_null() {
            drop(tensor);
            return raise(PyBufferError::new_err("a NULL out pointer"));
        }
        match dlpack::import(py, tensor, &ImportRequest::default()) {
            Ok(array) => {
                count(py, Counter::ProducerToPyObject);
                // SAFETY: `out` is the caller's slot; it receives a new reference.
                unsafe { *out = array.into_ptr().cast() };
                0
            }
            Err(e) => raise(e),
        }
    })
}

unsafe extern "C" fn dltensor_from_py_object_no_sync(py_object: *mut c_void, out: *mut DLTensor) -> c_int {
    guard(raise_panic, || {
        // SAFETY: called with the GIL held.
        let py = unsafe { Python::assume_attached() };
        if out.is_null() {
            return raise(PyBufferError::new_err("a NULL out pointer"));
        }
        let array = match array_of(py, py_object) {
            Ok(a) => a,
            Err(e) => return raise(e),
        };
        match borrowed_dltensor(&array.get().inner) {
            Ok(t) => {
                count(py, Counter::ProducerDltensor);
                // SAFETY: `out` is the caller's non-NULL DLTensor.
                unsafe { *out = t };
                0
            }
            Err(e) => raise(e),
        }
    })
}

/// A `DLTensor` borrowing the array's own shape and strides (valid while the Python
/// object lives: the array is immutable). On 64-bit targets `usize`/`isize` are `int64_t`.
fn borrowed_dltensor(a: &Array) -> PyResult<DLTensor> {
    const _: () = assert!(size_of::<usize>() == size_of::<i64>(), "the borrowed DLTensor needs 64-bit usize");
    let device = gpuport_dlpack::dl_device_of(a).py_exchange()?;
    let d = a.dtype();
    // Exposed provenance: the address goes to a foreign consumer, which reaches it through
    // its own code (device memory is never dereferenced here; host memory gpuport
    // allocated was exposed when it was allocated).
    Ok(DLTensor {
        data: if a.numel() == 0 { ptr::null_mut() } else { ptr::with_exposed_provenance_mut(a.data_addr() as usize) },
        device,
        ndim: a.shape().len() as i32,
        dtype: DLDataType { code: d.code() as u8, bits: d.bits(), lanes: d.lanes() },
        shape: a.shape().as_ptr().cast::<i64>().cast_mut(),
        strides: a.strides().as_ptr().cast::<i64>().cast_mut(),
        byte_offset: 0,
    })
}

unsafe extern "C" fn current_work_stream(device_type: i32, device_id: i32, out: *mut *mut c_void) -> c_int {
    guard(
        |_| {},
        || {
            if out.is_null() {
                return -1;
            }
            let ty = DlDeviceType(device_type);
            let stream = if gpuport_dlpack::has_vendor_streams(ty) {
                match gpuport_dlpack::resolve(runtime(), DLDevice { device_type, device_id })
                    .and_then(|r| r.device.default_stream(gpuport::DefaultStream::Legacy))
                {
                    Ok(s) => s.raw_handle(),
                    Err(_) => return -1,
                }
            } else {
                0 // stream-less devices: NULL
            };
            // SAFETY: `out` is the caller's non-NULL slot. A stream handle is an opaque
            // vendor value the caller never dereferences as memory of ours.
            unsafe { *out = ptr::with_exposed_provenance_mut(stream) };
            0
        },
    )
}

unsafe extern "C" fn allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: DLPackSetError,
) -> c_int {
    let report = |kind: &CStr, message: &str| {
        if let Some(set_error) = set_error {
            let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
            // SAFETY: the caller's error callback, with its context and two C strings.
            unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
        }
    };
    guard(
        |m| report(c"RuntimeError", m),
        || {
            if prototype.is_null() || out.is_null() {
                report(c"ValueError", "a NULL prototype or out pointer");
                return -1;
            }
            // SAFETY: the caller's prototype is a live DLTensor.
            let proto = unsafe { &*prototype };
            match allocate_like(proto) {
                Ok(gpuport_dlpack::RawManaged::Versioned(p)) => {
                    count_without_gil(Counter::ProducerAllocator);
                    // SAFETY: the caller's non-NULL slot.
                    unsafe { *out = p.as_ptr() };
                    0
                }
                Ok(raw) => {
                    // SAFETY: ours to delete.
                    drop(unsafe { ManagedTensor::from_raw(raw) });
                    report(c"RuntimeError", "internal: a legacy tensor for a versioned request");
                    -1
                }
                Err((kind, message)) => {
                    report(kind, &message);
                    -1
                }
            }
        },
    )
}

/// A new C-contiguous tensor with the prototype's device, dtype and shape.
fn allocate_like(proto: &DLTensor) -> Result<gpuport_dlpack::RawManaged, (&'static CStr, String)> {
    let value = |e: gpuport::Error| (c"ValueError", e.to_string());
    let ndim = usize::try_from(proto.ndim)
        .ok()
        .filter(|&n| n <= gpuport::MAX_NDIM)
        .ok_or_else(|| (c"ValueError", format!("ndim {} is out of range", proto.ndim)))?;
    if ndim > 0 && proto.shape.is_null() {
        return Err((c"ValueError", "a NULL shape".into()));
    }
    let shape: &[i64] = if ndim == 0 {
        &[]
    } else {
        // SAFETY: a non-NULL shape of `ndim` extents (the prototype's contract).
        unsafe { std::slice::from_raw_parts(proto.shape, ndim) }
    };
    let layout = Layout::from_i64(shape, None).map_err(value)?;
    let dtype = DType::from_dlpack(proto.dtype.code, proto.dtype.bits, proto.dtype.lanes).map_err(value)?;
    let dev = gpuport_dlpack::resolve(runtime(), proto.device).map_err(value)?;
    let array = Array::empty(&dev.device, layout.shape(), dtype).map_err(|e| match e {
        gpuport::Error::OutOfMemory { .. } => (c"MemoryError", e.to_string()),
        e => (c"RuntimeError", e.to_string()),
    })?;
    Ok(export_no_sync(&array).map_err(value)?.into_raw())
}
