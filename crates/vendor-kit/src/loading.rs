//! Opening a vendor runtime library: the first of several candidate names that loads, with
//! every failed attempt and the loader's own message recorded for `LibraryNotFound`.
//!
//! Every library opened here stays loaded until the process exits ([`open_resident`]):
//! vendor runtimes are not written to be unloaded and loaded again. ROCm 6.4's HIP runtime
//! (Debian's `libamdhip64.so.6`), opened, closed and opened again on a machine without an
//! AMD GPU, leaves a thread-exit destructor pointing into the unmapped first copy, and the
//! thread that loaded it crashes when it ends. A process that asks twice for a backend
//! whose device is absent does exactly that; CUDA's and MPI's libraries document no
//! unloading either, and the frameworks (PyTorch, CuPy) never close them.

use std::path::{Path, PathBuf};

use libloading::Library;

use gpuport_core::{BackendKind, Error, LoadAttempt, Result};

/// The loader's own words: libloading keeps `dlerror`'s text in the error's source.
pub fn loader_message(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(src) => src.to_string(),
        None => e.to_string(),
    }
}

/// Opens the library `name` (a path, or a name the dynamic loader searches for) so that it
/// stays loaded until the process exits, whatever handles are dropped (`RTLD_NODELETE`; see
/// the module documentation). The handle is an ordinary [`Library`]: dropping it only
/// releases the reference.
///
/// # Safety
/// As for [`Library::new`]: loading a library runs its initialisers.
pub unsafe fn open_resident(name: impl AsRef<std::ffi::OsStr>) -> std::result::Result<Library, libloading::Error> {
    #[cfg(unix)]
    {
        use libloading::os::unix;
        // SAFETY: forwarded; the flags are `Library::new`'s (`RTLD_LAZY | RTLD_LOCAL`) with
        // `RTLD_NODELETE` added.
        unsafe { unix::Library::open(Some(name.as_ref()), unix::RTLD_LAZY | unix::RTLD_LOCAL | libc::RTLD_NODELETE) }
            .map(Library::from)
    }
    #[cfg(not(unix))]
    {
        // SAFETY: forwarded.
        unsafe { Library::new(name) }
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
    // SAFETY: forwarded.
    unsafe { open_accepted_library(candidates, backend, env_var, |_| Ok(())) }
}

/// Opens the first of `candidates` that loads and that `accept` takes: a library `accept`
/// refuses (a runtime reporting a version the backend does not know) is recorded with
/// `accept`'s reason (its handle dropped; it stays resident, as every library opened here
/// does) and the next candidate is tried.
///
/// # Safety
/// As for [`open_library`]; `accept` may call the library's version getters.
pub unsafe fn open_accepted_library(
    candidates: &[String],
    backend: BackendKind,
    env_var: &'static str,
    mut accept: impl FnMut(&Library) -> std::result::Result<(), String>,
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
        match unsafe { open_resident(name) } {
            Ok(lib) => match accept(&lib) {
                Ok(()) => return Ok((lib, name.clone())),
                Err(why) => tried.push(LoadAttempt { name: name.clone(), error: why }),
            },
            Err(e) => tried.push(LoadAttempt { name: name.clone(), error: loader_message(&e) }),
        }
    }
    Err(Error::LibraryNotFound { backend, tried, env_var })
}

/// The entries of `dir` named `PREFIX` followed by a version — `cuda`, `cuda-12.9`,
/// `rocm-7.2.0`, `python3.12` (prefix `python3`), `core-7.13` — highest version first, by
/// number (`rocm-10.1.0` before `rocm-7.2.0`); names whose rest is not dotted numbers
/// (`rocm-latest`) are left out. Vendors install side by side in such folders.
pub fn newest_first(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<(Vec<u64>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(prefix)?.trim_start_matches(['-', '.']);
            let key = if rest.is_empty() {
                Vec::new()
            } else {
                rest.split('.').map(|part| part.parse().ok()).collect::<Option<Vec<u64>>>()?
            };
            Some((key, e.path()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, p)| p).collect()
}

#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn a_refused_library_is_recorded_with_the_reason_and_the_next_one_tried() {
        let candidates: Vec<String> = ["/nonexistent/libx.so", "libm.so.6", "libc.so.6"].map(String::from).to_vec();
        let mut seen = 0;
        // SAFETY: system libraries already loaded into every test process.
        let (_, chosen) = unsafe {
            open_accepted_library(&candidates, BackendKind::Rocm, "GPUPORT_HIP_LIBRARY", |_| {
                seen += 1;
                if seen == 1 {
                    Err("reports a version this backend does not know".into())
                } else {
                    Ok(())
                }
            })
        }
        .unwrap();
        assert_eq!(chosen, "libc.so.6");
        // SAFETY: as above.
        let err = unsafe {
            open_accepted_library(&candidates[..2], BackendKind::Rocm, "GPUPORT_HIP_LIBRARY", |_| Err("too new".into()))
        }
        .err()
        .unwrap();
        let Error::LibraryNotFound { tried, .. } = err else { panic!("{err}") };
        assert_eq!(tried.len(), 2);
        assert_eq!((tried[1].name.as_str(), tried[1].error.as_str()), ("libm.so.6", "too new"));
    }
}
