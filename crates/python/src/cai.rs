//! The CUDA Array Interface's `dict` glue: Python values to and from the neutral key/value
//! form of `gpuport-cai` (which holds every rule), `Array.__cuda_array_interface__`,
//! `Array.__array_interface__` (NumPy's host-side sibling), `gpuport.as_array` and
//! `gpuport.from_cuda_array_interface`.

use gpuport::Array;
use gpuport_cai::{Interface, Sync, Value};
use pyo3::exceptions::{PyBufferError, PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::array::PyArray;
use crate::device::parse_device;
use crate::errors::IntoPy;
use crate::py_owner::PyOwner;
use crate::runtime::runtime;

/// A Python value in the neutral form (unknown types by name, refused by the rules).
pub fn to_value(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    Ok(if v.is_none() {
        Value::None
    } else if v.is_instance_of::<PyBool>() {
        Value::Bool(v.extract()?)
    } else if v.is_instance_of::<PyInt>() {
        match v.extract::<i128>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Other("int (out of range)".into()),
        }
    } else if let Ok(s) = v.cast::<PyString>() {
        Value::Str(s.to_str()?.to_owned())
    } else if let Ok(t) = v.cast::<PyTuple>() {
        Value::Tuple(t.iter().map(|i| to_value(&i)).collect::<PyResult<_>>()?)
    } else if let Ok(l) = v.cast::<PyList>() {
        Value::List(l.iter().map(|i| to_value(&i)).collect::<PyResult<_>>()?)
    } else if let Ok(d) = v.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k.extract::<String>().map_err(|_| PyTypeError::new_err("interface keys must be strings"))?;
            entries.push((key, to_value(&v)?));
        }
        Value::Dict(entries)
    } else {
        Value::Other(v.get_type().name()?.to_string())
    })
}

/// The neutral form as Python values.
pub fn from_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::None => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Tuple(items) => {
            PyTuple::new(py, items.iter().map(|i| from_value(py, i)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::List(items) => {
            PyList::new(py, items.iter().map(|i| from_value(py, i)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Dict(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(k, from_value(py, v)?)?;
            }
            d.into_any()
        }
        Value::Other(name) => return Err(PyTypeError::new_err(format!("no Python value for a {name}"))),
    })
}

fn dict_of<'py>(py: Python<'py>, value: &Value, drop_keys: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let Value::Dict(entries) = value else { return Err(PyTypeError::new_err("internal: not a dict")) };
    let d = PyDict::new(py);
    for (k, v) in entries.iter().filter(|(k, _)| !drop_keys.contains(&k.as_str())) {
        d.set_item(k, from_value(py, v)?)?;
    }
    Ok(d)
}

/// `Array.__cuda_array_interface__`: pending work on any number of streams is joined into
/// the legacy default stream, which the dict names.
pub fn export_dict<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyDict>> {
    let export = gpuport_cai::export(array).py_exchange()?;
    let value = export.interface.to_value().py_exchange()?;
    dict_of(py, &value, &[])
}

/// `Array.__array_interface__` (the caller has waited for pending work): version 3, no
/// stream entry.
pub fn array_interface_dict<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyDict>> {
    let export = gpuport_cai::export(array).py_exchange()?;
    let value = export.interface.to_value().map_err(|e| PyBufferError::new_err(e.to_string()))?;
    dict_of(py, &value, &["stream"])
}

/// Validates an interface dict: a masked array is NotImplementedError, anything else
/// wrong ValueError (TypeError when it is not a dict at all).
pub fn parse_interface(desc: &Bound<'_, PyAny>, what: &str) -> PyResult<Interface> {
    let dict = desc.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a dict, not {}",
            desc.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    if let Some(mask) = dict.get_item("mask")? {
        if !mask.is_none() {
            return Err(PyNotImplementedError::new_err(format!(
                "{what}: masked arrays are not supported (mask = {})",
                mask.repr()?
            )));
        }
    }
    Interface::from_value(&to_value(desc)?).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn parse_sync(sync: &str) -> PyResult<Sync> {
    let requested = match sync {
        "enqueue" => Sync::Enqueue,
        "host" => Sync::Host,
        "ignore" => Sync::Ignore,
        other => {
            return Err(PyValueError::new_err(format!(
                "sync must be 'enqueue', 'host' or 'ignore', not {}",
                crate::text::str_repr(other)
            )))
        }
    };
    Ok(Sync::from_env(requested))
}

fn import(
    py: Python<'_>,
    interface: &Interface,
    owner: Option<Py<PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    sync: &str,
) -> PyResult<Py<PyArray>> {
    let sync = parse_sync(sync)?;
    let device = device.filter(|d| !d.is_none()).map(parse_device).transpose()?;
    let keep = owner.map(PyOwner::new);
    // SAFETY: the producer promises (by publishing the interface) live memory and a live
    // stream; `keep` holds the producer object where one is given.
    let array = py.detach(|| unsafe { gpuport_cai::import(runtime(), interface, keep, device.as_ref(), sync) }).py()?;
    PyArray::wrap(py, array)
}

/// `gpuport.as_array(obj, *, sync="enqueue", device=None)`: an array over the memory of
/// any object with `__cuda_array_interface__`, keeping `obj` alive. `sync` says how the
/// interface's stream is honoured: `"enqueue"` (later gpuport work waits on the device, no
/// host block), `"host"` (synchronize now), `"ignore"` (also `GPUPORT_CAI_SYNC=0`).
/// `device` names the device of a zero-size array, whose pointer (0) names none.
#[pyfunction]
#[pyo3(signature = (obj, *, sync = "enqueue", device = None))]
pub fn as_array(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    sync: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    let desc = obj.getattr("__cuda_array_interface__").map_err(|_| {
        PyTypeError::new_err(format!(
            "{} has no __cuda_array_interface__",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    let interface = parse_interface(&desc, "__cuda_array_interface__")?;
    import(py, &interface, Some(obj.clone().unbind()), device, sync)
}

/// `gpuport.from_cuda_array_interface(desc, *, owner=None, sync="enqueue", device=None)`: an array
/// over the memory a CAI dict describes. `owner` (kept alive with the array) is what keeps
/// that memory alive; without one the caller must.
#[pyfunction]
#[pyo3(signature = (desc, *, owner = None, sync = "enqueue", device = None))]
pub fn from_cuda_array_interface(
    py: Python<'_>,
    desc: &Bound<'_, PyAny>,
    owner: Option<Py<PyAny>>,
    sync: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyArray>> {
    let interface = parse_interface(desc, "the interface")?;
    import(py, &interface, owner, device, sync)
}
