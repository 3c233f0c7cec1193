//! Device plugins loaded from shared libraries: a library exporting
//! `gpuport_plugin_entry`, whose table (`gpuport_plugin.h`, the `gpuport-plugin-abi`
//! crate) the vendor kit drives as it drives CUDA and ROCm. `Runtime::load_plugin(path)`
//! and `GPUPORT_PLUGINS` load them; a loaded plugin is a backend like any other, named
//! by its table, its devices `BackendKind::Plugin(name)`.
//!
//! Everything a plugin hands back is checked before use (`table`): a missing library or
//! entry symbol, a null table, another ABI major version, a table too short or lacking a
//! function, a bad name, a failing `initialize` — each is an error naming the library and
//! what is wrong, and discovery shows it as the backend's reason. A plugin is never
//! unloaded: its library stays mapped for the life of the process.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `table` | the validated table, and plugin errors turned into gpuport's |
//! | `result` | one checked function per call of the table |
//! | `calls` | the vendor kit's call table over it, one opened device each |
//! | `stream_handle` | a stream's handle, with the progress counters a query reads |
//! | `handles` | devices, streams and events in the dynamic tier |

mod calls;
mod handles;
mod result;
mod stream_handle;
mod table;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gpuport_core::{BackendKind, DeviceInfo, DlpackDevices, Error, Result};
use gpuport_driver::loading::loader_message;
use gpuport_driver::vendor::OpenDevices;
use gpuport_plugin_abi as abi;

use crate::dynamic::{AnyDevice, DynBackend};
use calls::{PluginCalls, Shared};
use handles::device_into_any;
pub(crate) use handles::{LoadedDevice, LoadedEvent, LoadedStream};
use table::Table;

/// Environment variable listing plugin libraries to load before discovery
/// (`/path/a.so:/path/b.so`).
pub const PLUGINS_ENV: &str = "GPUPORT_PLUGINS";

/// A loaded plugin: the backend the runtime keeps.
pub(crate) struct LoadedBackend {
    shared: Arc<Shared>,
}

impl DynBackend for LoadedBackend {
    fn kind(&self) -> BackendKind {
        self.shared.table.kind
    }
    fn dlpack_devices(&self) -> DlpackDevices {
        self.shared.table.dlpack
    }
    fn version(&self) -> String {
        self.shared.table.version.clone()
    }
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        (0..self.shared.count).map(|ordinal| self.open(ordinal)?.info()).collect()
    }
    fn open(&self, ordinal: u32) -> Result<AnyDevice> {
        let dev = PluginCalls::open(&self.shared, ordinal)?;
        Ok(device_into_any(LoadedDevice { dev, dlpack: self.shared.table.dlpack }))
    }
}

/// Held while a library is loaded and its backend added, so that two threads naming one
/// library load it once.
pub(crate) static LOADING: Mutex<()> = Mutex::new(());

/// Libraries loaded so far, by the path they were loaded from, with their backend's name:
/// a library named twice is loaded once.
static LOADED: Mutex<Vec<(PathBuf, &'static str)>> = Mutex::new(Vec::new());

/// The name of the backend already loaded from `path`, if any.
pub(crate) fn loaded_from(path: &Path) -> Option<&'static str> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    LOADED.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(p, _)| *p == path).map(|(_, n)| *n)
}

/// The backend of a validated table: initialised, its devices counted.
pub(crate) fn backend_of(table: Table) -> Result<Arc<LoadedBackend>> {
    table.initialize()?;
    let count = table.device_count()?;
    let kind = table.kind;
    Ok(Arc::new(LoadedBackend { shared: Arc::new(Shared { table, open: OpenDevices::new(kind), count }) }))
}

/// A plugin from an entry point already in this process (a plugin linked in statically,
/// or loaded by other means): its table validated and initialised.
///
/// # Safety
/// `entry` is a plugin's entry point, whose table and code stay valid for the life of the
/// process.
pub(crate) unsafe fn load_entry(entry: abi::EntryFn, name_taken: impl Fn(&str) -> bool) -> Result<Arc<LoadedBackend>> {
    // SAFETY: the caller's entry point, called as the header says.
    let api = unsafe { entry() };
    // SAFETY: the table came from the entry point and stays valid (the caller).
    let table = unsafe { Table::validate(api, name_taken) }?;
    backend_of(table)
}

/// Loads the plugin library at `path`. On success the library stays loaded for the life of
/// the process.
pub(crate) fn load(path: &Path, name_taken: impl Fn(&str) -> bool) -> Result<Arc<LoadedBackend>> {
    let shown = path.display().to_string();
    let unavailable = |reason: String| Error::BackendUnavailable { name: shown.clone(), reason };
    let unusable = |e: Error| unavailable(format!("the plugin cannot be used: {e}"));
    // Miri runs no foreign code.
    if cfg!(miri) {
        return Err(unavailable("not loaded under Miri, which cannot run foreign code".into()));
    }
    // SAFETY: loading a library runs its initialisers; a plugin library is code the user
    // asked this process to run.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| unavailable(format!("the library cannot be loaded: {}", loader_message(&e))))?;
    // SAFETY: the symbol's type is the header's `gpuport_plugin_entry_fn`.
    let entry = unsafe { library.get::<abi::EntryFn>(abi::ENTRY_SYMBOL) }
        .map_err(|_| unavailable("it exports no `gpuport_plugin_entry`: it is not a gpuport device plugin".into()))?;
    // SAFETY: the plugin's entry point, called as the header says: no arguments, returns
    // its table or NULL.
    let api = unsafe { entry() };
    // SAFETY: the table came from the entry point, and the library stays loaded while it
    // is read (an invalid one is unloaded only after).
    let table = unsafe { Table::validate(api, name_taken) }.map_err(unusable)?;
    // From `initialize` on the plugin may have started threads: it stays loaded for good.
    std::mem::forget(library);
    let backend = backend_of(table).map_err(unusable)?;
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    LOADED.lock().unwrap_or_else(|p| p.into_inner()).push((canonical, backend.shared.table.kind.name()));
    Ok(backend)
}

/// The paths of a `GPUPORT_PLUGINS` value: `:`-separated, empty entries ignored.
pub fn parse_plugin_list(value: &str) -> Vec<PathBuf> {
    value.split(':').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect()
}
