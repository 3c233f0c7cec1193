//! The process's runtime handle: created on first use (at import), shared by every call.
//! Device plugins are loaded into it first: the libraries `GPUPORT_PLUGINS` names, and
//! those that installed packages name in the entry-point group `gpuport.plugins`.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::OnceLock;

use gpuport::{Backend, DiscoverOptions, Runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The entry-point group a plugin package names its shared library in.
pub(crate) const PLUGIN_GROUP: &str = "gpuport.plugins";

/// The process's runtime, made at import (see [`init`]); made without entry-point plugins
/// if asked for before.
pub(crate) fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| discover(Vec::new()))
}

/// Makes the runtime with the plugin libraries `extra` loaded beside `GPUPORT_PLUGINS`'.
pub(crate) fn init(extra: Vec<PathBuf>) -> &'static Runtime {
    RUNTIME.get_or_init(|| discover(extra))
}

/// The ext plugin registered, the plugins loaded, then every backend discovered once
/// (`GPUPORT_BACKENDS` applies). A plugin that cannot be loaded is a backend reported
/// unavailable, with its reason, under its library's file name.
fn discover(extra: Vec<PathBuf>) -> Runtime {
    // The ext device is always wanted (cross-device paths without a GPU); a failure to
    // load it shows in `backends()` as an unavailable backend rather than an import error.
    if let Ok(ext) = gpuport_ext::ExtBackend::load(&Default::default()) {
        let _ = Runtime::register_plugin(ext);
    }
    let mut opts = DiscoverOptions::from_env();
    opts.plugins.extend(extra);
    Runtime::discover_with(&opts)
}

/// The shared libraries installed packages name in the `gpuport.plugins` entry-point
/// group: each entry point loads to a path (`str` or `os.PathLike`) or to a function
/// returning one. An entry point that cannot be resolved is a warning naming it, never an
/// import error.
pub(crate) fn entry_point_plugins(py: Python<'_>) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let points = (|| -> PyResult<Vec<Bound<'_, PyAny>>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("group", PLUGIN_GROUP)?;
        let found = py.import("importlib.metadata")?.call_method("entry_points", (), Some(&kwargs))?;
        found.try_iter()?.collect()
    })();
    let points = match points {
        Ok(points) => points,
        Err(e) => {
            warn(py, &format!("gpuport: the {PLUGIN_GROUP} entry points could not be listed: {e}"));
            return paths;
        }
    };
    for point in points {
        let resolved = (|| -> PyResult<String> {
            let value = point.call_method0("load")?;
            let value = if value.is_callable() { value.call0()? } else { value };
            py.import("os")?.call_method1("fspath", (value,))?.extract()
        })();
        match resolved {
            Ok(path) => paths.push(PathBuf::from(path)),
            Err(e) => {
                let name = point.getattr("name").map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
                warn(py, &format!("gpuport: the {PLUGIN_GROUP} entry point `{name}` gives no library path: {e}"));
            }
        }
    }
    paths
}

fn warn(py: Python<'_>, message: &str) {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // A warning that cannot be issued (warnings turned into errors) is dropped: importing
    // gpuport must not fail over a broken third-party package.
    let _ = PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &message, 1);
}
