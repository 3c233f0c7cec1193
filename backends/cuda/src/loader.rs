//! Finding and opening libcuda, once per process: the override variable, then versioned
//! names, then unversioned ones; every attempt is recorded with the loader's message.
//!
//! Only C function *types* gpuport calls are declared here; no Rust function is exported to
//! C. The callbacks gpuport hands the runtime live in `stream.rs` and run inside
//! `catch_unwind`, so no panic unwinds into C.

use std::ffi::c_int;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use gpuport_core::{BackendKind, Error, Result};

use crate::sys::{self, format_version, Api, Driver, Lookup, Optional};
use gpuport_vendor_kit::status::no_device_detail;

/// Variable naming an exact libcuda file.
pub const LIBRARY_ENV: &str = "GPUPORT_CUDA_LIBRARY";

/// Names tried, in order, when no path is given.
pub const DEFAULT_NAMES: &[&str] = if cfg!(windows) { &["nvcuda.dll"] } else { &["libcuda.so.1", "libcuda.so"] };

fn missing(symbol: &str, library: &str, driver_version: Option<c_int>) -> Error {
    Error::MissingSymbol {
        backend: BackendKind::Cuda,
        symbol: symbol.to_owned(),
        library: library.to_owned(),
        driver_version: driver_version.map(format_version),
    }
}

type InitFn = unsafe extern "C" fn(std::ffi::c_uint) -> sys::Status;

/// The library opened and checked, its symbols resolved, not yet initialised.
struct Opened {
    driver: Driver,
    init: InitFn,
}

/// Loads the driver from `path`, or from the default names. Not cached: use
/// [`driver`] for the process-wide instance.
pub fn load(path: Option<&Path>) -> Result<Arc<Driver>> {
    let Opened { driver, init } = open(path)?;
    let version = driver.driver_version;
    // SAFETY: cuInit(0) is the documented first call.
    let status = unsafe { init(0) };
    match status {
        sys::SUCCESS => Ok(Arc::new(driver)),
        sys::ERROR_NO_DEVICE | sys::ERROR_INVALID_DEVICE => {
            let detail = no_device_detail(&driver.api, status, &format!("driver {}", format_version(version)));
            Err(Error::NoDevice { backend: BackendKind::Cuda, detail })
        }
        _ => Err(crate::result::vendor(&driver.api, status, "cuInit")),
    }
}

/// What gpuport finds in a CUDA driver library, without initialising the driver: for
/// checking a driver on a machine without a GPU, or diagnosing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryReport {
    /// The file opened.
    pub library: String,
    /// `cuDriverGetVersion` (12020 for CUDA 12.2).
    pub driver_version: i32,
    /// How symbols are looked up: `cuGetProcAddress_v2`, `cuGetProcAddress` or `dlsym`.
    pub lookup: &'static str,
    /// Every required symbol resolved (the load would not have succeeded otherwise).
    pub required: usize,
    /// Required symbols that `cuGetProcAddress` itself does not give (found by `dlsym`).
    pub not_through_lookup: Vec<&'static str>,
}

/// Opens the driver at `path` (or the default names), resolves every required symbol and
/// reports how, without calling `cuInit`. Errors as for loading: `LibraryNotFound`,
/// `MissingSymbol`, `DriverTooOld`.
pub fn inspect_library(path: Option<&Path>) -> Result<LibraryReport> {
    let Opened { driver, .. } = open(path)?;
    let version = driver.driver_version.min(sys::ABI_VERSION);
    let not_through_lookup =
        Api::REQUIRED.iter().copied().filter(|base| driver.lookup.get(version, base).is_none()).collect();
    Ok(LibraryReport {
        library: driver.library.clone(),
        driver_version: driver.driver_version,
        lookup: driver.lookup.name(),
        required: Api::REQUIRED.len(),
        not_through_lookup,
    })
}

fn open(path: Option<&Path>) -> Result<Opened> {
    let candidates: Vec<String> = match path {
        Some(p) => vec![p.to_string_lossy().into_owned()],
        None => DEFAULT_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    // SAFETY: the candidates are libcuda names or a path the user chose for libcuda;
    // opening it runs the driver's initialisers, which is what loading a driver means.
    let (lib, library) =
        unsafe { gpuport_vendor_kit::loading::open_library(&candidates, BackendKind::Cuda, LIBRARY_ENV) }?;

    // cuInit first: a library without it is not a CUDA driver at all.
    // SAFETY: the symbols are looked up by name and only called with their documented
    // signatures below.
    let init = unsafe { lib.get::<InitFn>(b"cuInit\0") }.map(|s| *s).map_err(|_| missing("cuInit", &library, None))?;
    // SAFETY: as above.
    let get_version = unsafe { lib.get::<unsafe extern "C" fn(*mut c_int) -> sys::Status>(b"cuDriverGetVersion\0") }
        .map(|s| *s)
        .map_err(|_| missing("cuDriverGetVersion", &library, None))?;
    let mut version: c_int = 0;
    // SAFETY: cuDriverGetVersion may be called before cuInit; `version` is a valid pointer.
    let status = unsafe { get_version(&mut version) };
    if status != sys::SUCCESS {
        return Err(Error::Vendor {
            backend: BackendKind::Cuda,
            call: "cuDriverGetVersion",
            code: i64::from(status),
            name: format!("CUresult({status})"),
            message: "the driver did not report its version".into(),
        });
    }
    if version < sys::MIN_DRIVER_VERSION {
        return Err(Error::DriverTooOld {
            backend: BackendKind::Cuda,
            found: format_version(version),
            required: format_version(sys::MIN_DRIVER_VERSION),
        });
    }

    // SAFETY: documented signatures of the two versions of cuGetProcAddress.
    let lookup = unsafe {
        if let Ok(f) = lib.get(b"cuGetProcAddress_v2\0") {
            Lookup::V2(*f)
        } else if let Ok(f) = lib.get(b"cuGetProcAddress\0") {
            Lookup::V1(*f)
        } else {
            Lookup::Dlsym
        }
    };
    let api = Api::resolve_all(&lib, &lookup, version.min(sys::ABI_VERSION))
        .map_err(|symbol| missing(symbol, &library, Some(version)))?;
    let driver = Driver { lib, lookup, api, optional: Optional::default(), driver_version: version, library };
    Ok(Opened { driver, init })
}

static DRIVER: OnceLock<Result<Arc<Driver>>> = OnceLock::new();

/// Whether this process has tried to load the driver (it is loaded at most once, by the
/// first discovery or `Backend::load` that wants it — never when `GPUPORT_BACKENDS` leaves
/// the backend out).
pub fn load_attempted() -> bool {
    DRIVER.get().is_some()
}

/// The process-wide driver: loaded once, from `GPUPORT_CUDA_LIBRARY` when set, else the
/// default names. A failure is remembered and returned again.
pub fn driver() -> Result<Arc<Driver>> {
    DRIVER
        .get_or_init(|| {
            let path = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty());
            load(path.as_deref().map(Path::new))
        })
        .clone()
}
