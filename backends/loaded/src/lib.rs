//! gpuport's backend for device plugins loaded from shared libraries: a library exporting
//! `gpuport_plugin_entry`, whose table (`gpuport_plugin.h`, the `gpuport-plugin-abi`
//! crate) the vendor kit drives as it drives CUDA and ROCm. The runtime depends on it:
//! `Runtime::load_plugin(path)` and `GPUPORT_PLUGINS` load libraries through
//! [`LoadedBackend::load_library`]; a loaded plugin is a backend like any other, named by
//! its table, its devices `BackendKind::Plugin(name)`.
//!
//! One backend type serves every loaded library: [`LoadedBackend`] and its
//! [`LoadedDevice`], [`LoadedStream`] and [`LoadedEvent`] get the `Device`, `Stream` and
//! `Event` traits from the vendor kit's macros, as CUDA's and ROCm's handles do. Since two
//! libraries' handles share these types, the kit checks a handle's backend (its kind)
//! wherever one handle is given another (a stream recording an event, a device asked
//! about a peer): one library's handle never reaches another library's table.
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
//! | `faults` | the breaches of its contract gpuport checks for: host functions run wrongly, addresses handed out misaligned or twice |
//! | `stream_handle` | a stream's handle, with the progress counters a query reads |
//! | `handles` | the device, stream and event types, over the kit's |

mod calls;
mod faults;
mod handles;
mod result;
mod stream_handle;
mod table;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpuport_core::{Backend, BackendKind, DeviceInfo, DlDeviceType, DlpackDevices, Error, LoadOptions, Result};
use gpuport_plugin_abi as abi;
use gpuport_vendor_kit::loading::loader_message;
use gpuport_vendor_kit::OpenDevices;

use calls::{PluginCalls, Shared};
use faults::Faults;
pub use handles::{LoadedDevice, LoadedEvent, LoadedStream};
use table::Table;

/// One loaded plugin library: its validated table, initialised, and its devices.
pub struct LoadedBackend {
    shared: Arc<Shared>,
}

impl Backend for LoadedBackend {
    /// The family every loaded library belongs to; each library names its own backend,
    /// which [`Backend::kind`] answers (and its handles carry).
    const KIND: BackendKind = BackendKind::Plugin("loaded");
    /// DLPack's type for devices of no listed vendor; each library declares its own, which
    /// [`Backend::dlpack_devices`] answers.
    const DLPACK: DlpackDevices = DlpackDevices { device: DlDeviceType::EXT_DEV, pinned_host: None, managed: None };
    type Device = LoadedDevice;
    type Stream = LoadedStream;
    type Event = LoadedEvent;

    /// Loads the plugin library named by `opts.library_path` (required: a loaded plugin is
    /// found by its path, never searched for).
    fn load(opts: &LoadOptions) -> Result<Self> {
        let path = opts.library_path.as_deref().ok_or_else(|| {
            Error::invalid_argument("a device plugin is loaded from its library's path (LoadOptions::library_path)")
        })?;
        Self::load_library(path, |_| false)
    }
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
        (0..self.shared.count).map(|ordinal| gpuport_core::Device::info(&self.open(ordinal)?)).collect()
    }
    fn open(&self, ordinal: u32) -> Result<LoadedDevice> {
        PluginCalls::open(&self.shared, ordinal).map(LoadedDevice)
    }
}

/// Held while a library is loaded and its backend added, so that two threads naming one
/// library load it once.
pub static LOADING: Mutex<()> = Mutex::new(());

/// Libraries loaded so far, by the path they were loaded from, with their backend's name:
/// a library named twice is loaded once.
static LOADED: Mutex<Vec<(PathBuf, &'static str)>> = Mutex::new(Vec::new());

/// The name of the backend already loaded from `path`, if any.
pub fn loaded_from(path: &Path) -> Option<&'static str> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    LOADED.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(p, _)| *p == path).map(|(_, n)| *n)
}

/// The most devices gpuport accepts of one plugin. Discovery opens every device a
/// plugin reports; a count beyond this is refused as a broken count rather than believed.
pub const MAX_PLUGIN_DEVICES: u32 = 1024;

/// Environment variable: seconds a plugin's `initialize` may take before the plugin is
/// reported unavailable and discovery goes on without it (default
/// [`DEFAULT_INIT_TIMEOUT`]).
pub const INIT_TIMEOUT_ENV: &str = "GPUPORT_PLUGIN_INIT_TIMEOUT";

/// How long a plugin's `initialize` may take by default.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The backend of a validated table: initialised (within the time allowed), its devices
/// counted.
fn backend_of(table: Table) -> Result<LoadedBackend> {
    initialize_within(&table, init_timeout()?)?;
    let count = table.device_count()?;
    if count > MAX_PLUGIN_DEVICES {
        return Err(Error::invalid_argument(format!(
            "it reports {count} devices, more than the {MAX_PLUGIN_DEVICES} gpuport accepts of a plugin"
        )));
    }
    let kind = table.kind;
    let faults = Faults::new(kind);
    Ok(LoadedBackend { shared: Arc::new(Shared { table, open: OpenDevices::new(kind), count, faults }) })
}

/// The time a plugin's `initialize` may take: [`INIT_TIMEOUT_ENV`], else the default.
fn init_timeout() -> Result<Duration> {
    match std::env::var(INIT_TIMEOUT_ENV) {
        Err(_) => Ok(DEFAULT_INIT_TIMEOUT),
        Ok(v) => {
            v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0).map(Duration::from_secs_f64).ok_or_else(
                || Error::invalid_argument(format!("{INIT_TIMEOUT_ENV}={v:?} is not a positive number of seconds")),
            )
        }
    }
}

/// Runs the plugin's `initialize` on a thread of its own and waits at most `timeout` for
/// it: one that does not return in time makes the plugin unavailable, and its thread is
/// left to finish (or not) on its own — the plugin stays loaded and is never called again.
fn initialize_within(table: &Table, timeout: Duration) -> Result<()> {
    /// The table, for the initializing thread.
    struct Sent(Table);
    // SAFETY: the header allows every call of the table from any thread; the copy holds
    // function pointers and the plugin's static strings.
    unsafe impl Send for Sent {}
    let (tx, rx) = std::sync::mpsc::channel();
    let sent = Sent(table.clone());
    std::thread::Builder::new()
        .name(format!("gpuport {} initialize", table.kind))
        .spawn(move || {
            let sent = sent;
            // The receiver may be gone (the wait timed out): nobody is told.
            let _ = tx.send(sent.0.initialize());
        })
        .map_err(|e| Error::invalid_argument(format!("no thread to initialize it on: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(_) => Err(Error::invalid_argument(format!(
            "its initialize did not return within {:.1} s ({INIT_TIMEOUT_ENV}); it is left loaded and unused",
            timeout.as_secs_f64()
        ))),
    }
}

impl LoadedBackend {
    /// A plugin from an entry point already in this process (a plugin linked in statically,
    /// or loaded by other means): its table validated and initialised.
    ///
    /// # Safety
    /// `entry` is a plugin's entry point, whose table and code stay valid for the life of the
    /// process.
    pub unsafe fn from_entry(entry: abi::EntryFn, name_taken: impl Fn(&str) -> bool) -> Result<Self> {
        // SAFETY: the caller's entry point, called as the header says.
        let api = unsafe { entry() };
        // SAFETY: the table came from the entry point and stays valid (the caller).
        let table = unsafe { Table::validate(api, name_taken) }?;
        backend_of(table)
    }

    /// Loads the plugin library at `path`; `name_taken` says which backend names are in
    /// use already (the table's name must be new). On success the library stays loaded for
    /// the life of the process, and [`loaded_from`] names its backend.
    pub fn load_library(path: &Path, name_taken: impl Fn(&str) -> bool) -> Result<Self> {
        let shown = path.display().to_string();
        let unavailable = |reason: String| Error::BackendUnavailable { name: shown.clone(), reason };
        let unusable = |e: Error| unavailable(format!("the plugin cannot be used: {e}"));
        // Miri runs no foreign code.
        if cfg!(miri) {
            return Err(unavailable("not loaded under Miri, which cannot run foreign code".into()));
        }
        // A FIFO, a directory or a device node would make the loader block or fail obscurely:
        // only a regular file (a bare soname, searched by the loader, is not looked at here).
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.is_file() {
                return Err(unavailable(format!("it is not a regular file ({})", file_type_name(&meta.file_type()))));
            }
        }
        // SAFETY: loading a library runs its initialisers; a plugin library is code the user
        // asked this process to run.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| unavailable(format!("the library cannot be loaded: {}", loader_message(&e))))?;
        // SAFETY: the symbol's type is the header's `gpuport_plugin_entry_fn`.
        let entry = unsafe { library.get::<abi::EntryFn>(abi::ENTRY_SYMBOL) }.map_err(|_| {
            unavailable("it exports no `gpuport_plugin_entry`: it is not a gpuport device plugin".into())
        })?;
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
}

/// What kind of file `ty` is, in words.
fn file_type_name(ty: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ty.is_fifo() {
            return "a FIFO";
        }
        if ty.is_socket() {
            return "a socket";
        }
        if ty.is_block_device() || ty.is_char_device() {
            return "a device node";
        }
    }
    if ty.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}
