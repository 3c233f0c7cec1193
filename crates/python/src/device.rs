//! `gpuport.backends()`, `Device`, `Stream`, `Event`, and the one parser of device
//! arguments (a string, a `Device`, or a DLPack `(device_type, device_id)` pair).

use gpuport::{AnyDevice, AnyEvent, AnyStream, BackendStatus, EventFlags, StreamFlags};
use gpuport_dlpack::DLDevice;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::errors::IntoPy;
use crate::runtime::runtime;

/// One backend as discovery found it.
#[pyclass(module = "gpuport", name = "Backend", frozen)]
pub struct PyBackend {
    /// `"host"`, `"cuda"`, `"rocm"`, `"ext"`, …
    #[pyo3(get)]
    name: String,
    /// Whether its runtime loaded and it has devices.
    #[pyo3(get)]
    available: bool,
    /// Why it is unavailable; `None` when available.
    #[pyo3(get)]
    reason: Option<String>,
    /// Its devices as device strings (`"cuda:0"`).
    #[pyo3(get)]
    devices: Vec<String>,
}

#[pymethods]
impl PyBackend {
    fn __repr__(&self) -> String {
        match &self.reason {
            None => {
                let devices: Vec<String> = self.devices.iter().map(|d| crate::text::str_repr(d)).collect();
                format!("<gpuport.Backend {} available, devices [{}]>", self.name, devices.join(", "))
            }
            Some(r) => format!("<gpuport.Backend {} unavailable: {r}>", self.name),
        }
    }
}

/// Every backend gpuport knows, available or not (with the reason).
#[pyfunction]
pub fn backends() -> Vec<PyBackend> {
    runtime()
        .reports()
        .iter()
        .map(|r| match &r.status {
            BackendStatus::Available { devices, .. } => PyBackend {
                name: r.name.clone(),
                available: true,
                reason: None,
                devices: devices.iter().map(|d| d.id.to_string()).collect(),
            },
            BackendStatus::Unavailable(e) => {
                PyBackend { name: r.name.clone(), available: false, reason: Some(e.to_string()), devices: Vec::new() }
            }
        })
        .collect()
}

/// Every device of every available backend (`gpuport.devices()`), as `Device` objects.
#[pyfunction]
pub fn devices() -> Vec<PyDevice> {
    runtime().devices().into_iter().map(PyDevice::new).collect()
}

/// A device: the host, a GPU, or a plugin's device.
#[pyclass(module = "gpuport", name = "Device", frozen, eq, hash)]
pub struct PyDevice {
    pub(crate) inner: AnyDevice,
}

impl PartialEq for PyDevice {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id() == other.inner.id()
    }
}

impl std::hash::Hash for PyDevice {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.id().to_string().hash(state)
    }
}

impl PyDevice {
    pub(crate) fn new(inner: AnyDevice) -> Self {
        PyDevice { inner }
    }
}

#[pymethods]
impl PyDevice {
    /// The backend's name (`"host"`, `"cuda"`, `"ext"`).
    #[getter]
    fn kind(&self) -> String {
        self.inner.id().kind.to_string()
    }

    /// The ordinal within the backend.
    #[getter]
    fn index(&self) -> u32 {
        self.inner.id().ordinal
    }

    /// The device's model name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.inner.info().py()?.name)
    }

    /// `(device_type, device_id)` of the device's own memory, as DLPack numbers it.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        Ok((self.inner.dlpack_devices().device.0, self.inner.id().ordinal as i32))
    }

    /// A new stream (non-blocking with respect to the legacy default stream).
    #[pyo3(signature = (*, priority = 0))]
    fn create_stream(&self, priority: i32) -> PyResult<PyStream> {
        let inner = self.inner.create_stream(StreamFlags::NON_BLOCKING, priority).py()?;
        Ok(PyStream { inner, device: self.inner.clone() })
    }

    /// A new event; `timing=True` lets it be used with `Event.elapsed_time`.
    #[pyo3(signature = (*, timing = true))]
    fn create_event(&self, timing: bool) -> PyResult<PyEvent> {
        let flags = if timing { EventFlags::empty() } else { EventFlags::DISABLE_TIMING };
        Ok(PyEvent { inner: self.inner.create_event(flags).py()? })
    }

    /// The device's legacy default stream.
    fn default_stream(&self) -> PyResult<PyStream> {
        let inner = self.inner.default_stream(gpuport::DefaultStream::Legacy).py()?;
        Ok(PyStream { inner, device: self.inner.clone() })
    }

    /// Waits (without holding the GIL) for all work queued on the device.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    fn __repr__(&self) -> String {
        format!("Device('{}')", self.inner.id())
    }

    fn __str__(&self) -> String {
        self.inner.id().to_string()
    }
}

/// A stream of work on one device.
#[pyclass(module = "gpuport", name = "Stream", frozen)]
pub struct PyStream {
    pub(crate) inner: AnyStream,
    /// The stream's device (for `.device` and the events `record` makes).
    pub(crate) device: AnyDevice,
}

#[pymethods]
impl PyStream {
    /// The native handle (`cudaStream_t`, `hipStream_t`, or gpuport's for other devices).
    #[getter]
    fn handle(&self) -> usize {
        self.inner.raw_handle()
    }

    /// The stream's device.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::new(self.device.clone())
    }

    /// Waits (without holding the GIL) for the stream's work.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    /// True when all queued work has completed.
    fn query(&self) -> PyResult<bool> {
        self.inner.query().py()
    }

    /// Makes later work on this stream wait for `event` (no host block).
    fn wait_event(&self, event: &PyEvent) -> PyResult<()> {
        self.inner.wait(&event.inner).py()
    }

    /// Records `event` (a new one when omitted) at this point of the stream; returns it.
    #[pyo3(signature = (event = None))]
    fn record(&self, event: Option<Py<PyEvent>>, py: Python<'_>) -> PyResult<Py<PyEvent>> {
        let event = match event {
            Some(e) => e,
            None => Py::new(py, PyEvent { inner: self.device.create_event(EventFlags::empty()).py()? })?,
        };
        self.inner.record(&event.get().inner).py()?;
        Ok(event)
    }

    fn __repr__(&self) -> String {
        format!("<gpuport.Stream on {} handle={:#x}>", self.inner.device_id(), self.inner.raw_handle())
    }
}

/// A point in a stream's work.
#[pyclass(module = "gpuport", name = "Event", frozen)]
pub struct PyEvent {
    pub(crate) inner: AnyEvent,
}

#[pymethods]
impl PyEvent {
    /// The native handle.
    #[getter]
    fn handle(&self) -> usize {
        self.inner.raw_handle()
    }

    /// Waits (without holding the GIL) for the work before the event's record.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize()).py()
    }

    /// True when the recorded work has completed.
    fn query(&self) -> PyResult<bool> {
        self.inner.query().py()
    }

    /// Milliseconds from this event to `end` (both recorded and complete).
    fn elapsed_time(&self, end: &PyEvent) -> PyResult<f32> {
        self.inner.elapsed_ms(&end.inner).py()
    }

    fn __repr__(&self) -> String {
        format!("<gpuport.Event on {} handle={:#x}>", self.inner.device_id(), self.inner.raw_handle())
    }
}

/// `gpuport.device(spec="host")`: a device by name (`"host"`, `"cuda:0"`, `"ext:1"`).
#[pyfunction]
#[pyo3(signature = (spec = None))]
pub fn device(spec: Option<&Bound<'_, PyAny>>) -> PyResult<PyDevice> {
    Ok(PyDevice::new(match spec {
        None => runtime().device("host").py()?,
        Some(s) => parse_device(s)?,
    }))
}

/// A device argument: a string, a `Device`, or a DLPack `(device_type, device_id)` pair.
pub fn parse_device(arg: &Bound<'_, PyAny>) -> PyResult<AnyDevice> {
    if let Ok(d) = arg.cast::<PyDevice>() {
        return Ok(d.get().inner.clone());
    }
    if let Ok(s) = arg.cast::<PyString>() {
        let spec = s.to_str()?;
        return runtime().device(spec).map_err(|e| match e {
            // The ext test device is registered only when asked for: say how, in Python.
            gpuport::Error::BackendUnavailable { ref name, .. }
                if name == "ext" && runtime().report_for(name).is_none() =>
            {
                pyo3::exceptions::PyValueError::new_err(
                    "ext (the software test device) is not registered: call gpuport.register_ext(), or set \
                     GPUPORT_EXT=1 before importing gpuport",
                )
            }
            // A name no backend has is a bad value, not an unavailable backend.
            gpuport::Error::BackendUnavailable { ref name, .. } if runtime().report_for(name).is_none() => {
                pyo3::exceptions::PyValueError::new_err(e.to_string())
            }
            e => crate::errors::to_py(e, crate::errors::Context::General),
        });
    }
    if let Ok(t) = arg.cast::<PyTuple>() {
        if let Ok((device_type, device_id)) = t.extract::<(i32, i32)>() {
            return Ok(gpuport_dlpack::resolve(runtime(), DLDevice { device_type, device_id }).py()?.device);
        }
    }
    Err(PyTypeError::new_err(format!(
        "a device is a string such as 'host' or 'cuda:0', a gpuport.Device or a (device_type, device_id) pair, not {}",
        arg.get_type().name()?
    )))
}
