//! `gpuport.MirroredArray` and `gpuport.SyncState`: software-managed mirrored storage, as
//! GT4Py's storages keep it (a host and a device buffer, and a sync state saying which is
//! newer), over the facade's `MirroredArray`.
//! Every view of one pair of buffers shares one `SyncState` object; buffers taken out of
//! a mirrored array and wrapped again share it too when it is passed as `sync_state=`.

use gpuport::{Access, AnyDevice, Array, DType, MirroredArray, SharedSyncState, SyncState};
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::array::PyArray;
use crate::device::{parse_device, PyDevice};
use crate::errors::IntoPy;
use crate::runtime::runtime;
use crate::{cai, dlpack, dtype, from_dlpack, host_import, index};

const CLEAN: u8 = 0;
const HOST_DIRTY: u8 = 1;
const DEVICE_DIRTY: u8 = 2;

/// The module-level constants (also class attributes of `SyncState`).
pub const STATE_CONSTANTS: &[(&str, u8)] =
    &[("SYNC_CLEAN", CLEAN), ("SYNC_HOST_DIRTY", HOST_DIRTY), ("SYNC_DEVICE_DIRTY", DEVICE_DIRTY)];

fn to_code(s: SyncState) -> u8 {
    match s {
        SyncState::Clean => CLEAN,
        SyncState::HostDirty => HOST_DIRTY,
        SyncState::DeviceDirty => DEVICE_DIRTY,
    }
}

fn from_code(c: u8) -> PyResult<SyncState> {
    match c {
        CLEAN => Ok(SyncState::Clean),
        HOST_DIRTY => Ok(SyncState::HostDirty),
        DEVICE_DIRTY => Ok(SyncState::DeviceDirty),
        other => Err(PyValueError::new_err(format!(
            "state {other} is not one of SYNC_CLEAN (0), SYNC_HOST_DIRTY (1), SYNC_DEVICE_DIRTY (2)"
        ))),
    }
}

/// Which side of a mirrored array holds changes the other lacks; shared by all views.
#[pyclass(module = "gpuport", name = "SyncState", frozen)]
pub struct PySyncState {
    inner: SharedSyncState,
}

#[pymethods]
impl PySyncState {
    #[classattr]
    const SYNC_CLEAN: u8 = CLEAN;
    #[classattr]
    const SYNC_HOST_DIRTY: u8 = HOST_DIRTY;
    #[classattr]
    const SYNC_DEVICE_DIRTY: u8 = DEVICE_DIRTY;

    /// A new, unshared state.
    #[new]
    #[pyo3(signature = (state = CLEAN), text_signature = "(state=0)")]
    fn new(state: u8) -> PyResult<Self> {
        Ok(PySyncState { inner: SharedSyncState::new(from_code(state)?) })
    }

    /// `SYNC_CLEAN`, `SYNC_HOST_DIRTY` or `SYNC_DEVICE_DIRTY`.
    #[getter]
    fn state(&self) -> u8 {
        to_code(self.inner.get())
    }

    #[setter]
    fn set_state(&self, state: u8) -> PyResult<()> {
        self.inner.set(from_code(state)?);
        Ok(())
    }

    fn __repr__(&self) -> String {
        let name = STATE_CONSTANTS[usize::from(to_code(self.inner.get()))].0;
        format!("gpuport.SyncState({name})")
    }
}

/// A host buffer and a device buffer of one logical array, synchronized on demand.
#[pyclass(module = "gpuport", name = "MirroredArray", frozen)]
pub struct PyMirroredArray {
    inner: MirroredArray,
    /// The one Python `SyncState` object of these buffers (identity kept across views).
    sync_state: Py<PySyncState>,
}

/// A zero-copy host-side array: buffer protocol, `__array_interface__` or a DLPack host array.
fn host_side(obj: &Bound<'_, PyAny>) -> PyResult<Array> {
    if let Ok(a) = obj.cast::<PyArray>() {
        return Ok(a.get().inner.clone());
    }
    if let Some(a) = host_import::import(obj)? {
        return Ok(a);
    }
    if obj.hasattr("__dlpack__")? {
        return Ok(from_dlpack::from_dlpack(obj.py(), obj, None, Some(false))?.get().inner.clone());
    }
    Err(PyTypeError::new_err(format!(
        "data must support the buffer protocol, __array_interface__ or DLPack, not {}",
        obj.get_type().name()?
    )))
}

/// A zero-copy device-side array: CUDA Array Interface or DLPack.
fn device_side(obj: &Bound<'_, PyAny>) -> PyResult<Array> {
    if let Ok(a) = obj.cast::<PyArray>() {
        return Ok(a.get().inner.clone());
    }
    if obj.hasattr("__cuda_array_interface__")? {
        return Ok(cai::as_array(obj.py(), obj, "enqueue", None)?.get().inner.clone());
    }
    if obj.hasattr("__dlpack__")? {
        return Ok(from_dlpack::from_dlpack(obj.py(), obj, None, Some(false))?.get().inner.clone());
    }
    Err(PyTypeError::new_err(format!(
        "device_data must support __cuda_array_interface__ or DLPack, not {}",
        obj.get_type().name()?
    )))
}

/// The device side's device: `device`, else the best device (`GPUPORT_DEVICE`, else the
/// first GPU, else the host). When that leaves both sides on the host — no GPU here — a
/// `UserWarning` says so, and how to choose: a mirror of host memory in host memory is
/// rarely what was meant.
fn device_or_best(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<AnyDevice> {
    if let Some(d) = device.filter(|d| !d.is_none()) {
        return parse_device(d);
    }
    let best = runtime().best_device().py()?;
    if best.id().kind == gpuport::BackendKind::Host {
        let message = c"MirroredArray without device=: no GPU is available, so the device side is host memory \
                        too (host:0); pass device= ('ext:0', 'cuda:0', ...) to choose";
        PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), message, 1)?;
    }
    Ok(best)
}

impl PyMirroredArray {
    fn build(py: Python<'_>, inner: MirroredArray, sync_state: Option<Py<PySyncState>>) -> PyResult<Self> {
        let sync_state = match sync_state {
            Some(s) => s,
            None => Py::new(py, PySyncState { inner: inner.sync_state().clone() })?,
        };
        Ok(PyMirroredArray { inner, sync_state })
    }

    fn view(&self, py: Python<'_>, inner: MirroredArray) -> PyResult<Py<PyMirroredArray>> {
        Py::new(py, PyMirroredArray { inner, sync_state: self.sync_state.clone_ref(py) })
    }

    fn allocate(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        zeroed: bool,
    ) -> PyResult<Self> {
        let shape: Vec<usize> = match shape.extract::<usize>() {
            Ok(n) => vec![n],
            Err(_) => shape.extract()?,
        };
        let dtype = dtype::parse(dtype, DType::F64)?;
        let dev = device_or_best(py, device)?;
        let host = runtime().device("host").py()?;
        let inner = py
            .detach(|| {
                if zeroed {
                    MirroredArray::zeros(&host, &dev, &shape, dtype)
                } else {
                    MirroredArray::from_parts(
                        Array::empty(&host, &shape, dtype)?,
                        Array::empty(&dev, &shape, dtype)?,
                        SyncState::Clean,
                    )
                }
            })
            .py()?;
        Self::build(py, inner, None)
    }

    /// The side `__dlpack__` hands out: the host for a CPU `dl_device`, the device side for
    /// its own; with none, the device side unless the host holds newer data (the array
    /// counts as being on the device when both sides agree or the device side is newer).
    fn side_for(&self, dl_device: Option<(i32, i32)>) -> Side {
        let host_dl = (1, 0);
        match dl_device {
            Some(d) if d == host_dl => Side::Host,
            Some(_) => Side::Device,
            None if self.inner.state() == SyncState::HostDirty => Side::Host,
            None => Side::Device,
        }
    }

    fn acquire(&self, py: Python<'_>, side: Side) -> PyResult<Array> {
        py.detach(|| match side {
            Side::Host => self.inner.acquire_host(Access::Read),
            Side::Device => self.inner.acquire_device(Access::Read),
        })
        .py()
    }
}

/// Which side of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Host,
    Device,
}

#[pymethods]
impl PyMirroredArray {
    /// Wraps existing buffers without copying: `data` (host: buffer protocol,
    /// `__array_interface__` or a DLPack host array) and/or `device_data` (CAI or DLPack).
    /// A missing side is allocated on `device` (default: the best device — `GPUPORT_DEVICE`,
    /// else `cuda:0`, else `rocm:0`, else the host, with a `UserWarning`) — the given side
    /// then holds the data. With both, `sync_state` (shared, e.g. the `sync_state` of the
    /// mirrored array the buffers came from) says which is current; without it, both are.
    #[new]
    #[pyo3(signature = (data = None, device_data = None, *, sync_state = None, device = None))]
    fn new(
        py: Python<'_>,
        data: Option<&Bound<'_, PyAny>>,
        device_data: Option<&Bound<'_, PyAny>>,
        sync_state: Option<Py<PySyncState>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let host_dev = runtime().device("host").py()?;
        let (host, dev_arr, implied) = match (data, device_data) {
            (None, None) => {
                return Err(PyTypeError::new_err(
                    "MirroredArray needs data and/or device_data (or use MirroredArray.empty / .zeros)",
                ))
            }
            (Some(h), None) => {
                let host = host_side(h)?;
                let dev = device_or_best(py, device)?;
                let d = py.detach(|| Array::empty(&dev, host.shape(), host.dtype())).py()?;
                (host, d, SyncState::HostDirty)
            }
            (None, Some(d)) => {
                let d = device_side(d)?;
                let h = py.detach(|| Array::empty(&host_dev, d.shape(), d.dtype())).py()?;
                (h, d, SyncState::DeviceDirty)
            }
            (Some(h), Some(d)) => (host_side(h)?, device_side(d)?, SyncState::Clean),
        };
        let shared = match &sync_state {
            Some(s) => s.get().inner.clone(),
            None => SharedSyncState::new(implied),
        };
        let inner = MirroredArray::from_parts_sharing(host, dev_arr, shared).py()?;
        Self::build(py, inner, sync_state)
    }

    /// Uninitialized host and device buffers, in sync.
    #[staticmethod]
    #[pyo3(signature = (shape, dtype = None, device = None))]
    fn empty(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::allocate(py, shape, dtype, device, false)
    }

    /// Zero-filled host and device buffers, in sync.
    #[staticmethod]
    #[pyo3(signature = (shape, dtype = None, device = None))]
    fn zeros(
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::allocate(py, shape, dtype, device, true)
    }

    /// The shared `SyncState` (the same object for every view).
    #[getter]
    fn sync_state(&self, py: Python<'_>) -> Py<PySyncState> {
        self.sync_state.clone_ref(py)
    }

    /// Extents of this view.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape().py()?)
    }

    /// Number of dimensions of this view.
    #[getter]
    fn ndim(&self) -> PyResult<usize> {
        Ok(self.inner.shape().py()?.len())
    }

    /// The element type's name.
    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype().to_string()
    }

    /// The device side's device.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::new(self.inner.device().clone())
    }

    /// Copies made so far over every view: `(host_to_device, device_to_host)`.
    #[getter]
    fn copy_counts(&self) -> (usize, usize) {
        self.inner.copy_counts()
    }

    /// Copies device → host if the device is modified (or `force`); then in sync.
    #[pyo3(signature = (*, force = false))]
    fn device_to_host(&self, py: Python<'_>, force: bool) -> PyResult<()> {
        py.detach(|| self.inner.device_to_host(force)).py().map(drop)
    }

    /// Copies host → device if the host is modified (or `force`); then in sync.
    #[pyo3(signature = (*, force = false))]
    fn host_to_device(&self, py: Python<'_>, force: bool) -> PyResult<()> {
        py.detach(|| self.inner.host_to_device(force)).py().map(drop)
    }

    /// Marks the host buffer modified: the device is refreshed before its next access.
    fn set_host_modified(&self) {
        self.inner.set_host_modified()
    }

    /// Marks the device buffer modified: the host is refreshed before its next access.
    fn set_device_modified(&self) {
        self.inner.set_device_modified()
    }

    /// Marks both buffers equal (synchronized by other means).
    fn set_synchronized(&self) {
        self.inner.set_synchronized()
    }

    /// Copies whichever side is modified to the other; then in sync.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py().map(drop)
    }

    /// The host side of this view as a `gpuport.Array`, refreshed first if the device is
    /// modified.
    fn host_array(&self, py: Python<'_>) -> PyResult<Py<PyArray>> {
        PyArray::wrap(py, self.acquire(py, Side::Host)?)
    }

    /// The device side of this view as a `gpuport.Array`, refreshed first if the host is
    /// modified.
    fn device_array(&self, py: Python<'_>) -> PyResult<Py<PyArray>> {
        PyArray::wrap(py, self.acquire(py, Side::Device)?)
    }

    /// Basic indexing: views sharing the buffers and the sync state.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyMirroredArray>> {
        let steps = index::parse(key, &self.inner.shape().py()?)?;
        self.view(py, index::apply(&self.inner, &steps).py()?)
    }

    /// A view with the axes permuted (reversed when none are given).
    #[pyo3(signature = (*axes))]
    fn transpose(&self, py: Python<'_>, axes: Vec<usize>) -> PyResult<Py<PyMirroredArray>> {
        let axes = if axes.is_empty() { (0..self.inner.shape().py()?.len()).rev().collect() } else { axes };
        self.view(py, self.inner.permute(&axes).py()?)
    }

    /// The host side (after a device → host copy when the device is modified).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let host = self.acquire(py, Side::Host)?;
        py.detach(|| host.synchronize()).py()?;
        cai::array_interface_dict(py, &host)
    }

    /// The device side (after a host → device copy when the host is modified), for CUDA
    /// and ROCm devices only.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.inner.device().id().kind {
            gpuport::BackendKind::Cuda | gpuport::BackendKind::Rocm => {
                cai::export_dict(py, &self.acquire(py, Side::Device)?)
            }
            other => Err(PyAttributeError::new_err(format!(
                "__cuda_array_interface__ is for CUDA and ROCm devices; this mirrored array's device side is on {other}"
            ))),
        }
    }

    /// DLPack export of either side: the host for `dl_device=(1, 0)`, else the device side
    /// (with none given: the side holding the newer data), synchronized first.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wanted = dl_device.filter(|d| !d.is_none()).map(|d| d.extract::<(i32, i32)>()).transpose()?;
        let side = self.side_for(wanted);
        let array = self.acquire(py, side)?;
        dlpack::export(py, &array, stream, max_version, dl_device, copy)
    }

    /// The DLPack device of the side `__dlpack__` hands out by default.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        let array = match self.side_for(None) {
            Side::Host => self.inner.host_unsynchronized(),
            Side::Device => self.inner.device_unsynchronized(),
        }
        .py()?;
        let d = gpuport_dlpack::dl_device_of(&array).py_exchange()?;
        Ok((d.device_type, d.device_id))
    }

    fn __repr__(&self) -> String {
        format!(
            "gpuport.MirroredArray(shape={}, dtype={}, host='{}', device='{}', state={})",
            crate::text::tuple(&self.inner.shape().unwrap_or_default()),
            self.inner.dtype(),
            self.inner.host_device().id(),
            self.inner.device_id(),
            STATE_CONSTANTS[usize::from(to_code(self.inner.state()))].0
        )
    }
}
