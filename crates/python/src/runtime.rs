//! The process's runtime handle: created on first use (at import), shared by every call.

use std::sync::OnceLock;

use gpuport::{Backend, Runtime};

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
