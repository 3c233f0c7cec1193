//! # gpuport-plugin-export
//!
//! A Rust port exports itself as a device plugin: [`export_plugin!`] turns any
//! `impl Backend` into the C entry point of `gpuport_plugin.h` (`gpuport_plugin_entry`)
//! and its function table, so one port is either linked into a program (registered with
//! `Runtime::register_plugin`) or built as a `cdylib` that any gpuport program — and the
//! Python module — loads at run time (`Runtime::load_plugin`, `GPUPORT_PLUGINS`).
//!
//! ```ignore
//! // lib.rs of a crate with `crate-type = ["cdylib"]`:
//! gpuport_plugin_export::export_plugin!(my_port::MyBackend);
//! // or under another name, with code run when the plugin initialises:
//! gpuport_plugin_export::export_plugin!(my_port::MyBackend, name = "mine", init = my_port::register_kernels);
//! ```
//!
//! Each call of the table forwards to the backend's `Device`, `Stream` and `Event`. The C
//! side names memory by address: allocations made through the table are kept by address
//! and resolved back to their `Buffer` for copies, fills and kernel arguments; an
//! address that is none of them is the caller's host memory. Errors cross as error
//! objects (kind and message); a panic is caught and crosses as an error, never unwinding
//! into the caller. Not exported: the per-thread default stream (a Rust backend's is
//! its own thread's; the loader reports it `Unsupported`).

mod error;
mod state;
mod table;

use std::ffi::CString;

use gpuport_core::{Backend, LoadOptions};
pub use gpuport_plugin_abi as abi;

/// The table of backend `B` under `name` (its own name when `None`), made once: what the
/// entry point [`export_plugin!`] writes returns. `init` runs once, before the backend
/// loads (to register a software backend's kernels, say).
pub fn entry<B: Backend>(name: Option<&str>, init: fn()) -> *const abi::PluginApi {
    let exported = state::exported::<B>(|| {
        init();
        let backend = B::load(&LoadOptions::default());
        let version = match &backend {
            Ok(b) => b.version(),
            Err(e) => format!("unavailable: {e}"),
        };
        let text = |s: &str| CString::new(s.replace('\0', " ")).unwrap_or_default();
        state::Exported {
            backend,
            name: text(name.unwrap_or(B::KIND.name())),
            version: text(&version),
            memory: Default::default(),
            table: Default::default(),
        }
    });
    exported.table.get_or_init(|| table::table(exported))
}

/// Does nothing: the `init` of a plugin that needs none.
pub fn no_init() {}

/// Exports `$backend` (an `impl gpuport_core::Backend`) as this library's device plugin:
/// writes `gpuport_plugin_entry`. `name = "…"` exports it under another backend name (a
/// program may link the same port in and load it as a plugin); `init = path` names a
/// `fn()` run once when the entry point is first called.
#[macro_export]
macro_rules! export_plugin {
    ($backend:ty) => {
        $crate::export_plugin!(@entry $backend, None, $crate::no_init);
    };
    ($backend:ty, name = $name:literal) => {
        $crate::export_plugin!(@entry $backend, Some($name), $crate::no_init);
    };
    ($backend:ty, name = $name:literal, init = $init:path) => {
        $crate::export_plugin!(@entry $backend, Some($name), $init);
    };
    (@entry $backend:ty, $name:expr, $init:path) => {
        /// The device plugin's entry point (`gpuport_plugin.h`).
        #[no_mangle]
        pub extern "C" fn gpuport_plugin_entry() -> *const $crate::abi::PluginApi {
            // The table is built inside a guard: nothing unwinds out of the entry point.
            ::std::panic::catch_unwind(|| $crate::entry::<$backend>($name, $init)).unwrap_or(::std::ptr::null())
        }
    };
}
