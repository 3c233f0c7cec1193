//! `Array.__dlpack__` and the `__dlpack__` path of `gpuport.from_dlpack`: argument parsing
//! and the Python side of the protocol; the rules (versions, flags, copies, the stream handshake, validation)
//! are `gpuport-dlpack`'s.

use gpuport::{AnyDevice, Array, DlDeviceType};
use gpuport_dlpack::{
    DLDevice, DLPackVersion, DlpackFlags, ExportRequest, ImportRequest, ManagedTensor, StreamRequest, DLPACK_VERSION,
};
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyString, PyTuple};

use crate::array::PyArray;
use crate::capsule;
use crate::counters::{count, Counter};
use crate::errors::IntoPy;
use crate::py_owner::PyOwner;
use crate::runtime::runtime;

/// A `(major, minor)` or `(device_type, device_id)` pair; anything else is TypeError.
fn pair(arg: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<(i64, i64)>> {
    match arg.filter(|a| !a.is_none()) {
        None => Ok(None),
        Some(a) => match a.cast::<PyTuple>().ok().and_then(|t| t.extract::<(i64, i64)>().ok()) {
            Some(p) => Ok(Some(p)),
            None => Err(PyTypeError::new_err(format!("{what} must be a tuple of two integers, not {}", a.repr()?))),
        },
    }
}

/// The `stream` argument: None or an int (not a bool).
fn stream_arg(arg: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    match arg.filter(|a| !a.is_none()) {
        None => Ok(None),
        Some(a) if a.is_instance_of::<PyInt>() && !a.is_instance_of::<PyBool>() => Ok(Some(a.extract()?)),
        Some(a) => Err(PyTypeError::new_err(format!("stream must be None or an int, not {}", a.get_type().name()?))),
    }
}

/// `Array.__dlpack__`.
pub fn export<'py>(
    py: Python<'py>,
    array: &Array,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<&Bound<'py, PyAny>>,
    dl_device: Option<&Bound<'py, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let max_version = pair(max_version, "max_version")?
        .map(|(major, minor)| -> PyResult<DLPackVersion> {
            let v = |x: i64| u32::try_from(x).map_err(|_| PyValueError::new_err(format!("max_version entry {x}")));
            Ok(DLPackVersion { major: v(major)?, minor: v(minor)? })
        })
        .transpose()?;
    let dl_device = pair(dl_device, "dl_device")?
        .map(|(t, i)| -> PyResult<DLDevice> {
            let v = |x: i64| i32::try_from(x).map_err(|_| PyValueError::new_err(format!("dl_device entry {x}")));
            Ok(DLDevice { device_type: v(t)?, device_id: v(i)? })
        })
        .transpose()?;
    let stream = stream_arg(stream)?;
    // A bad stream value is the caller's ValueError; an impossible export BufferError. No
    // stream (the common call) is valid on every device: nothing to check up front.
    let here = if stream.is_some() || dl_device.is_some() || copy.is_some() {
        Some(gpuport_dlpack::dl_device_of(array).py_exchange()?)
    } else {
        None
    };
    if let Some(here) = here {
        let stream_device = dl_device.unwrap_or(here);
        StreamRequest::parse(DlDeviceType(stream_device.device_type), stream)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    let request = ExportRequest { max_version, dl_device, copy, stream };
    // SAFETY: a stream handle from the consumer is, by the protocol, a live stream of the
    // device the data is handed over on.
    let export = || unsafe { gpuport_dlpack::to_dlpack_on_stream(runtime(), array, &request) };
    // The GIL is let go only for a copy; a zero-copy export is a handshake (no Python code
    // waits on gpuport's queues, so holding it cannot deadlock).
    let copies = here.is_some_and(|here| dl_device.is_some_and(|d| d != here)) || copy == Some(true);
    let tensor = if copies { py.detach(export) } else { export() }.py_exchange()?;
    count(py, Counter::ProducerDunder);
    capsule::wrap(py, tensor)
}

/// The stream a consumer on `dl` passes to `__dlpack__`: the legacy default stream where
/// the vendor has streams (CUDA `1`, ROCm `0`), else None.
fn consumer_stream(dl: (i32, i32)) -> Option<i64> {
    gpuport_dlpack::legacy_stream_arg(DlDeviceType(dl.0))
}

/// The common request — the consumer's stream and `max_version`, no device or copy —
/// made once per stream value and reused, so an exchange allocates no Python objects for
/// its keywords.
struct CommonCall {
    /// The keywords as a dict: the only keyword call the 3.11 stable ABI has (CPython
    /// unpacks the dict into the callee's arguments on every call).
    #[cfg(not(all(feature = "abi3-py312", not(feature = "abi3-py311"))))]
    kwargs: Py<PyDict>,
    /// The keywords' values, in the order of [`KEYWORD_NAMES`], for a vector call.
    #[cfg(all(feature = "abi3-py312", not(feature = "abi3-py311")))]
    values: [Py<PyAny>; 2],
}

/// The keywords of the common request, in the order [`CommonCall`] keeps their values.
/// Passed as interned strings: producers' argument parsers (NumPy's, CPython's own) match
/// a keyword by identity with their interned names first, and compare text only when that
/// fails — a comparison per keyword per call.
const KEYWORD_NAMES: [&str; 2] = ["stream", "max_version"];

fn common_call(py: Python<'_>, stream: Option<i64>) -> PyResult<&'static CommonCall> {
    static NONE: PyOnceLock<CommonCall> = PyOnceLock::new();
    static LEGACY_CUDA: PyOnceLock<CommonCall> = PyOnceLock::new();
    static DEFAULT_ROCM: PyOnceLock<CommonCall> = PyOnceLock::new();
    let cell = match stream {
        None => &NONE,
        Some(1) => &LEGACY_CUDA,
        Some(0) => &DEFAULT_ROCM,
        Some(other) => return Err(PyValueError::new_err(format!("internal: no cached keywords for stream {other}"))),
    };
    cell.get_or_try_init(py, || -> PyResult<CommonCall> {
        let values = [
            stream.into_pyobject(py)?.into_any().unbind(),
            (DLPACK_VERSION.major, DLPACK_VERSION.minor).into_pyobject(py)?.into_any().unbind(),
        ];
        #[cfg(not(all(feature = "abi3-py312", not(feature = "abi3-py311"))))]
        {
            let kwargs = PyDict::new(py);
            for (name, value) in KEYWORD_NAMES.iter().zip(values) {
                kwargs.set_item(PyString::intern(py, name), value)?;
            }
            Ok(CommonCall { kwargs: kwargs.unbind() })
        }
        #[cfg(all(feature = "abi3-py312", not(feature = "abi3-py311")))]
        Ok(CommonCall { values })
    })
}

/// `x.__dlpack__(stream=…, max_version=…)`, the common request, with a dict of keywords.
#[cfg(not(all(feature = "abi3-py312", not(feature = "abi3-py311"))))]
fn call_common<'py>(py: Python<'py>, x: &Bound<'py, PyAny>, stream: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
    dunder_of(x)?.call((), Some(common_call(py, stream)?.kwargs.bind(py)))
}

/// `x.__dlpack__(stream=…, max_version=…)`, the common request, as a vector call of the
/// method: no bound-method object, the values in a vector and their names in a tuple made
/// once (the stable ABI has vectorcall from 3.12), where a keyword dict is unpacked by
/// CPython on every call.
#[cfg(all(feature = "abi3-py312", not(feature = "abi3-py311")))]
fn call_common<'py>(py: Python<'py>, x: &Bound<'py, PyAny>, stream: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
    static NAMES: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
    let names = NAMES
        .get_or_try_init(py, || PyTuple::new(py, KEYWORD_NAMES.map(|n| PyString::intern(py, n))).map(Bound::unbind))?;
    let call = common_call(py, stream)?;
    let mut args = [x.as_ptr(), call.values[0].as_ptr(), call.values[1].as_ptr()];
    // SAFETY: the name is a live string; `args` holds the live receiver and two live
    // objects (held by the cached call) named by `names`, a tuple of two strings, also
    // held: one positional argument (the receiver) and two keywords.
    let result = unsafe {
        let result = pyo3::ffi::PyObject_VectorcallMethod(
            intern!(py, "__dlpack__").as_ptr(),
            args.as_mut_ptr(),
            1,
            names.as_ptr(),
        );
        Bound::from_owned_ptr_or_err(py, result)
    };
    // A type without the method is told as `from_dlpack` tells it.
    match result {
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => Err(dunder_of(x).err().unwrap_or(e)),
        other => other,
    }
}

/// `x.__dlpack__`, looked up once for the calls that use it; a TypeError saying what
/// `from_dlpack` takes when `x` has none.
fn dunder_of<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    match x.getattr(intern!(py, "__dlpack__")) {
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => Err(PyTypeError::new_err(format!(
            "from_dlpack takes an object with __dlpack__ and __dlpack_device__, or a DLPack capsule; not {}",
            x.get_type().name()?
        ))),
        found => found,
    }
}

/// `x.name()`, through `PyObject_CallMethodObjArgs` (the 3.11 stable ABI's).
#[cfg(not(all(feature = "abi3-py312", not(feature = "abi3-py311"))))]
fn call_method0<'py>(x: &Bound<'py, PyAny>, name: &Bound<'py, pyo3::types::PyString>) -> PyResult<Bound<'py, PyAny>> {
    x.call_method0(name)
}

/// `x.name()` as a vector call of the method (the stable ABI has it from 3.12): no
/// bound-method object and no argument tuple per call.
#[cfg(all(feature = "abi3-py312", not(feature = "abi3-py311")))]
fn call_method0<'py>(x: &Bound<'py, PyAny>, name: &Bound<'py, pyo3::types::PyString>) -> PyResult<Bound<'py, PyAny>> {
    let mut args = [x.as_ptr()];
    // SAFETY: `name` is a live string and `args` holds the live receiver alone (one
    // argument, the receiver, and no keywords).
    unsafe {
        let result = pyo3::ffi::PyObject_VectorcallMethod(name.as_ptr(), args.as_mut_ptr(), 1, std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(x.py(), result)
    }
}

/// True when a versioned tensor says the producer copied it.
fn producer_copied(tensor: &ManagedTensor) -> bool {
    tensor.version().is_some_and(|v| v.major == 1) && tensor.flags().contains(DlpackFlags::IS_COPIED)
}

/// Imports a tensor taken from a Python producer: its deleter runs with the GIL, never
/// after interpreter shutdown.
pub fn import(py: Python<'_>, tensor: ManagedTensor, request: &ImportRequest) -> PyResult<Py<PyArray>> {
    let import = || gpuport_dlpack::from_dlpack_with(runtime(), tensor, request, PyOwner::new);
    // The GIL is let go only when the import copies.
    let copies = request.device.is_some() || request.copy == Some(true);
    let array = if copies { py.detach(import) } else { import() }.py_exchange()?;
    PyArray::wrap(py, array)
}

/// `from_dlpack` through `__dlpack__` (a TypeError when `x` has none): the keywords, the
/// retries older producers need, and the import. `on_host`: `x`'s type says it is in host
/// memory, so `__dlpack_device__` is not asked.
pub fn from_dunder(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    device: Option<AnyDevice>,
    copy: Option<bool>,
    on_host: bool,
) -> PyResult<Py<PyArray>> {
    let here: (i32, i32) = if on_host {
        (DlDeviceType::CPU.0, 0)
    } else {
        match call_method0(x, intern!(py, "__dlpack_device__")) {
            Ok(here) => here.extract()?,
            // Without `__dlpack__` either, what `from_dlpack` takes is the better answer.
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Err(dunder_of(x).err().unwrap_or(e)),
            Err(e) => return Err(e),
        }
    };
    count(py, Counter::ConsumerDunder);
    let target = device.as_ref().map(|d| (d.dlpack_devices().device.0, d.id().ordinal as i32));
    let wanted_device = target.filter(|&t| t != here);
    let stream = consumer_stream(wanted_device.unwrap_or(here));
    let first = if wanted_device.is_none() && copy.is_none() {
        call_common(py, x, stream)
    } else {
        let dunder = dunder_of(x)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("stream", stream)?;
        kwargs.set_item("max_version", (DLPACK_VERSION.major, DLPACK_VERSION.minor))?;
        if let Some(t) = wanted_device {
            kwargs.set_item("dl_device", t)?;
        }
        if let Some(c) = copy {
            kwargs.set_item("copy", c)?;
        }
        dunder.call((), Some(&kwargs))
    };
    let capsule = match first {
        Ok(c) => c,
        // Older producers know neither max_version nor dl_device/copy: retry without them,
        // but never silently drop a copy or device request.
        Err(e) if e.is_instance_of::<PyTypeError>(py) && wanted_device.is_none() && copy.is_none() => {
            let dunder = dunder_of(x)?;
            let stream = PyDict::new(py);
            stream.set_item("stream", consumer_stream(here))?;
            match dunder.call((), Some(&stream)) {
                Ok(c) => c,
                Err(e) if e.is_instance_of::<PyTypeError>(py) => dunder.call0()?,
                Err(e) => return Err(e),
            }
        }
        // A producer that cannot put the data on the device asked for: take it where it
        // is and copy it here (unless copies are forbidden).
        Err(e) if e.is_instance_of::<PyBufferError>(py) && wanted_device.is_some() && copy != Some(false) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item("stream", consumer_stream(here))?;
            kwargs.set_item("max_version", (DLPACK_VERSION.major, DLPACK_VERSION.minor))?;
            let capsule = dunder_of(x)?.call((), Some(&kwargs)).map_err(|_| e)?;
            let tensor = capsule::consume(&capsule)?;
            return import(py, tensor, &ImportRequest { device, copy });
        }
        Err(e) => return Err(e),
    };
    let tensor = capsule::consume(&capsule)?;
    // The producer made the copy asked for: no second one here.
    let copy = if producer_copied(&tensor) { None } else { copy };
    import(py, tensor, &ImportRequest { device, copy })
}
