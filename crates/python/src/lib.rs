//! # gpuport-python
//!
//! The `gpuport` Python module: thin glue from Python objects to gpuport's
//! Rust crates, which hold every rule — `gpuport-dlpack` (export, stream handshake,
//! validated import), `gpuport-cai` (the CUDA Array Interface v3) and the facade's
//! `Array`, copy engine and `MirroredArray`. Errors become Python exceptions of the kind
//! the array API standard and the interchange specs name (`errors.rs`; the table is in
//! `docs/interop.md`).
//!
//! Built by maturin as abi3 wheels (CPython ≥ 3.11, and ≥ 3.12 with vectorcall): the native
//! module `gpuport.gpuport` inside the package `python/gpuport`, which re-exports it and
//! adds `gpuport.distributed` and the type stubs. `cargo xtask test` builds it into a
//! project-local virtual environment and runs `tests/python` with pytest.

use pyo3::prelude::*;

mod array;
mod array_methods;
mod cai;
mod capsule;
mod conversions;
mod counters;
mod creation;
mod device;
mod distributed;
mod dlpack;
mod dlpack_method;
mod dtype;
mod errors;
mod exchange_api;
mod from_dlpack;
mod host_import;
mod index;
mod kernels;
mod mirrored;
mod placement;
mod py_owner;
mod runtime;
mod scalar;
mod text;

/// Tells the CUDA backend where this interpreter's packages are, so NVRTC is found in an
/// `nvidia-cuda-nvrtc` wheel (PyTorch's and CuPy's environments carry one) when the machine
/// has no CUDA toolkit. Looked at only when a kernel is first compiled.
fn register_site_packages(py: Python<'_>) {
    let dirs = py.import("site").and_then(|site| {
        let mut dirs: Vec<String> = site.call_method0("getsitepackages")?.extract()?;
        dirs.push(site.call_method0("getusersitepackages")?.extract()?);
        Ok::<_, PyErr>(dirs)
    });
    for dir in dirs.unwrap_or_default() {
        gpuport::cuda::add_python_site_packages(dir);
    }
}

/// The `gpuport` module.
#[pymodule(name = "gpuport")]
fn gpuport_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Discovery happens at import: `gpuport.device("ext:0")` works from the first call, and
    // no exchange pays for it later. Plugins installed packages name are loaded first.
    let plugins = runtime::entry_point_plugins(py);
    register_site_packages(py);
    distributed::register_prefix(py);
    py.detach(|| runtime::init(plugins));
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BackendUnavailable", py.get_type::<errors::BackendUnavailable>())?;
    m.add_class::<device::PyBackend>()?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<device::PyStream>()?;
    m.add_class::<device::PyEvent>()?;
    m.add_class::<array::PyArray>()?;
    dlpack_method::install(&py.get_type::<array::PyArray>())?;
    m.add_class::<mirrored::PySyncState>()?;
    m.add_class::<mirrored::PyMirroredArray>()?;
    m.add_class::<kernels::PyRawModule>()?;
    m.add_class::<kernels::PyRawKernel>()?;
    m.add("CompileError", py.get_type::<kernels::CompileError>())?;
    m.add_function(wrap_pyfunction!(device::backends, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(creation::empty, m)?)?;
    m.add_function(wrap_pyfunction!(creation::zeros, m)?)?;
    m.add_function(wrap_pyfunction!(creation::ones, m)?)?;
    m.add_function(wrap_pyfunction!(creation::full, m)?)?;
    m.add_function(wrap_pyfunction!(device::devices, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::register_ext, m)?)?;
    m.add_function(wrap_pyfunction!(creation::asarray, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(cai::as_array, m)?)?;
    m.add_function(wrap_pyfunction!(cai::from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(counters::exchange_counters, m)?)?;
    // Private: the package's `gpuport.distributed` re-exports it (not in `__all__`).
    m.setattr("_distributed", distributed::module(py)?)?;
    for (name, value) in mirrored::STATE_CONSTANTS {
        m.add(*name, *value)?;
    }
    Ok(())
}
