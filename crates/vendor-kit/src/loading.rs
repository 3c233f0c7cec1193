//! Opening a vendor runtime library: the first of several candidate names that loads, with
//! every failed attempt and the loader's own message recorded for `LibraryNotFound`.

use libloading::Library;

use gpuport_core::{BackendKind, Error, LoadAttempt, Result};

/// The loader's own words: libloading keeps `dlerror`'s text in the error's source.
pub fn loader_message(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(src) => src.to_string(),
        None => e.to_string(),
    }
}

/// Opens the first of `candidates` that loads; returns it with the name that worked.
///
/// # Safety
/// Loading a library runs its initialisers: the candidates must be libraries that are safe
/// to load into this process (a vendor runtime, or a test's stand-in).
pub unsafe fn open_library(
    candidates: &[String],
    backend: BackendKind,
    env_var: &'static str,
) -> Result<(Library, String)> {
    let mut tried = Vec::new();
    // Miri runs no foreign code: `dlopen` is not shimmed, and a vendor runtime could not be
    // called if it were. Every candidate is reported unloadable, with that reason, so
    // discovery says the backend is unavailable and everything else runs as on a machine
    // without the library.
    if cfg!(miri) {
        tried.extend(candidates.iter().map(|name| LoadAttempt {
            name: name.clone(),
            error: "not loaded under Miri, which cannot run foreign code".into(),
        }));
        return Err(Error::LibraryNotFound { backend, tried, env_var });
    }
    for name in candidates {
        // SAFETY: the caller vouches for the candidates.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok((lib, name.clone())),
            Err(e) => tried.push(LoadAttempt { name: name.clone(), error: loader_message(&e) }),
        }
    }
    Err(Error::LibraryNotFound { backend, tried, env_var })
}
