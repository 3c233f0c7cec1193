//! The process's runtime handle: created on first use (at import), shared by every call.
//! Device plugins are loaded into it first: the libraries `GPUPORT_PLUGINS` names, and
//! those that installed packages name in the entry-point group `gpuport.plugins`.
//!
//! The ext device — a software device with memory of its own, for trying cross-device
//! paths without a GPU — is a test device: it is in the device lists only when asked for,
//! with `GPUPORT_EXT=1` in the environment or `gpuport.register_ext()` in a program (which
//! discovers the backends again with it registered).

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use gpuport::{Backend, DiscoverOptions, Runtime};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The current runtime: made once at import, made again by `register_ext`. Each one made
/// is kept for good (a few hundred bytes, a handful of times at most), so a reference
/// handed out stays valid when a newer one replaces it.
static RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

/// Held while a runtime is made; keeps the entry-point plugins' libraries for a later
/// discovery.
static MAKING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The entry-point group a plugin package names its shared library in.
pub(crate) const PLUGIN_GROUP: &str = "gpuport.plugins";

/// The variable that registers the ext test device at import.
pub(crate) const EXT_ENV: &str = "GPUPORT_EXT";

/// The process's runtime, made at import (see [`init`]); made without entry-point plugins
/// if asked for before.
pub(crate) fn runtime() -> &'static Runtime {
    let current = RUNTIME.load(Ordering::Acquire);
    if current.is_null() {
        return init(Vec::new());
    }
    // SAFETY: every pointer stored is a leaked box, never freed.
    unsafe { &*current }
}

/// Makes the runtime (once) with the plugin libraries `extra` loaded beside
/// `GPUPORT_PLUGINS`'.
pub(crate) fn init(extra: Vec<PathBuf>) -> &'static Runtime {
    let mut kept = MAKING.lock().unwrap_or_else(|p| p.into_inner());
    let current = RUNTIME.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: as in `runtime`.
        return unsafe { &*current };
    }
    *kept = extra;
    publish(discover(&kept, std::env::var(EXT_ENV).is_ok_and(|v| v.trim() == "1")))
}

/// `gpuport.register_ext()`: registers the ext test device and discovers the backends again,
/// so that `ext:0` and `ext:1` are devices like any other from now on. Arrays and devices
/// from before stay valid.
#[pyfunction]
pub fn register_ext(py: Python<'_>) -> PyResult<()> {
    runtime();
    py.detach(|| {
        let kept = MAKING.lock().unwrap_or_else(|p| p.into_inner());
        publish(discover(&kept, true));
    });
    Ok(())
}

/// Every runtime made, kept for the life of the process: a replaced one may still be in
/// use by a caller that read it before (and a leak checker sees them all reachable).
static MADE: Mutex<Vec<&'static Runtime>> = Mutex::new(Vec::new());

/// Leaks `rt`, keeps it in [`MADE`] and makes it the current runtime.
fn publish(rt: Runtime) -> &'static Runtime {
    let leaked: &'static Runtime = Box::leak(Box::new(rt));
    MADE.lock().unwrap_or_else(|p| p.into_inner()).push(leaked);
    RUNTIME.store(std::ptr::from_ref(leaked).cast_mut(), Ordering::Release);
    leaked
}

/// The ext plugin registered when asked for, the plugins loaded, then every backend
/// discovered once (`GPUPORT_BACKENDS` applies). A plugin that cannot be loaded is a
/// backend reported unavailable, with its reason, under its library's file name.
fn discover(extra: &[PathBuf], ext: bool) -> Runtime {
    // A failure to load the ext device shows in `backends()` as an unavailable backend
    // rather than an import error; registering it twice is refused, harmlessly.
    if ext {
        if let Ok(backend) = gpuport_ext::ExtBackend::load(&Default::default()) {
            let _ = Runtime::register_plugin(backend);
        }
    }
    let mut opts = DiscoverOptions::from_env();
    opts.plugins.extend(extra.iter().cloned());
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
