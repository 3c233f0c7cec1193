//! # gpuport-python
//!
//! The `gpuport` Python module: thin glue from Python objects to gpuport's
//! Rust crates, which hold every rule — `gpuport-dlpack` (export, stream handshake,
//! validated import), `gpuport-cai` (the CUDA Array Interface v3) and the facade's
//! `Array`, copy engine and `MirroredArray`. Errors become Python exceptions of the kind
//! the array API standard and the interchange specs name (`errors.rs`; the table is in
//! `docs/interop.md`).
//!
//! Built by maturin as one abi3 wheel (CPython ≥ 3.11); `cargo xtask test` builds it into
//! a project-local virtual environment and runs `tests/python` with pytest.

use std::sync::OnceLock;

use gpuport::{Backend, Runtime};
use pyo3::prelude::*;

mod array;
mod cai;
mod capsule;
mod creation;
mod device;
mod dlpack;
mod dtype;
mod errors;
mod exchange_api;
mod host_import;
mod index;
mod mirrored;
mod py_owner;
mod scalar;
mod text;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The process's runtime: the ext plugin registered, then every backend discovered once
/// (`GPUPORT_BACKENDS` applies).
pub(crate) fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        // The ext device is always wanted (cross-device paths without a GPU); a failure to
        // load it shows in `backends()` as an unavailable backend rather than an import error.
        if let Ok(ext) = gpuport_ext::ExtBackend::load(&Default::default()) {
            let _ = Runtime::register_plugin(ext);
        }
        Runtime::discover()
    })
}

/// The `gpuport` module.
#[pymodule(name = "gpuport")]
fn gpuport_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Discovery happens at import: `gpuport.device("ext:0")` works from the first call, and
    // no exchange pays for it later.
    py.detach(runtime);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BackendUnavailable", py.get_type::<errors::BackendUnavailable>())?;
    m.add_class::<device::PyBackend>()?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<device::PyStream>()?;
    m.add_class::<device::PyEvent>()?;
    m.add_class::<array::PyArray>()?;
    m.add_class::<mirrored::PySyncState>()?;
    m.add_class::<mirrored::PyMirroredArray>()?;
    m.add_function(wrap_pyfunction!(device::backends, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(creation::empty, m)?)?;
    m.add_function(wrap_pyfunction!(creation::zeros, m)?)?;
    m.add_function(wrap_pyfunction!(creation::full, m)?)?;
    m.add_function(wrap_pyfunction!(creation::asarray, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(cai::as_array, m)?)?;
    m.add_function(wrap_pyfunction!(cai::from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(exchange_api::exchange_counters, m)?)?;
    for (name, value) in mirrored::STATE_CONSTANTS {
        m.add(*name, *value)?;
    }
    Ok(())
}
