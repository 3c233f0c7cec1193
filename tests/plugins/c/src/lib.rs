//! The C device plugin of `examples/c-plugin`, built by this package's build script with
//! the system C compiler, and its broken variants: where their libraries are.

use std::path::PathBuf;

/// The backend name of the correct plugin.
pub const NAME: &str = "cplugin";

/// The library of the plugin (`None`) or of a broken variant (`Some("noop-wait")`, …).
pub fn library(variant: Option<&str>) -> PathBuf {
    let dir = PathBuf::from(env!("C_PLUGIN_DIR"));
    match variant {
        None => dir.join("libgpuport_c_plugin.so"),
        Some(v) => dir.join(format!("libgpuport_c_plugin-{v}.so")),
    }
}
