//! The CUDA Array Interface's `dict` glue: a Python dict read into the neutral key/value
//! form of `gpuport-cai` (which holds every rule), a dict built from its typed entries,
//! `Array.__cuda_array_interface__`, `Array.__array_interface__` (NumPy's host-side
//! sibling), `gpuport.as_array` and `gpuport.from_cuda_array_interface`.

use gpuport::{Array, DType};
use gpuport_cai::{Entry, Interface, Key, Node, Source, Sync, Value, MAX_TEXT, READ_KEYS};
use pyo3::exceptions::{PyBufferError, PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::array::PyArray;
use crate::device::parse_device;
use crate::errors::IntoPy;
use crate::py_owner::PyOwner;
use crate::runtime::runtime;

/// A Python object read as an interface dict (see `gpuport_cai::Source`): only the
/// protocol's keys are looked up, and values are followed a bounded depth down.
struct PySource<'py>(Bound<'py, PyAny>);

impl<'py> Source for PySource<'py> {
    type Error = PyErr;

    fn node(&self, max_items: usize) -> PyResult<Node<Self>> {
        let v = &self.0;
        let first = |iter: &mut dyn Iterator<Item = Bound<'py, PyAny>>| iter.take(max_items).map(PySource).collect();
        Ok(if v.is_none() {
            Node::None
        } else if v.is_instance_of::<PyBool>() {
            Node::Bool(v.extract()?)
        } else if v.is_instance_of::<PyInt>() {
            Node::Int(v.extract::<i128>().ok())
        } else if let Ok(s) = v.cast::<PyString>() {
            let text = s.to_str()?;
            match text.len() <= MAX_TEXT {
                true => Node::Str(text.to_owned()),
                false => Node::Other(format!("str of {} bytes", text.len())),
            }
        } else if let Ok(t) = v.cast::<PyTuple>() {
            Node::Tuple(first(&mut t.iter()), t.len())
        } else if let Ok(l) = v.cast::<PyList>() {
            Node::List(first(&mut l.iter()), l.len())
        } else {
            Node::Other(v.get_type().name()?.to_string())
        })
    }

    fn entry(&self, key: &str) -> PyResult<Option<Self>> {
        let Ok(d) = self.0.cast::<PyDict>() else { return Ok(None) };
        let found = match read_keys(d.py()).iter().zip(READ_KEYS).find(|&(_, name)| name == key) {
            Some((interned, _)) => d.get_item(interned.bind(d.py()))?,
            None => d.get_item(key)?,
        };
        Ok(found.map(PySource))
    }
}

/// `gpuport_cai::READ_KEYS` as Python strings, interned once: a read builds no key string.
fn read_keys(py: Python<'_>) -> &[Py<PyString>; READ_KEYS.len()] {
    static KEYS: PyOnceLock<[Py<PyString>; READ_KEYS.len()]> = PyOnceLock::new();
    KEYS.get_or_init(py, || READ_KEYS.map(|k| PyString::intern(py, k).unbind()))
}

/// The dict keys, interned once: a read builds no key string.
fn key_names(py: Python<'_>) -> &[Py<PyString>; Key::ALL.len()] {
    static KEYS: PyOnceLock<[Py<PyString>; Key::ALL.len()]> = PyOnceLock::new();
    KEYS.get_or_init(py, || Key::ALL.map(|k| PyString::intern(py, k.name()).unbind()))
}

/// A dict with every key version 3 writes (less `skip`) mapped to `None`, made once: a
/// read copies it (CPython clones the key table, no insertion or resize) and replaces the
/// values.
fn template(py: Python<'_>, skip: Option<Key>) -> PyResult<&Py<PyDict>> {
    static FULL: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    static NO_STREAM: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let cell = match skip {
        None => &FULL,
        Some(Key::Stream) => &NO_STREAM,
        Some(other) => return Err(PyTypeError::new_err(format!("internal: no template without {}", other.name()))),
    };
    cell.get_or_try_init(py, || {
        let d = PyDict::new(py);
        for key in Key::ALL.into_iter().filter(|&k| Some(k) != skip) {
            d.set_item(key_names(py)[key as usize].bind(py), py.None())?;
        }
        Ok(d.unbind())
    })
}

/// The types whose `typestr` string and `descr` field (`("", typestr)`) are made once.
const CACHED_TYPES: [DType; 14] = [
    DType::BOOL,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::C64,
    DType::C128,
];

/// An interface's typestr as a Python string and its `descr` field, cached for NumPy's
/// scalar types; an error for a type with no typestr.
fn typestr_objects<'py>(
    py: Python<'py>,
    interface: &Interface,
) -> PyResult<(Bound<'py, PyString>, Bound<'py, PyTuple>)> {
    static MADE: [PyOnceLock<(Py<PyString>, Py<PyTuple>)>; CACHED_TYPES.len()] =
        [const { PyOnceLock::new() }; CACHED_TYPES.len()];
    let make = || -> PyResult<(Py<PyString>, Py<PyTuple>)> {
        let typestr = PyString::new(py, &interface.typestr().py_exchange()?);
        let field = PyTuple::new(py, [intern!(py, ""), &typestr])?;
        Ok((typestr.unbind(), field.unbind()))
    };
    let (typestr, field) = match CACHED_TYPES.iter().position(|&d| d == interface.dtype) {
        Some(at) => {
            let (typestr, field) = MADE[at].get_or_try_init(py, make)?;
            (typestr.clone_ref(py), field.clone_ref(py))
        }
        None => make()?,
    };
    Ok((typestr.into_bound(py), field.into_bound(py)))
}

/// One entry as a Python value (the typestr's entries are the cached objects).
fn entry_object<'py>(
    py: Python<'py>,
    entry: Entry<'_>,
    typestr: &Bound<'py, PyString>,
    field: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match entry {
        Entry::None => py.None().into_bound(py),
        Entry::Int(i) => i.into_pyobject(py)?.into_any(),
        Entry::Str(_) => typestr.clone().into_any(),
        Entry::Extents(e) => PyTuple::new(py, e)?.into_any(),
        Entry::ByteStrides(s) => PyTuple::new(py, s)?.into_any(),
        Entry::Data { pointer, read_only } => (pointer, read_only).into_pyobject(py)?.into_any(),
        Entry::Descr(_) => PyList::new(py, [field])?.into_any(),
    })
}

/// The interface's dict, built entry by entry from a template (no intermediate form),
/// less `skip`.
fn dict_of<'py>(py: Python<'py>, interface: &Interface, skip: Option<Key>) -> PyResult<Bound<'py, PyDict>> {
    let (typestr, field) = typestr_objects(py, interface)?;
    let d = template(py, skip)?.bind(py).copy()?;
    let keys = key_names(py);
    for (key, entry) in interface.entries(typestr.to_str()?).into_iter().filter(|&(key, _)| Some(key) != skip) {
        d.set_item(keys[key as usize].bind(py), entry_object(py, entry, &typestr, &field)?)?;
    }
    Ok(d)
}

/// `Array.__cuda_array_interface__`: pending work on any number of streams is joined into
/// the legacy default stream, which the dict names.
pub fn export_dict<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyDict>> {
    let export = gpuport_cai::export(array).py_exchange()?;
    dict_of(py, &export.interface, None)
}

/// `Array.__array_interface__` (the caller has waited for pending work): version 3, no
/// stream entry.
pub fn array_interface_dict<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyDict>> {
    let export = gpuport_cai::export(array).map_err(|e| PyBufferError::new_err(e.to_string()))?;
    dict_of(py, &export.interface, Some(Key::Stream))
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
    let value = Value::read(&PySource(desc.clone()))?;
    Interface::from_value(&value).map_err(|e| PyValueError::new_err(e.to_string()))
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
