//! Opening an engine's library: the first of its candidates that loads and that the engine
//! accepts, kept resident (an engine's library is never unloaded under a thread it
//! started), every refused attempt recorded for the reason.

use libloading::Library;

use gpuport_vendor_kit::loading::{loader_message, open_resident};

/// The library opened, the name it was opened by, and what the engine read from it.
pub(crate) struct Opened<T> {
    pub(crate) lib: Library,
    pub(crate) name: String,
    pub(crate) accepted: T,
}

/// Opens the first of `candidates` that loads and that `accept` takes (given the library
/// and its name); otherwise one line per attempt: the loader's words, or `accept`'s.
///
/// # Safety
/// Loading a library runs its initialisers: the candidates must be libraries safe to load
/// into this process.
pub(crate) unsafe fn open_first<T>(
    candidates: &[String],
    accept: impl Fn(&Library, &str) -> Result<T, String>,
) -> Result<Opened<T>, Vec<String>> {
    let mut tried = Vec::new();
    for name in candidates {
        // SAFETY: the caller's promise about the candidates.
        let lib = match unsafe { open_resident(name) } {
            Ok(lib) => lib,
            Err(e) => {
                tried.push(format!("{name} ({})", loader_message(&e)));
                continue;
            }
        };
        match accept(&lib, name) {
            Ok(accepted) => return Ok(Opened { lib, name: name.clone(), accepted }),
            Err(why) => tried.push(why),
        }
    }
    Err(tried)
}
