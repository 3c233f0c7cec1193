//! Step B3: finding and opening the vendor's library, once per process —
//! `FAKEVENDOR_LIBRARY`, else the default name — resolving its one entry symbol and
//! checking the table's version and size. Every failure is an error (`LibraryNotFound`
//! with every attempt, `MissingSymbol`, `Unsupported` for another major version), never a
//! panic: discovery shows it as the backend's reason to be unavailable.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use gpuport_core::{Error, Result};
use gpuport_vendor_kit::loading::open_library;
use libloading::Library;

use crate::sys::{self, Api, GetApiFn};
use crate::KIND;

/// Variable naming an exact library file.
pub const LIBRARY_ENV: &str = "FAKEVENDOR_LIBRARY";
/// The name tried when the variable is unset.
pub const DEFAULT_NAME: &str = "libfakevendor.so";

/// The loaded runtime: its function table, and the library that holds it.
pub struct Runtime {
    /// The table (the library keeps it alive: it is never unloaded while `self` lives).
    pub api: &'static Api,
    /// The file that was opened.
    pub library: String,
    _lib: Library,
}

/// Opens the library at `path`, else `FAKEVENDOR_LIBRARY`, else [`DEFAULT_NAME`], and
/// initialises the runtime.
pub fn load(path: Option<&Path>) -> Result<Arc<Runtime>> {
    let candidates: Vec<String> = match (path, std::env::var(LIBRARY_ENV)) {
        (Some(p), _) => vec![p.display().to_string()],
        (None, Ok(p)) if !p.is_empty() => vec![p],
        _ => vec![DEFAULT_NAME.to_owned()],
    };
    // SAFETY: the candidates name this vendor's runtime, which is safe to load.
    let (lib, library) = unsafe { open_library(&candidates, KIND, LIBRARY_ENV) }?;
    // SAFETY: the entry symbol has the header's signature.
    let entry = unsafe { lib.get::<GetApiFn>(sys::ENTRY) }.map_err(|_| Error::MissingSymbol {
        backend: KIND,
        symbol: "fvGetApi".into(),
        library: library.clone(),
        driver_version: None,
    })?;
    // SAFETY: the entry takes a version and returns a table or null.
    let table = unsafe { entry(sys::API_VERSION) };
    // SAFETY: a non-null table lives as long as the library, which `Runtime` keeps open
    // (and the library is never unloaded before the process ends).
    let api: &'static Api = unsafe { table.as_ref() }.ok_or_else(|| {
        Error::unsupported(KIND, format!("{library} does not serve the fvApi version {}", sys::API_VERSION))
    })?;
    // Fields are only ever appended: a table shorter than this port's declaration lacks
    // functions the port would call.
    if (api.size as usize) < std::mem::size_of::<Api>() || api.version != sys::API_VERSION {
        return Err(Error::unsupported(
            KIND,
            format!(
                "{library} has an fvApi of {} bytes, version {}: this port needs {} bytes, version {}",
                api.size,
                api.version,
                std::mem::size_of::<Api>(),
                sys::API_VERSION
            ),
        ));
    }
    crate::result::init(api, &library)?;
    Ok(Arc::new(Runtime { api, library, _lib: lib }))
}

/// The process-wide runtime, loaded on first use (a failure is kept and reported again).
pub fn runtime() -> Result<Arc<Runtime>> {
    static RUNTIME: OnceLock<Result<Arc<Runtime>>> = OnceLock::new();
    RUNTIME.get_or_init(|| load(None)).clone()
}
