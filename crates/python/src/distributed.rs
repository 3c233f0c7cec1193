//! `gpuport.distributed`: the collectives of `gpuport::collective` from Python —
//! `init()`, `engines()`, `Communicator` and `Work` (the Python package's `distributed`
//! module re-exports this native one).
//!
//! Operands are gpuport arrays or any array imported without a copy (DLPack, the CUDA Array
//! Interface: a NumPy array is reduced in place when it is writable). A collective returns
//! once it is done, with the engine's error raised — as mpi4py's calls do, since the library
//! that owns a foreign array cannot see gpuport's queue; `async_op=True` returns a `Work` at
//! once instead, as `torch.distributed` does.

use gpuport::collective::{self, Communicator, Group, ReduceOp, UniqueId, Work};
use gpuport::{AnyStream, Array};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::array::PyArray;
use crate::device::{PyEvent, PyStream};
use crate::errors::IntoPy;

/// One collectives engine as this process finds it.
#[pyclass(module = "gpuport.distributed", name = "Engine", frozen)]
pub struct PyEngine {
    /// `"MPI"`, `"NCCL"` or `"RCCL"`.
    #[pyo3(get)]
    name: String,
    /// Whether it can be used here.
    #[pyo3(get)]
    available: bool,
    /// Its library's version line; `None` when unavailable.
    #[pyo3(get)]
    version: Option<String>,
    /// Why it is unavailable; `None` when available.
    #[pyo3(get)]
    reason: Option<String>,
    /// What the library found lacks, each feature with the version that has it.
    #[pyo3(get)]
    lacks: Vec<String>,
}

#[pymethods]
impl PyEngine {
    fn __repr__(&self) -> String {
        match (&self.version, &self.reason) {
            (Some(v), _) => format!("<gpuport.distributed.Engine {} available: {v}>", self.name),
            (None, r) => {
                format!("<gpuport.distributed.Engine {} unavailable: {}>", self.name, r.as_deref().unwrap_or(""))
            }
        }
    }
}

/// Every collectives engine gpuport knows, available or not (with the reason). Lists them
/// without starting one.
#[pyfunction]
pub fn engines(py: Python<'_>) -> Vec<PyEngine> {
    py.detach(collective::engines)
        .into_iter()
        .map(|e| PyEngine {
            name: e.name.to_owned(),
            available: e.status.is_ok(),
            version: e.status.as_ref().ok().cloned(),
            reason: e.status.err(),
            lacks: e.lacks,
        })
        .collect()
}

/// `init(engine=None)`: the world communicator — every rank of the job — with its engine
/// started (MPI initialised, or joined when the process initialised it already).
#[pyfunction]
#[pyo3(signature = (engine = None))]
pub fn init(py: Python<'_>, engine: Option<&str>) -> PyResult<PyCommunicator> {
    match engine.map(str::to_ascii_lowercase).as_deref() {
        None | Some("mpi") => Ok(PyCommunicator { inner: py.detach(Communicator::world).py()? }),
        Some(other) => Err(PyValueError::new_err(format!(
            "engine {other:?} is not one init() starts: init() gives MPI's world ('mpi'); NCCL and RCCL communicators \
             come from init_all(devices), init_rank(device, unique_id, size, rank) or \
             init().for_device(device) (see gpuport.distributed.engines())"
        ))),
    }
}

/// `init_all(devices)`: one communicator over devices this process drives, one rank per
/// device in their order — NCCL for CUDA devices, RCCL for ROCm devices. One thread
/// issuing the ranks' collectives issues them inside `with group():`.
#[pyfunction]
pub fn init_all(py: Python<'_>, devices: &Bound<'_, PyAny>) -> PyResult<Vec<PyCommunicator>> {
    let devices =
        devices.try_iter()?.map(|d| crate::device::parse_device(&d?)).collect::<PyResult<Vec<gpuport::AnyDevice>>>()?;
    let comms = py.detach(|| Communicator::init_all(&devices)).py()?;
    Ok(comms.into_iter().map(|inner| PyCommunicator { inner }).collect())
}

/// `unique_id(device)`: a new NCCL (CUDA) or RCCL (ROCm) unique id, as the 128 `bytes`
/// every rank of a new communicator is given (send them over mpi4py, a file, a store).
#[pyfunction]
pub fn unique_id(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
    let device = crate::device::parse_device(device)?;
    let id = py.detach(|| UniqueId::new(&device)).py()?;
    Ok(PyBytes::new(py, id.as_bytes()).unbind())
}

/// `init_rank(device, unique_id, size, rank)`: rank `rank` of `size` on `device`, returned
/// once every rank — a thread or a process each — has joined with the same id; ranks that
/// have not all joined within `GPUPORT_COLLECTIVE_TIMEOUT` raise instead of hanging.
#[pyfunction]
pub fn init_rank(
    py: Python<'_>,
    device: &Bound<'_, PyAny>,
    unique_id: &[u8],
    size: i64,
    rank: i64,
) -> PyResult<PyCommunicator> {
    let device = crate::device::parse_device(device)?;
    let id = UniqueId::from_bytes(unique_id).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let (size, rank) = (index(size, "size")?, index(rank, "rank")?);
    let inner = py.detach(|| Communicator::init_rank(&device, &id, size, rank)).py()?;
    Ok(PyCommunicator { inner })
}

/// `split_all(comms, colors, keys=None)`: several NCCL or RCCL ranks this thread drives
/// (as `init_all` makes them) split together; each rank's new communicator, or `None` for
/// a rank whose color is `None`. `keys` (default: each rank's own) order the new ranks.
#[pyfunction]
#[pyo3(signature = (comms, colors, keys = None))]
pub fn split_all(
    py: Python<'_>,
    comms: Vec<PyRef<'_, PyCommunicator>>,
    colors: Vec<Option<i64>>,
    keys: Option<Vec<i32>>,
) -> PyResult<Vec<Option<PyCommunicator>>> {
    let keys =
        keys.unwrap_or_else(|| comms.iter().map(|c| i32::try_from(c.inner.rank()).unwrap_or(i32::MAX)).collect());
    if keys.len() != colors.len() {
        return Err(PyValueError::new_err(format!("{} colors but {} keys", colors.len(), keys.len())));
    }
    let how =
        colors.into_iter().map(color_of).zip(keys).map(|(c, k)| c.map(|c| (c, k))).collect::<PyResult<Vec<_>>>()?;
    let inner: Vec<Communicator> = comms.iter().map(|c| c.inner.clone()).collect();
    let made = py.detach(|| Communicator::split_all(&inner, &how)).py()?;
    Ok(made.into_iter().map(|m| m.map(|inner| PyCommunicator { inner })).collect())
}

/// A split's color: `None` (no communicator) or an int from 0 to `i32::MAX`.
fn color_of(color: Option<i64>) -> PyResult<Option<u32>> {
    color
        .map(|c| {
            u32::try_from(c).ok().filter(|&c| c <= i32::MAX as u32).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "color must be an int from 0 to {} (None joins no communicator), not {c}",
                    i32::MAX
                ))
            })
        })
        .transpose()
}

/// `with group():` — the collectives issued in the block start together when it ends
/// (NCCL's `ncclGroupStart`/`ncclGroupEnd`): required when one thread drives several ranks.
/// Each is issued with `async_op=True`, its `Work` waited for after the block.
#[pyclass(module = "gpuport.distributed", name = "Group", unsendable)]
pub struct PyGroup {
    open: Option<Group>,
}

/// A group of collectives, as a context manager.
#[pyfunction]
pub fn group() -> PyGroup {
    PyGroup { open: None }
}

#[pymethods]
impl PyGroup {
    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        if slf.open.is_some() {
            return Err(PyValueError::new_err("this group is open already: use a new group() for a nested one"));
        }
        slf.open = Some(Group::start());
        Ok(slf)
    }

    /// Ends the group, launching its collectives; the engine's error is raised unless the
    /// block raised one already.
    fn __exit__(
        &mut self,
        exc_type: &Bound<'_, PyAny>,
        exc: &Bound<'_, PyAny>,
        tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let _ = (exc, tb); // the block's exception propagates as it is
        if let Some(open) = self.open.take() {
            let ended = open.end();
            if exc_type.is_none() {
                ended.py()?;
            }
        }
        Ok(false)
    }
}

/// A group of ranks and the collectives over them.
#[pyclass(module = "gpuport.distributed", name = "Communicator", frozen)]
pub struct PyCommunicator {
    inner: Communicator,
}

/// A collective queued with `async_op=True`.
#[pyclass(module = "gpuport.distributed", name = "Work", frozen)]
pub struct PyWork {
    work: Work,
    /// What `wait()` returns: the collective's result (`None` where this rank has none).
    result: Py<PyAny>,
}

#[pymethods]
impl PyWork {
    /// Waits (without holding the GIL) until the collective is done; returns its result, or
    /// raises the engine's error.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        py.detach(|| self.work.wait()).py()?;
        Ok(self.result.clone_ref(py))
    }

    /// Whether the collective is done (without waiting).
    fn is_done(&self) -> PyResult<bool> {
        self.work.is_done().py()
    }

    /// An event recorded on the collective's stream right after it, for another stream to
    /// wait on (`stream.wait_event(work.event)`).
    #[getter]
    fn event(&self) -> PyEvent {
        PyEvent { inner: self.work.event().clone() }
    }

    fn __repr__(&self) -> String {
        format!("<gpuport.distributed.Work {}>", self.work.what())
    }
}

/// An operand: a gpuport array or one imported without a copy.
fn operand(py: Python<'_>, obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Array> {
    crate::creation::array_operand(py, obj)?.ok_or_else(|| {
        let kind = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        PyTypeError::new_err(format!(
            "{name} must be a gpuport array or an array with __dlpack__ (NumPy, PyTorch, CuPy, JAX, …), not {kind}"
        ))
    })
}

/// An optional operand (`out=None` is none).
fn optional(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<Array>> {
    obj.filter(|o| !o.is_none()).map(|o| operand(py, o, name)).transpose()
}

/// A reduction by name.
fn reduce_op(name: &str) -> PyResult<ReduceOp> {
    match name.to_ascii_lowercase().as_str() {
        "sum" => Ok(ReduceOp::Sum),
        "prod" | "product" => Ok(ReduceOp::Prod),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        "avg" | "mean" => Ok(ReduceOp::Avg),
        _ => Err(PyValueError::new_err(format!(
            "op {name:?} is not a reduction: use 'sum', 'prod', 'min', 'max' or 'avg'"
        ))),
    }
}

/// A rank or tag argument: a non-negative int.
fn index(value: i64, what: &str) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| PyValueError::new_err(format!("{what} must be ≥ 0, not {value}")))
}

/// The result array: `out` when given, else a new array of `shape()` on `like`'s device
/// and of its dtype — as gpuport's array and as the Python object to return.
fn out_or_new(
    py: Python<'_>,
    out: Option<&Bound<'_, PyAny>>,
    like: &Array,
    shape: impl FnOnce() -> PyResult<Vec<usize>>,
) -> PyResult<(Array, Py<PyAny>)> {
    if let Some(out) = out.filter(|o| !o.is_none()) {
        return Ok((operand(py, out, "out")?, out.clone().unbind()));
    }
    let shape = shape()?;
    let made = py.detach(|| Array::empty(like.device(), &shape, like.dtype())).py()?;
    Ok((made.clone(), PyArray::wrap(py, made)?.into_any()))
}

/// What an in-place-or-`out` collective returns: `out` when given, else `x`.
fn out_or_x(x: &Bound<'_, PyAny>, out: Option<&Bound<'_, PyAny>>) -> Py<PyAny> {
    out.filter(|o| !o.is_none()).unwrap_or(x).clone().unbind()
}

/// The stream argument.
fn stream_of<'a>(stream: Option<&'a PyRef<'_, PyStream>>) -> Option<&'a AnyStream> {
    stream.map(|s| &s.inner)
}

impl PyCommunicator {
    /// Queues `call` without the GIL, then waits for it (or hands back a `Work`) and gives
    /// `result`.
    fn run(
        &self,
        py: Python<'_>,
        async_op: bool,
        result: Py<PyAny>,
        call: impl FnOnce(&Communicator) -> gpuport::Result<Work> + Send,
    ) -> PyResult<Py<PyAny>> {
        if !async_op && Group::is_open() {
            return Err(PyValueError::new_err(
                "inside `with group():` a collective starts when the block ends: pass async_op=True and wait for \
                 its Work after the block",
            ));
        }
        let work = py.detach(|| call(&self.inner)).py()?;
        if async_op {
            return Ok(Py::new(py, PyWork { work, result })?.into_any());
        }
        py.detach(|| work.wait()).py()?;
        Ok(result)
    }
}

#[pymethods]
impl PyCommunicator {
    /// This process's rank, from 0.
    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The number of ranks.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The engine's name (`"MPI"`, `"NCCL"`, `"RCCL"`).
    #[getter]
    fn engine(&self) -> &'static str {
        self.inner.engine()
    }

    /// The engine library's version line.
    #[getter]
    fn engine_version(&self) -> String {
        self.inner.engine_version().to_owned()
    }

    /// A communicator of the same ranks whose traffic never mixes with this one's. Every
    /// rank calls it.
    fn dup(&self, py: Python<'_>) -> PyResult<PyCommunicator> {
        Ok(PyCommunicator { inner: py.detach(|| self.inner.dup()).py()? })
    }

    /// The ranks passing the same `color` form a new communicator, ordered by `key`; a
    /// rank passing `None` joins none and gets `None`. Every rank calls it.
    #[pyo3(signature = (color, key = 0))]
    fn split(&self, py: Python<'_>, color: Option<i64>, key: i32) -> PyResult<Option<PyCommunicator>> {
        let color = color_of(color)?;
        let made = py.detach(|| self.inner.split(color, key)).py()?;
        Ok(made.map(|inner| PyCommunicator { inner }))
    }

    /// This MPI communicator's ranks on NCCL (CUDA) or RCCL (ROCm), each rank on the
    /// `device` it passes: rank 0 makes the unique id and broadcasts it over MPI. Every
    /// rank calls it.
    fn for_device(&self, py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<PyCommunicator> {
        let device = crate::device::parse_device(device)?;
        Ok(PyCommunicator { inner: py.detach(|| self.inner.for_device(&device)).py()? })
    }

    /// Returns once every rank has called it.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.barrier()).py()
    }

    /// `x` reduced over every rank, into `out` — or into `x` itself. Returns the result.
    #[pyo3(signature = (x, op = "sum", out = None, stream = None, *, async_op = false))]
    fn all_reduce(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        op: &str,
        out: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (op, a, o) = (reduce_op(op)?, operand(py, x, "x")?, optional(py, out, "out")?);
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, out_or_x(x, out), |c| c.all_reduce(&a, op, o.as_ref(), stream))
    }

    /// `x` of rank `root` into `x` on every rank. Returns `x`.
    #[pyo3(signature = (x, root = 0, stream = None, *, async_op = false))]
    fn broadcast(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        root: i64,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (a, root) = (operand(py, x, "x")?, index(root, "root")?);
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, x.clone().unbind(), |c| c.broadcast(&a, root, stream))
    }

    /// `x` reduced over every rank into rank `root`'s `out` (or its `x`). Returns the
    /// result on the root and `None` on the other ranks (where `out` is not used).
    #[pyo3(signature = (x, root = 0, op = "sum", out = None, stream = None, *, async_op = false))]
    #[allow(clippy::too_many_arguments)] // Python's signature, keyword by keyword.
    fn reduce(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        root: i64,
        op: &str,
        out: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (op, a, o, root) = (reduce_op(op)?, operand(py, x, "x")?, optional(py, out, "out")?, index(root, "root")?);
        let result = match root == self.inner.rank() {
            true => out_or_x(x, out),
            false => py.None(),
        };
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, result, |c| c.reduce(&a, op, root, o.as_ref(), stream))
    }

    /// Every rank's `x`, in rank order, into `out` — a new array of shape `(size, *x.shape)`
    /// on `x`'s device when `out` is `None`. Returns it.
    #[pyo3(signature = (x, out = None, stream = None, *, async_op = false))]
    fn all_gather(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let a = operand(py, x, "x")?;
        let (o, result) = out_or_new(py, out, &a, || {
            Ok(std::iter::once(self.inner.size()).chain(a.shape().iter().copied()).collect())
        })?;
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, result, |c| c.all_gather(&a, &o, stream))
    }

    /// `x` reduced over every rank and split in `size` blocks along its first axis; block
    /// `r` into rank `r`'s `out` — a new array of shape `(x.shape[0] // size, *x.shape[1:])`
    /// when `out` is `None`. Returns it.
    #[pyo3(signature = (x, op = "sum", out = None, stream = None, *, async_op = false))]
    fn reduce_scatter(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        op: &str,
        out: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (op, a) = (reduce_op(op)?, operand(py, x, "x")?);
        let size = self.inner.size();
        let (o, result) = out_or_new(py, out, &a, || match a.shape().split_first() {
            Some((&first, rest)) if first % size == 0 => {
                Ok(std::iter::once(first / size).chain(rest.iter().copied()).collect())
            }
            _ => Err(PyValueError::new_err(format!(
                "reduce_scatter: x has shape {:?}, whose first axis does not split into {size} equal blocks; pass out=",
                a.shape()
            ))),
        })?;
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, result, |c| c.reduce_scatter(&a, op, &o, stream))
    }

    /// Block `r` of `x` (`size` equal blocks) to rank `r`, which puts it at block `rank` of
    /// its `out` — a new array shaped as `x` when `out` is `None`. Returns it.
    #[pyo3(signature = (x, out = None, stream = None, *, async_op = false))]
    fn all_to_all(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        out: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let a = operand(py, x, "x")?;
        let (o, result) = out_or_new(py, out, &a, || Ok(a.shape().to_vec()))?;
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, result, |c| c.all_to_all(&a, &o, stream))
    }

    /// `x` to rank `dst`, matched by the `recv` there with the same `tag`. Returns `None`.
    #[pyo3(signature = (x, dst, tag = 0, stream = None, *, async_op = false))]
    fn send(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        dst: i64,
        tag: i64,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (a, dst, tag) = (operand(py, x, "x")?, index(dst, "dst")?, tag_of(tag)?);
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, py.None(), |c| c.send(&a, dst, tag, stream))
    }

    /// Into `x`, what rank `src` sends with the same `tag` (exactly `x`'s elements).
    /// Returns `x`.
    #[pyo3(signature = (x, src, tag = 0, stream = None, *, async_op = false))]
    fn recv(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        src: i64,
        tag: i64,
        stream: Option<PyRef<'_, PyStream>>,
        async_op: bool,
    ) -> PyResult<Py<PyAny>> {
        let (a, src, tag) = (operand(py, x, "x")?, index(src, "src")?, tag_of(tag)?);
        let stream = stream_of(stream.as_ref());
        self.run(py, async_op, x.clone().unbind(), |c| c.recv(&a, src, tag, stream))
    }

    fn __repr__(&self) -> String {
        format!(
            "<gpuport.distributed.Communicator rank {} of {}, {}>",
            self.inner.rank(),
            self.inner.size(),
            self.inner.engine()
        )
    }
}

/// A message tag: 0 to 65535.
fn tag_of(tag: i64) -> PyResult<u16> {
    u16::try_from(tag).map_err(|_| PyValueError::new_err(format!("tag must be an int from 0 to 65535, not {tag}")))
}

/// The native `gpuport.gpuport._distributed` module, which `gpuport.distributed` re-exports.
pub fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "gpuport.distributed")?;
    m.add_class::<PyEngine>()?;
    m.add_class::<PyCommunicator>()?;
    m.add_class::<PyWork>()?;
    m.add_class::<PyGroup>()?;
    m.add_function(wrap_pyfunction!(engines, &m)?)?;
    m.add_function(wrap_pyfunction!(init, &m)?)?;
    m.add_function(wrap_pyfunction!(init_all, &m)?)?;
    m.add_function(wrap_pyfunction!(init_rank, &m)?)?;
    m.add_function(wrap_pyfunction!(split_all, &m)?)?;
    m.add_function(wrap_pyfunction!(unique_id, &m)?)?;
    m.add_function(wrap_pyfunction!(group, &m)?)?;
    Ok(m)
}

/// Lets the engines' loaders find the `mpich` wheel's `libmpi_abi.so.1` in this
/// interpreter's `lib/`, and the NCCL wheel's `libnccl.so.2` in any folder of its
/// `sys.path` (site-packages, dist-packages, a user's), whether or not its environment is
/// activated. Looked at only when a communicator is first made or the engines are listed.
pub fn register_prefix(py: Python<'_>) {
    let Ok(sys) = py.import("sys") else { return };
    if let Ok(prefix) = sys.getattr("prefix").and_then(|p| p.extract::<String>()) {
        collective::add_search_dir(std::path::Path::new(&prefix).join("lib"));
    }
    if let Ok(paths) = sys.getattr("path").and_then(|p| p.extract::<Vec<String>>()) {
        for dir in paths.into_iter().filter(|d| !d.is_empty()) {
            collective::add_search_dir(dir);
        }
    }
}
