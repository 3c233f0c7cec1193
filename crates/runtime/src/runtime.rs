//! Run-time discovery of backends, plugin registration and device selection.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use gpuport_core::{Backend, BackendKind, DeviceId, DeviceInfo, DeviceSpec, DlpackDevices, Error, LoadOptions, Result};
use gpuport_cuda::CudaBackend;
use gpuport_host::HostBackend;
use gpuport_rocm::RocmBackend;

use gpuport_loaded::LoadedBackend;

use crate::dynamic::{AnyDevice, DynBackend};

/// Environment variable that limits discovery to a comma-separated list of backends.
pub const BACKENDS_ENV: &str = "GPUPORT_BACKENDS";
/// Environment variable naming the default device (`cuda:0`); the host when unset.
pub const DEVICE_ENV: &str = "GPUPORT_DEVICE";
/// Environment variable listing plugin libraries to load before discovery
/// (`/path/a.so:/path/b.so`).
pub const PLUGINS_ENV: &str = "GPUPORT_PLUGINS";

/// The paths of a `GPUPORT_PLUGINS` value: `:`-separated, empty entries ignored.
pub fn parse_plugin_list(value: &str) -> Vec<PathBuf> {
    value.split(':').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect()
}

fn load_as_dyn<B: Backend>(opts: &LoadOptions) -> Result<Arc<dyn DynBackend>> {
    Ok(Arc::new(B::load(opts)?))
}

/// Loads built-in backend `kind`. The built-ins are `BackendKind::BUILTIN`, the one list;
/// this match is exhaustive over it, so a new built-in kind cannot be left unloaded.
fn load_builtin(kind: BackendKind, opts: &LoadOptions) -> Result<Arc<dyn DynBackend>> {
    match kind {
        BackendKind::Host => load_as_dyn::<HostBackend>(opts),
        BackendKind::Cuda => load_as_dyn::<CudaBackend>(opts),
        BackendKind::Rocm => load_as_dyn::<RocmBackend>(opts),
        BackendKind::Plugin(name) => Err(Error::BackendUnavailable {
            name: name.to_owned(),
            reason: "a plugin is loaded by its own crate and registered with Runtime::register_plugin".into(),
        }),
    }
}

static PLUGINS: RwLock<Vec<Arc<dyn DynBackend>>> = RwLock::new(Vec::new());

/// Whether a backend can be used, and with which devices.
#[derive(Debug)]
pub enum BackendStatus {
    /// Loaded, with at least one device.
    Available {
        /// Runtime and driver versions.
        version: String,
        /// The devices.
        devices: Vec<DeviceInfo>,
    },
    /// Cannot be used; the error says why and what to do.
    Unavailable(Error),
}

/// One row of discovery: a backend and its status.
pub struct BackendReport {
    /// The backend's name (`host`, `cuda`, a plugin's name, or an unknown name given in
    /// `GPUPORT_BACKENDS`).
    pub name: String,
    /// Its status.
    pub status: BackendStatus,
    backend: Option<Arc<dyn DynBackend>>,
    /// The devices opened through this report, one slot per device: opened once, then
    /// handed out again without a lock or a call into the backend (interchange resolves a
    /// device on every exchange). They stay open while the runtime lives.
    opened: Box<[OnceLock<AnyDevice>]>,
}

impl fmt::Debug for BackendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendReport").field("name", &self.name).field("status", &self.status).finish()
    }
}

impl BackendReport {
    fn new(name: String, status: BackendStatus, backend: Option<Arc<dyn DynBackend>>) -> Self {
        let devices = match &status {
            BackendStatus::Available { devices, .. } => devices.len(),
            BackendStatus::Unavailable(_) => 0,
        };
        BackendReport { name, status, backend, opened: (0..devices).map(|_| OnceLock::new()).collect() }
    }

    /// True when the backend can be used.
    pub fn is_available(&self) -> bool {
        matches!(self.status, BackendStatus::Available { .. })
    }

    /// The DLPack device types the backend declares ([`Backend::DLPACK`]), when it is
    /// available.
    pub fn dlpack_devices(&self) -> Option<DlpackDevices> {
        self.backend.as_ref().filter(|_| self.is_available()).map(|b| b.dlpack_devices())
    }

    /// Device `ordinal` of this backend, opened on first use and kept open while the
    /// runtime lives; later calls clone the handle (no lock, no backend call). An
    /// unavailable backend or an ordinal past its devices is an error, as for
    /// [`Runtime::device`].
    pub fn open(&self, ordinal: u32) -> Result<AnyDevice> {
        match self.kept(ordinal)? {
            Some(device) => Ok(device.clone()),
            // Past the devices discovery saw: the backend names the error.
            None => self.backend()?.open(ordinal),
        }
    }

    /// Device `ordinal` as this report keeps it (see [`BackendReport::open`]), borrowed:
    /// no count is taken and no handle is moved, for a caller on a hot path that looks at
    /// the device or clones it once where it is stored. `None` for an ordinal past the
    /// devices discovery saw, which only [`BackendReport::open`] asks the backend about.
    pub fn kept(&self, ordinal: u32) -> Result<Option<&AnyDevice>> {
        let backend = self.backend()?;
        let Some(slot) = self.opened.get(ordinal as usize) else { return Ok(None) };
        if let Some(device) = slot.get() {
            return Ok(Some(device));
        }
        let device = backend.open(ordinal)?;
        // Two threads may open it at once: the backend shares one device per ordinal, and
        // the first handle stored is the one kept.
        Ok(Some(slot.get_or_init(|| device)))
    }

    /// The backend, when it is available; the error [`Runtime::device`] gives otherwise.
    fn backend(&self) -> Result<&Arc<dyn DynBackend>> {
        match (&self.status, &self.backend) {
            (BackendStatus::Available { .. }, Some(b)) => Ok(b),
            (BackendStatus::Unavailable(err), _) => {
                Err(Error::BackendUnavailable { name: self.name.clone(), reason: err.to_string() })
            }
            (BackendStatus::Available { .. }, None) => {
                Err(Error::BackendUnavailable { name: self.name.clone(), reason: "not loaded".into() })
            }
        }
    }
}

/// Options for [`Runtime::discover_with`].
#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// Only these backends (names); `None` means all.
    pub backends: Option<Vec<String>>,
    /// Plugin libraries to load first (see [`Runtime::load_plugin`]); one that cannot be
    /// loaded is reported with its reason under its file name.
    pub plugins: Vec<PathBuf>,
}

impl DiscoverOptions {
    /// Options read from the environment (`GPUPORT_BACKENDS`, `GPUPORT_PLUGINS`).
    pub fn from_env() -> Self {
        let backends = std::env::var(BACKENDS_ENV).ok().map(|v| parse_backend_list(&v));
        let plugins = std::env::var(PLUGINS_ENV).map(|v| parse_plugin_list(&v)).unwrap_or_default();
        DiscoverOptions { backends, plugins }
    }
}

/// Splits a `GPUPORT_BACKENDS` value: comma-separated, white space ignored, case-insensitive.
pub fn parse_backend_list(value: &str) -> Vec<String> {
    value.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect()
}

/// The backends of this process, discovered at run time.
pub struct Runtime {
    reports: Vec<BackendReport>,
    /// The `GPUPORT_BACKENDS` list (or options) discovery was limited to.
    only: Option<Vec<String>>,
}

impl Runtime {
    /// Tries every built-in backend and every registered plugin, as limited by
    /// `GPUPORT_BACKENDS`. Never panics: a backend that cannot be used is reported with its
    /// reason.
    pub fn discover() -> Runtime {
        Self::discover_with(&DiscoverOptions::from_env())
    }

    /// [`Runtime::discover`] with explicit options. A backend left out by the options is
    /// never loaded (its library is not even opened). The host is always present: it is
    /// the device every program can fall back on.
    pub fn discover_with(opts: &DiscoverOptions) -> Runtime {
        let wanted =
            |name: &str| name == "host" || opts.backends.as_ref().is_none_or(|list| list.iter().any(|n| n == name));
        let mut reports = Vec::new();
        for kind in BackendKind::BUILTIN {
            if wanted(kind.name()) {
                reports.push(Self::report(kind.name().to_owned(), load_builtin(kind, &LoadOptions::default())));
            }
        }
        let mut failed_plugins = Vec::new();
        for path in &opts.plugins {
            if let Err(err) = Self::load_plugin(path) {
                let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
                failed_plugins.push(BackendReport::new(name, BackendStatus::Unavailable(err), None));
            }
        }
        let plugins: Vec<Arc<dyn DynBackend>> = PLUGINS.read().unwrap_or_else(|p| p.into_inner()).clone();
        for plugin in plugins {
            let name = plugin.kind().name().to_owned();
            if wanted(&name) {
                reports.push(Self::report(name, Ok(plugin)));
            }
        }
        reports.extend(failed_plugins);
        for name in opts.backends.iter().flatten() {
            if !reports.iter().any(|r| &r.name == name) {
                reports.push(BackendReport {
                    name: name.clone(),
                    status: BackendStatus::Unavailable(Error::BackendUnavailable {
                        name: name.clone(),
                        reason: format!(
                            "{BACKENDS_ENV} names a backend this build does not have (known: {})",
                            Self::known_names().join(", ")
                        ),
                    }),
                    backend: None,
                    opened: Box::default(),
                });
            }
        }
        Runtime { reports, only: opts.backends.clone() }
    }

    fn report(name: String, loaded: Result<Arc<dyn DynBackend>>) -> BackendReport {
        let (status, backend) = match loaded {
            Err(err) => (BackendStatus::Unavailable(err), None),
            Ok(b) => match b.devices() {
                Ok(devices) if devices.is_empty() => (
                    BackendStatus::Unavailable(Error::NoDevice {
                        backend: b.kind(),
                        detail: "the backend loaded but reports no devices".into(),
                    }),
                    None,
                ),
                Ok(devices) => (BackendStatus::Available { version: b.version(), devices }, Some(b)),
                Err(err) => (BackendStatus::Unavailable(err), None),
            },
        };
        BackendReport::new(name, status, backend)
    }

    /// Names of the built-in backends and registered plugins.
    pub fn known_names() -> Vec<String> {
        let mut names: Vec<String> = BackendKind::BUILTIN.iter().map(|k| k.name().to_owned()).collect();
        let plugins = PLUGINS.read().unwrap_or_else(|p| p.into_inner());
        names.extend(plugins.iter().map(|p| p.kind().name().to_owned()));
        names
    }

    /// Loads a device plugin: a shared library exporting `gpuport_plugin_entry` (the C ABI
    /// of `gpuport_plugin.h`, in the `gpuport-plugin-abi` crate), written in C, C++ or
    /// Rust. Later [`Runtime::discover`] calls include its backend, named by its table.
    /// A library loaded before (by this path) is not loaded again.
    ///
    /// Everything the plugin hands back is validated first: a missing library or entry
    /// symbol, a null or short table, another ABI major version, a missing function, a
    /// name that clashes or cannot name a device, a failing `initialize` — each is an
    /// error naming the library, never a crash. A plugin is never unloaded.
    pub fn load_plugin(path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        // One load at a time: two threads naming one library load it once.
        let _one_at_a_time = gpuport_loaded::LOADING.lock().unwrap_or_else(|p| p.into_inner());
        if gpuport_loaded::loaded_from(path).is_some() {
            return Ok(());
        }
        let taken = |name: &str| Self::known_names().iter().any(|n| n == name);
        let backend = LoadedBackend::load_library(path, taken)?;
        Self::add_plugin(Arc::new(backend))
    }

    /// Loads a device plugin whose entry point is already in this process — a plugin
    /// linked in statically, or a table made by `gpuport_plugin_export::entry` — as
    /// [`Runtime::load_plugin`] loads one from a library, with the same validation.
    ///
    /// # Safety
    /// `entry` is a `gpuport_plugin_entry` function: it returns null or a table laid out
    /// as `gpuport_plugin.h` says, whose strings and functions stay valid for the life of
    /// the process.
    pub unsafe fn load_plugin_entry(entry: gpuport_plugin_abi::EntryFn) -> Result<()> {
        let taken = |name: &str| Self::known_names().iter().any(|n| n == name);
        // SAFETY: forwarded.
        let backend = unsafe { LoadedBackend::from_entry(entry, taken) }?;
        Self::add_plugin(Arc::new(backend))
    }

    /// Adds a backend to the ones discovery includes, unless its name is taken.
    fn add_plugin(backend: Arc<dyn DynBackend>) -> Result<()> {
        let name = backend.kind().name();
        let mut plugins = PLUGINS.write().unwrap_or_else(|p| p.into_inner());
        if BackendKind::builtin_from_name(name).is_some() || plugins.iter().any(|p| p.kind().name() == name) {
            return Err(Error::invalid_argument(format!("a backend named `{name}` is already registered")));
        }
        plugins.push(backend);
        Ok(())
    }

    /// Registers a backend implemented outside gpuport (the ext device, a vendor port).
    /// Later [`Runtime::discover`] calls include it. Its name must not clash with a
    /// built-in backend or another plugin.
    pub fn register_plugin<B: Backend>(backend: B) -> Result<()> {
        Self::add_plugin(Arc::new(backend))
    }

    /// One row per backend considered.
    pub fn reports(&self) -> &[BackendReport] {
        &self.reports
    }

    /// The report of backend `name`.
    pub fn report_for(&self, name: &str) -> Option<&BackendReport> {
        self.reports.iter().find(|r| r.name == name)
    }

    /// Every device of every available backend.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        self.reports
            .iter()
            .filter_map(|r| match &r.status {
                BackendStatus::Available { devices, .. } => Some(devices.iter().map(|d| d.id)),
                BackendStatus::Unavailable(_) => None,
            })
            .flatten()
            .collect()
    }

    /// Every device of every available backend, opened (each knows its backend:
    /// `device.id().kind`), in the order [`Runtime::device_ids`] lists them. A device that
    /// cannot be opened is left out (its backend's report names it).
    pub fn devices(&self) -> Vec<AnyDevice> {
        self.reports
            .iter()
            .filter_map(|r| match &r.status {
                BackendStatus::Available { devices, .. } => {
                    Some(devices.iter().filter_map(move |d| r.open(d.id.ordinal).ok()))
                }
                BackendStatus::Unavailable(_) => None,
            })
            .flatten()
            .collect()
    }

    /// Opens a device by selection string (`host`, `cuda:1`, `ext:0`, a plugin's `name:N`).
    /// The runtime keeps each device it opened (see [`BackendReport::open`]): later calls
    /// return the same device, and it stays open while the runtime lives.
    pub fn device(&self, spec: &str) -> Result<AnyDevice> {
        let spec = DeviceSpec::parse(spec)?;
        let report = self.report_for(&spec.backend).ok_or_else(|| Error::BackendUnavailable {
            name: spec.backend.clone(),
            reason: match &self.only {
                Some(only) if Self::known_names().contains(&spec.backend) => {
                    format!("left out by {BACKENDS_ENV}={}", only.join(","))
                }
                // Registered since this runtime's discovery: discovery is a snapshot.
                _ if Self::known_names().contains(&spec.backend) => format!(
                    "the plugin `{}` was registered after this Runtime was discovered; register plugins before \
                     Runtime::discover(), or discover again",
                    spec.backend
                ),
                // The ext device is a plugin a program registers itself.
                _ if spec.backend == "ext" => "ext is the software test device, a plugin: depend on gpuport-ext and \
                     call Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default())?) before \
                     Runtime::discover()"
                    .to_owned(),
                _ => format!("no such backend in this runtime (known: {})", Self::known_names().join(", ")),
            },
        })?;
        report.open(spec.ordinal)
    }

    /// The default device: `GPUPORT_DEVICE` when set, else the host.
    pub fn default_device(&self) -> Result<AnyDevice> {
        match std::env::var(DEVICE_ENV) {
            Ok(spec) if !spec.trim().is_empty() => self.device(spec.trim()),
            _ => self.device("host"),
        }
    }

    /// The best device to run on: `GPUPORT_DEVICE` when set (an error if it cannot be
    /// opened — a device asked for by name is never silently replaced), else device 0 of
    /// the first available GPU backend (CUDA, then ROCm), else the host.
    pub fn best_device(&self) -> Result<AnyDevice> {
        if matches!(std::env::var(DEVICE_ENV), Ok(spec) if !spec.trim().is_empty()) {
            return self.default_device();
        }
        let gpu = [BackendKind::Cuda, BackendKind::Rocm]
            .into_iter()
            .find(|kind| self.report_for(kind.name()).is_some_and(BackendReport::is_available));
        match gpu {
            Some(kind) => self.device(&format!("{}:0", kind.name())),
            None => self.device("host"),
        }
    }
}

impl fmt::Display for Runtime {
    /// A table: each backend with its devices, or the reason it is unavailable. The name
    /// columns are as wide as the longest name (a plugin's may be long), and at least 6
    /// and 8 characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name_width = self.reports.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max(6);
        let id_width = self
            .reports
            .iter()
            .filter_map(|r| match &r.status {
                BackendStatus::Available { devices, .. } => devices.iter().map(|d| d.id.to_string().len()).max(),
                BackendStatus::Unavailable(_) => None,
            })
            .max()
            .unwrap_or(0)
            .max(8);
        for report in &self.reports {
            match &report.status {
                BackendStatus::Available { version, devices } => {
                    writeln!(f, "{:<name_width$} available — {version}", report.name)?;
                    for d in devices {
                        write!(f, "  {:<id_width$} {} — ", d.id.to_string(), d.name)?;
                        match d.total_memory {
                            0 => write!(f, "memory unknown")?,
                            bytes => write!(f, "{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)?,
                        }
                        let sm = d.compute_capability.map(|(major, minor)| format!("sm_{major}{minor}"));
                        if let Some(sm) = &sm {
                            write!(f, ", {sm}")?;
                        }
                        // CUDA names its architecture by the compute capability: said once.
                        if let Some(arch) = d.arch.as_ref().filter(|a| Some(*a) != sm.as_ref()) {
                            write!(f, ", {arch}")?;
                        }
                        if let Some(n) = d.multiprocessors {
                            write!(f, ", {n} compute unit{}", if n == 1 { "" } else { "s" })?;
                        }
                        if let Some(pci) = &d.pci_bus_id {
                            write!(f, ", pci {pci}")?;
                        }
                        writeln!(f)?;
                    }
                }
                BackendStatus::Unavailable(err) => writeln!(f, "{:<name_width$} unavailable — {err}", report.name)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_widens_for_long_names() {
        let device = |kind: BackendKind, ordinal| DeviceInfo {
            id: DeviceId::new(kind, ordinal),
            name: "a device".into(),
            total_memory: 1 << 30,
            compute_capability: None,
            arch: None,
            multiprocessors: None,
            pci_bus_id: None,
            uuid: None,
        };
        let long = BackendKind::Plugin("a-plugin-with-a-long-name");
        let available = |name: &str, kind| {
            let status =
                BackendStatus::Available { version: "1".into(), devices: vec![device(kind, 0), device(kind, 1)] };
            BackendReport::new(name.into(), status, None)
        };
        let rt = Runtime {
            reports: vec![
                available("host", BackendKind::Host),
                available(long.name(), long),
                BackendReport::new("cuda".into(), BackendStatus::Unavailable(Error::invalid_argument("none")), None),
            ],
            only: None,
        };
        let table = rt.to_string();
        let lines: Vec<&str> = table.lines().collect();
        // Every row's text after its name starts in one column, however long the name.
        let after = |line: &str, marker: &str| line.find(marker).unwrap_or_else(|| panic!("{marker} in {line}"));
        let status_columns: Vec<usize> = lines
            .iter()
            .filter(|l| !l.starts_with("  "))
            .map(|l| l.find(" available").or_else(|| l.find(" unavailable")).unwrap_or_else(|| panic!("{l}")))
            .collect();
        assert!(status_columns.windows(2).all(|w| w[0] == w[1]), "{table}");
        let device_columns: Vec<usize> =
            lines.iter().filter(|l| l.starts_with("  ")).map(|l| after(l, " a device")).collect();
        assert_eq!(device_columns.len(), 4);
        assert!(device_columns.windows(2).all(|w| w[0] == w[1]), "{table}");
        // The short names keep the columns CI's checks read.
        assert!(lines.iter().any(|l| l.starts_with("cuda") && l.contains(" unavailable — ")), "{table}");
    }

    #[test]
    fn host_is_always_available() {
        let rt = Runtime::discover_with(&DiscoverOptions::default());
        assert!(rt.report_for("host").unwrap().is_available());
        assert!(rt.device_ids().contains(&DeviceId::HOST));
        assert_eq!(rt.device("host").unwrap().id(), DeviceId::HOST);
        assert_eq!(rt.device("host:0").unwrap().id(), DeviceId::HOST);
    }

    #[test]
    fn device_strings_fail_clearly() {
        let rt = Runtime::discover_with(&DiscoverOptions::default());
        assert!(matches!(rt.device("host:1"), Err(Error::DeviceNotFound { count: 1, .. })));
        assert!(matches!(rt.device("nosuch:0"), Err(Error::BackendUnavailable { .. })));
        assert!(matches!(rt.device("host:x"), Err(Error::InvalidDeviceString { .. })));
        assert!(matches!(rt.device(""), Err(Error::InvalidDeviceString { .. })));
    }

    #[test]
    fn backend_filter_limits_and_reports_unknown_names() {
        assert_eq!(parse_backend_list(" Host , ,cuda"), vec!["host", "cuda"]);
        let rt =
            Runtime::discover_with(&DiscoverOptions { backends: Some(vec!["bogus".into()]), ..Default::default() });
        assert!(rt.report_for("host").unwrap().is_available(), "the host is always present");
        assert!(rt.report_for("cuda").is_none() && rt.report_for("rocm").is_none());
        let bogus = rt.report_for("bogus").unwrap();
        assert!(!bogus.is_available());
        assert!(rt.to_string().contains("bogus  unavailable"), "{rt}");
        assert_eq!(rt.device("host").unwrap().id(), DeviceId::HOST);
        let err = rt.device("cuda:0").unwrap_err().to_string();
        assert!(err.contains("left out by GPUPORT_BACKENDS=bogus"), "{err}");
        let err = rt.device("nosuch:0").unwrap_err().to_string();
        assert!(err.contains("no such backend"), "{err}");
    }

    #[test]
    fn a_kept_device_is_the_one_open_hands_out() {
        let rt =
            Runtime::discover_with(&DiscoverOptions { backends: Some(vec!["bogus".into()]), ..Default::default() });
        let host = rt.report_for("host").unwrap();
        let kept = host.kept(0).unwrap().expect("the host's device 0 is kept");
        // Borrowed from the report's slot: the same handle every time, and the one `open`
        // clones.
        assert!(std::ptr::eq(kept, host.kept(0).unwrap().unwrap()));
        assert_eq!(kept.id(), DeviceId::HOST);
        assert_eq!(host.open(0).unwrap().id(), kept.id());
        // Past the devices discovery saw: nothing kept, and `open` asks the backend.
        assert!(host.kept(1).unwrap().is_none());
        assert!(host.open(1).is_err());
        // An unavailable backend keeps nothing and says why, as `open` does.
        let bogus = rt.report_for("bogus").unwrap();
        assert!(matches!(bogus.kept(0), Err(Error::BackendUnavailable { .. })));
        assert!(matches!(bogus.open(0), Err(Error::BackendUnavailable { .. })));
    }

    #[test]
    fn builtin_names_cannot_be_registered_twice() {
        assert!(Runtime::register_plugin(HostBackend).is_err());
    }
}
