//! The consumer side: finding the table a producer's type publishes, and importing
//! through it with the stream handshake done here.

use std::ffi::c_void;
use std::ptr;

use gpuport::{Access, AnyDevice, DlDeviceType};
use gpuport_dlpack::abi::{DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader};
use gpuport_dlpack::{ImportRequest, ManagedTensor, DLPACK_VERSION};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyCapsule, PyDict, PyType};

use super::CAPSULE_NAME;
use crate::array::PyArray;
use crate::errors::{Context, IntoPy};
use crate::placement::place;
use crate::py_owner::PyOwner;
use crate::runtime::runtime;

/// What `from_dlpack` knows of each producer type, found once per type: a dict `{type:
/// address, None or True}` guarded by the GIL, so an exchange costs one dict lookup — no
/// attribute lookup that raises (and builds) an AttributeError for the many types without
/// a table. A type that gains a table later keeps the `__dlpack__` path (correct, only
/// slower); tables live for the whole process, so a cached address stays valid.
static TABLES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// How `from_dlpack` takes an object of a given type.
pub enum Producer {
    /// Through the C exchange table the type publishes (major version 1).
    Table(&'static DLPackExchangeAPI),
    /// Through `__dlpack__`. `on_host` when every object of the type is in host memory
    /// by the type's own definition — NumPy's `ndarray`, exactly (a subclass may say
    /// otherwise) — so `__dlpack_device__` need not be asked: its answer is `(kDLCPU, 0)`.
    Dunder {
        /// Known to be on the host.
        on_host: bool,
    },
}

/// How objects of type `ty` are taken: the exchange table it publishes, at a major
/// version this module speaks (walking `prev_api`), else `__dlpack__`.
pub fn producer_of(ty: &Bound<'_, PyType>) -> PyResult<Producer> {
    let py = ty.py();
    let cache = TABLES.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    if let Some(known) = cache.get_item(ty)? {
        // `None` and `True` are checked first: a failed extraction would build (and
        // format) a TypeError on every exchange with a type that has no table.
        if known.is_none() {
            return Ok(Producer::Dunder { on_host: false });
        }
        if known.is(&*PyBool::new(py, true)) {
            return Ok(Producer::Dunder { on_host: true });
        }
        let addr = known.extract::<usize>()?;
        // SAFETY: an address this function found and cached: a process-lifetime table.
        // Exposed provenance: the cache holds the address as a Python integer (caching
        // it exposed it); the table is another library's static data.
        return Ok(Producer::Table(unsafe { &*ptr::with_exposed_provenance::<DLPackExchangeAPI>(addr) }));
    }
    let found = find_table(ty)?;
    let producer = match found {
        Some(table) => Producer::Table(table),
        None => Producer::Dunder { on_host: is_numpy_ndarray(ty) },
    };
    let known = match producer {
        Producer::Table(table) => (ptr::from_ref(table) as usize).into_pyobject(py)?.into_any(),
        Producer::Dunder { on_host: true } => PyBool::new(py, true).to_owned().into_any(),
        Producer::Dunder { on_host: false } => py.None().into_bound(py),
    };
    cache.set_item(ty, known)?;
    Ok(producer)
}

/// True when `ty` is NumPy's `ndarray` itself. Asked once per type, when its first object
/// is exchanged — by then NumPy is imported if `ty` is its type, so this never imports it.
fn is_numpy_ndarray(ty: &Bound<'_, PyType>) -> bool {
    let py = ty.py();
    // SAFETY: a live interned string; the call returns a new reference or NULL (not
    // imported, with no exception set, or an error, which is dropped below).
    let numpy = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyImport_GetModule(intern!(py, "numpy").as_ptr())) };
    let Some(numpy) = numpy else {
        drop(PyErr::take(py));
        return false;
    };
    numpy.getattr(intern!(py, "ndarray")).is_ok_and(|nd| nd.is(ty))
}

fn find_table(ty: &Bound<'_, PyType>) -> PyResult<Option<&'static DLPackExchangeAPI>> {
    let mut header: *const DLPackExchangeAPIHeader = ptr::null();
    if let Ok(cap) = ty.getattr("__dlpack_c_exchange_api__") {
        if let Ok(cap) = cap.cast::<PyCapsule>() {
            // SAFETY: IsValid checks the capsule's name and sets no exception.
            if unsafe { ffi::PyCapsule_IsValid(cap.as_ptr(), CAPSULE_NAME.as_ptr()) } == 1 {
                // SAFETY: a valid capsule of that name holds the table's address.
                header = unsafe { ffi::PyCapsule_GetPointer(cap.as_ptr(), CAPSULE_NAME.as_ptr()) }.cast();
            }
        }
    }
    if header.is_null() {
        if let Ok(addr) = ty.getattr("__c_dlpack_exchange_api__").and_then(|a| a.extract::<usize>()) {
            // Exposed provenance: the producer publishes its table as an integer address.
            header = ptr::with_exposed_provenance(addr);
        }
    }
    while !header.is_null() {
        // SAFETY: the producer's table lives for the whole process (dlpack.h), as do the
        // older tables it links.
        let h = unsafe { &*header };
        if h.version.major == DLPACK_VERSION.major {
            // SAFETY: a header of major version 1 begins a `DLPackExchangeAPI`.
            return Ok(Some(unsafe { &*header.cast::<DLPackExchangeAPI>() }));
        }
        header = h.prev_api;
    }
    Ok(None)
}

/// `from_dlpack` through a producer's table.
pub fn import_through(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    table: &'static DLPackExchangeAPI,
    device: Option<AnyDevice>,
    copy: Option<bool>,
) -> PyResult<Py<PyArray>> {
    let take = table.managed_tensor_from_py_object_no_sync.ok_or_else(|| {
        PyBufferError::new_err("the producer's exchange table has no managed_tensor_from_py_object_no_sync")
    })?;
    let mut out: *mut DLManagedTensorVersioned = ptr::null_mut();
    // SAFETY: the producer's function, with the GIL held and a live object.
    let rc = unsafe { take(x.as_ptr().cast(), &mut out) };
    if rc != 0 {
        return Err(PyErr::take(py).unwrap_or_else(|| {
            PyBufferError::new_err(format!("the producer's managed_tensor_from_py_object_no_sync returned {rc}"))
        }));
    }
    // SAFETY: on success the producer hands over a tensor the consumer owns.
    let tensor = unsafe { ManagedTensor::from_versioned(out) }.py_exchange()?;
    let dl = tensor.dl_tensor().device;
    let array =
        gpuport_dlpack::from_dlpack_with(runtime(), tensor, &ImportRequest::default(), PyOwner::new).py_exchange()?;
    // The handshake: later users of the array wait for the producer's current work.
    if gpuport_dlpack::has_vendor_streams(DlDeviceType(dl.device_type)) {
        if let Some(current) = table.current_work_stream {
            let mut stream: *mut c_void = ptr::null_mut();
            // SAFETY: the producer's function with its own device numbers.
            let rc = unsafe { current(dl.device_type, dl.device_id, &mut stream) };
            if rc != 0 {
                // The producer cannot name its stream: the import cannot be ordered after
                // its work, so it fails (with the producer's exception, where it set one).
                return Err(PyErr::take(py).unwrap_or_else(|| {
                    PyBufferError::new_err(format!("the producer's current_work_stream returned {rc}"))
                }));
            }
            let dev = array.device().clone();
            let s = match stream as usize {
                0 => dev.default_stream(gpuport::DefaultStream::Legacy),
                // SAFETY: the producer's live stream of this device, wrapped borrowed.
                h => unsafe { dev.wrap_stream(h) },
            }
            .py_exchange()?;
            array.record_access(&s, Access::Write).py_exchange()?;
        }
    }
    PyArray::wrap(py, place(py, array, device, copy, Context::Exchange)?)
}
