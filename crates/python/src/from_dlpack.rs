//! `gpuport.from_dlpack`: picks the path — a raw capsule, the producer type's C exchange
//! table, else `__dlpack__` (without asking `__dlpack_device__` of a type known to be on
//! the host) — and counts it.

use gpuport_dlpack::ImportRequest;
use pyo3::prelude::*;

use crate::array::PyArray;
use crate::counters::{count, Counter};
use crate::device::parse_device;
use crate::exchange_api::Producer;
use crate::{capsule, dlpack, exchange_api};

/// `gpuport.from_dlpack(x, *, device=None, copy=None)`: `x` is any object with
/// `__dlpack__`/`__dlpack_device__` (through its type's C exchange API when it publishes
/// one), or a DLPack capsule.
#[pyfunction]
#[pyo3(signature = (x, *, device = None, copy = None))]
pub fn from_dlpack(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyArray>> {
    let device = device.filter(|d| !d.is_none()).map(parse_device).transpose()?;
    if capsule::is_capsule(x) {
        count(py, Counter::ConsumerCapsule);
        let tensor = capsule::consume(x)?;
        return dlpack::import(py, tensor, &ImportRequest { device, copy });
    }
    match exchange_api::producer_of(&x.get_type())? {
        Producer::Table(table) => {
            count(py, Counter::ConsumerExchangeApi);
            exchange_api::import_through(py, x, table, device, copy)
        }
        Producer::Dunder { on_host } => dlpack::from_dunder(py, x, device, copy, on_host),
    }
}
