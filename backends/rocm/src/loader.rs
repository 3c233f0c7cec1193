//! Finding and opening libamdhip64, once per process: `GPUPORT_HIP_LIBRARY`, then
//! `libamdhip64.so.7`, `.so.6`, `.so.5`, a future `.so.8`, then `libamdhip64.so` — by
//! soname, then in the ROCm folders (`locate.rs`); every attempt recorded. A library that
//! reports a HIP major gpuport does not know (5–7) is refused with that reason and the
//! search goes on.
//!
//! Only C function *types* gpuport calls are declared here; no Rust function is exported to
//! C. The callbacks gpuport hands the runtime live in `stream.rs` and run inside
//! `catch_unwind`, so no panic unwinds into C.

use std::ffi::{c_int, c_uint};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use gpuport_core::{BackendKind, Error, Result};

use crate::result::vendor;
use crate::sys::{self, Api, Runtime};
use gpuport_vendor_kit::status::no_device_detail;

/// Variable naming an exact libamdhip64 file.
pub const LIBRARY_ENV: &str = "GPUPORT_HIP_LIBRARY";

/// Names tried, in order, when no path is given (by soname, then in each ROCm folder).
/// `.so.8` is taken only when the runtime in it reports a HIP major gpuport knows.
pub const DEFAULT_NAMES: &[&str] =
    &["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so.8", "libamdhip64.so"];

/// Why a runtime reporting `version` is refused, if it is: gpuport knows HIP 5, 6 and 7
/// (ROCm 5.x to 7.x, and ROCm 10, whose runtime is 7.1x).
pub fn unknown_major(version: c_int) -> Option<String> {
    let major = (version / 10_000_000).max(0) as u32;
    (!sys::KNOWN_MAJORS.contains(&major)).then(|| {
        format!(
            "reports HIP runtime {}, a major version gpuport does not know ({}–{}); its ABI may differ",
            format_version(version),
            sys::KNOWN_MAJORS.start(),
            sys::KNOWN_MAJORS.end()
        )
    })
}

/// The version a just-opened library reports, before `hipInit`; `None` when it has no
/// `hipRuntimeGetVersion` or the call fails (the load then says why).
fn reported_version(lib: &libloading::Library) -> Option<c_int> {
    // SAFETY: looked up by name; called with its documented signature, which may be
    // called before hipInit, with a valid out-pointer.
    let get = unsafe { lib.get::<VersionFn>(b"hipRuntimeGetVersion\0") }.ok()?;
    let mut v = 0;
    // SAFETY: as above.
    (unsafe { get(&mut v) } == sys::SUCCESS).then_some(v)
}

/// `50221153` → `5.2.21153` (HIP's `major * 10^7 + minor * 10^5 + patch`).
pub fn format_version(v: c_int) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

fn missing(symbol: &str, library: &str, version: Option<c_int>) -> Error {
    Error::MissingSymbol {
        backend: BackendKind::Rocm,
        symbol: symbol.to_owned(),
        library: library.to_owned(),
        driver_version: version.map(format_version),
    }
}

type VersionFn = unsafe extern "C" fn(*mut c_int) -> sys::Status;

type InitFn = unsafe extern "C" fn(c_uint) -> sys::Status;

/// What gpuport finds in a HIP runtime library, without initialising it: for checking a
/// runtime on a machine without an AMD GPU (CI checks Debian's 5.2 and sid's 6.4), or
/// diagnosing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryReport {
    /// The file opened.
    pub library: String,
    /// `hipRuntimeGetVersion` (e.g. 60443484 for 6.4.43484).
    pub runtime_version: i32,
    /// How symbols are looked up: `hipGetProcAddress` (ROCm ≥ 6.2) or `dlsym`.
    pub lookup: &'static str,
    /// Every required symbol resolved (the load would not have succeeded otherwise).
    pub required: usize,
    /// Required symbols `hipGetProcAddress` does not give (found by `dlsym`); all of them
    /// when the runtime has no `hipGetProcAddress`.
    pub not_through_lookup: Vec<&'static str>,
    /// What `hipGetProcAddress` answers when it gives nothing (`hipErrorNoDevice` from
    /// ROCm 6.4 and HIP 7.2 on a machine without an AMD GPU); `None` when it gives
    /// `hipMalloc` or is absent.
    pub lookup_refusal: Option<String>,
    /// The `hipMemoryType` numbering pointer attributes are decoded with (5 or 6).
    pub memory_type_numbering: u32,
    /// Where the architecture name is read: `hipGetDevicePropertiesR0600`,
    /// `hipGetDeviceProperties` (ROCm 5's layout), or `None` when neither resolves.
    pub device_properties: Option<&'static str>,
    /// Whether host callbacks use `hipLaunchHostFunc` (else `hipStreamAddCallback`).
    pub launch_host_func: bool,
    /// Whether stream-ordered allocation (`hipMallocAsync` / `hipFreeAsync`) resolves.
    pub stream_ordered_alloc: bool,
    /// Whether `hipMemGetAddressRange` resolves (imports are then checked against the
    /// allocation they claim).
    pub address_range: bool,
}

/// Opens the runtime at `path` (or the default names), resolves every required symbol and
/// reports the paths gpuport will take with it, without calling `hipInit`.
pub fn inspect_library(path: Option<&Path>) -> Result<LibraryReport> {
    let (rt, _init) = open(path)?;
    let device_properties = match (rt.major() >= 6, rt.device_properties_r0600(), rt.device_properties()) {
        (true, Some(_), _) => Some("hipGetDevicePropertiesR0600"),
        (_, _, Some(_)) => Some("hipGetDeviceProperties"),
        _ => None,
    };
    Ok(LibraryReport {
        library: rt.library.clone(),
        runtime_version: rt.runtime_version,
        lookup: if rt.gpa.is_some() { "hipGetProcAddress" } else { "dlsym" },
        required: Api::REQUIRED.len(),
        not_through_lookup: Api::REQUIRED
            .iter()
            .copied()
            .filter(|name| rt.gpa.and_then(|gpa| sys::through_proc_address(gpa, rt.runtime_version, name)).is_none())
            .collect(),
        lookup_refusal: rt
            .gpa
            .map(|gpa| sys::proc_address_status(gpa, rt.runtime_version, c"hipMalloc"))
            .filter(|&status| status != sys::SUCCESS)
            .map(|status| crate::result::describe(&rt.api, status).0),
        memory_type_numbering: if rt.major() >= 6 { 6 } else { 5 },
        device_properties,
        launch_host_func: rt.launch_host_func().is_some(),
        stream_ordered_alloc: rt.malloc_async().is_some() && rt.free_async().is_some(),
        address_range: rt.mem_get_address_range().is_some(),
    })
}

/// Loads the runtime from `path`, or from the default names. Not cached: use [`runtime`]
/// for the process-wide instance.
pub fn load(path: Option<&Path>) -> Result<Arc<Runtime>> {
    let (rt, init) = open(path)?;
    let rv = rt.runtime_version;

    // SAFETY: hipInit(0) is the documented first call. Without a device the Debian runtime
    // answers hipErrorInvalidDevice here and hipErrorNoDevice from hipGetDeviceCount.
    let status = unsafe { init(0) };
    let mut count: c_int = 0;
    // SAFETY: valid out-pointer.
    let count_status = unsafe { (rt.api.hipGetDeviceCount)(&mut count) };
    let no_device = |status| {
        let detail = no_device_detail(&rt.api, status, &format!("runtime {}", format_version(rv)));
        Err(Error::NoDevice { backend: BackendKind::Rocm, detail })
    };
    match (status, count_status) {
        (sys::SUCCESS, sys::SUCCESS) if count > 0 => Ok(Arc::new(rt)),
        (_, sys::ERROR_NO_DEVICE) | (sys::ERROR_NO_DEVICE, _) => no_device(sys::ERROR_NO_DEVICE),
        (sys::SUCCESS | sys::ERROR_INVALID_DEVICE, sys::SUCCESS) => no_device(sys::ERROR_NO_DEVICE),
        (sys::SUCCESS, other) => Err(vendor(&rt.api, other, "hipGetDeviceCount")),
        (other, _) => Err(vendor(&rt.api, other, "hipInit")),
    }
}

static RUNTIME: OnceLock<Result<Arc<Runtime>>> = OnceLock::new();

/// Whether this process has tried to load the runtime (it is loaded at most once, by the
/// first discovery or `Backend::load` that wants it — never when `GPUPORT_BACKENDS` leaves
/// the backend out).
pub fn load_attempted() -> bool {
    RUNTIME.get().is_some()
}

/// The process-wide runtime: loaded once, from `GPUPORT_HIP_LIBRARY` when set, else the
/// default names. A failure is remembered and returned again.
pub fn runtime() -> Result<Arc<Runtime>> {
    RUNTIME
        .get_or_init(|| {
            let path = std::env::var_os(LIBRARY_ENV).filter(|p| !p.is_empty());
            load(path.as_deref().map(Path::new))
        })
        .clone()
}

/// Opens the library, checks it is a HIP runtime and resolves the required symbols.
fn open(path: Option<&Path>) -> Result<(Runtime, InitFn)> {
    let candidates: Vec<String> = match path {
        Some(p) => vec![p.to_string_lossy().into_owned()],
        None => crate::locate::library_candidates(DEFAULT_NAMES),
    };
    let accept = |lib: &libloading::Library| match reported_version(lib).and_then(unknown_major) {
        Some(why) => Err(why),
        None => Ok(()),
    };
    // SAFETY: the candidates are HIP runtime names or a path the user chose for it; loading
    // runs the runtime's initialisers, which is what loading a runtime means.
    let (lib, library) = unsafe {
        gpuport_vendor_kit::loading::open_accepted_library(&candidates, BackendKind::Rocm, LIBRARY_ENV, accept)
    }?;

    // hipInit and the version getters first: without them the file is not a HIP runtime.
    // SAFETY: looked up by name; called only with their documented signatures.
    let init =
        unsafe { lib.get::<InitFn>(b"hipInit\0") }.map(|s| *s).map_err(|_| missing("hipInit", &library, None))?;
    // SAFETY: as above.
    let runtime_version = unsafe { lib.get::<VersionFn>(b"hipRuntimeGetVersion\0") }
        .map(|s| *s)
        .map_err(|_| missing("hipRuntimeGetVersion", &library, None))?;
    // SAFETY: as above.
    let driver_version = unsafe { lib.get::<VersionFn>(b"hipDriverGetVersion\0") }
        .map(|s| *s)
        .map_err(|_| missing("hipDriverGetVersion", &library, None))?;
    let (mut rv, mut dv) = (0, 0);
    // SAFETY: both may be called before hipInit; valid out-pointers. A failure leaves 0.
    unsafe {
        let _ = runtime_version(&mut rv);
        let _ = driver_version(&mut dv);
    }
    let gpa = sys::get_proc_address(&lib);
    let api = Api::resolve_all(&lib, gpa, rv).map_err(|symbol| missing(symbol, &library, Some(rv)))?;
    let rt = Runtime::new(lib, gpa, api, rv, dv, library);
    Ok((rt, init))
}
