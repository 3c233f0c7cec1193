//! NCCL (NVIDIA) and RCCL (AMD, NCCL's C API under `librccl.so.1`), found and loaded at run
//! time: the library opened (and kept resident, as every vendor library), `ncclGetVersion`
//! read first, every other call resolved by name when first asked for and kept
//! ([`Loaded::address`]). A call the loaded version lacks makes its feature alone
//! unsupported, named with the version that has it ([`Loaded::lacks`]); a missing library,
//! or one without `ncclGetVersion`, makes the engine unavailable, with every attempt named.
//!
//! [`Communicator::init_all`](crate::Communicator::init_all) and
//! [`Communicator::init_rank`](crate::Communicator::init_rank) make communicators on them
//! ([`comm`], from a [`unique_id`]); [`collective`] queues their collectives on gpuport
//! streams and [`flight`] follows each to its end.

pub(crate) mod calls;
pub(crate) mod collective;
pub(crate) mod comm;
mod entries;
pub(crate) mod flight;
pub(crate) mod group;
pub(crate) mod unique_id;
mod version;

use std::ffi::{c_int, c_void, OsString};
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::OnceLock;

use gpuport_core::{Error, Result};
use libloading::Library;

use entries::{Entry, ENTRIES, GET_VERSION};
pub(crate) use version::Version;

/// The variable naming the NCCL library to load (nothing else is tried when it is set).
pub const NCCL_LIBRARY_ENV: &str = "GPUPORT_NCCL_LIBRARY";
/// The variable naming the RCCL library to load (nothing else is tried when it is set).
pub const RCCL_LIBRARY_ENV: &str = "GPUPORT_RCCL_LIBRARY";

/// Which of the two engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    Nccl,
    Rccl,
}

impl Flavour {
    pub(crate) const ALL: [Flavour; 2] = [Flavour::Nccl, Flavour::Rccl];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Flavour::Nccl => "NCCL",
            Flavour::Rccl => "RCCL",
        }
    }

    const fn library_env(self) -> &'static str {
        match self {
            Flavour::Nccl => NCCL_LIBRARY_ENV,
            Flavour::Rccl => RCCL_LIBRARY_ENV,
        }
    }

    /// How a user gets the library.
    const fn advice(self) -> &'static str {
        match self {
            Flavour::Nccl => "install NCCL (PyPI's nvidia-nccl-cu13 or nvidia-nccl-cu12, or NVIDIA's libnccl2 package)",
            Flavour::Rccl => "install RCCL (ROCm's rccl, or Debian's librccl1)",
        }
    }

    /// The call's name in this engine.
    const fn symbol(self, entry: &Entry) -> &'static str {
        match self {
            Flavour::Nccl => entry.nccl,
            Flavour::Rccl => entry.rccl,
        }
    }
}

/// The NCCL soname, as NVIDIA's packages and the PyPI wheels ship it.
const NCCL_SONAME: &str = "libnccl.so.2";

/// The names tried for `flavour`, in order: its variable's value alone when set; else, for
/// NCCL, the soname (the dynamic loader's search) and then where the PyPI wheels put it in
/// the active Python environment and the folders [`add_search_dir`](crate::add_search_dir)
/// named (`site-packages/nvidia/nccl/lib`, which no loader path names: PyTorch finds it
/// through its own run path); for RCCL, the soname and then ROCm's
/// installation folders.
/// `var` reads the environment.
pub(crate) fn candidates(flavour: Flavour, var: impl Fn(&str) -> Option<OsString>) -> Vec<String> {
    if let Some(path) = var(flavour.library_env()) {
        return vec![path.to_string_lossy().into_owned()];
    }
    match flavour {
        Flavour::Nccl => {
            let mut out = vec![NCCL_SONAME.to_owned()];
            let prefixes =
                ["VIRTUAL_ENV", "CONDA_PREFIX"].into_iter().filter_map(var).map(|p| PathBuf::from(p).join("lib"));
            for lib in prefixes.chain(crate::search::dirs()) {
                for found in wheel_libraries(&lib) {
                    if !out.contains(&found) {
                        out.push(found);
                    }
                }
            }
            out
        }
        Flavour::Rccl => gpuport_rocm::library_candidates(gpuport_rocm::RCCL_NAMES),
    }
}

/// `libnccl.so.2` of the NCCL wheel under `dir`: `dir` a package folder (`site-packages`,
/// `dist-packages`: `nvidia/nccl/lib` in it) or a Python environment's `lib/` (then in each
/// of its `python3.*/site-packages`).
fn wheel_libraries(dir: &std::path::Path) -> Vec<String> {
    let in_packages = |packages: std::path::PathBuf| packages.join("nvidia/nccl/lib").join(NCCL_SONAME);
    let mut places = vec![in_packages(dir.to_path_buf())];
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut versions: Vec<std::path::PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| in_packages(e.path().join("site-packages")))
            .collect();
        versions.sort();
        places.extend(versions);
    }
    places.into_iter().filter(|p| p.is_file()).map(|p| p.to_string_lossy().into_owned()).collect()
}

/// A loaded NCCL or RCCL.
pub(crate) struct Loaded {
    pub(crate) flavour: Flavour,
    /// Where it was found.
    pub(crate) library: String,
    /// What `ncclGetVersion` says.
    pub(crate) version: Version,
    /// The engine and its version (`NCCL 2.32.3`).
    pub(crate) version_line: String,
    lib: Library,
    /// Each call's address once asked for (`0`: the library lacks it).
    addresses: [OnceLock<usize>; ENTRIES.len()],
}

impl Loaded {
    /// The address of the call [`ENTRIES`]`[index]` names, resolved the first time it is
    /// asked for; `EngineUnsupported` naming the feature and the version that has it when
    /// this library lacks it.
    pub(crate) fn address(&self, index: usize) -> Result<NonNull<c_void>> {
        let entry = &ENTRIES[index];
        let addr = *self.addresses[index].get_or_init(|| {
            let mut name = self.flavour.symbol(entry).as_bytes().to_vec();
            name.push(0);
            // SAFETY: only the address is taken here; it is called as its C signature by
            // the code that asks for it.
            unsafe { self.lib.get::<*mut c_void>(name.as_slice()) }.map_or(0, |s| *s as usize)
        });
        NonNull::new(addr as *mut c_void).ok_or_else(|| self.unsupported(entry))
    }

    fn unsupported(&self, entry: &Entry) -> Error {
        let (name, flavour, symbol) = (self.flavour.name(), self.flavour, self.flavour.symbol(entry));
        let what = match flavour {
            Flavour::Nccl => format!(
                "{} ({symbol}, from NCCL {}; {} at {} is {name} {})",
                entry.feature, entry.since, name, self.library, self.version
            ),
            Flavour::Rccl => format!(
                "{} ({symbol}; {} at {}, for NCCL's API {}, lacks it)",
                entry.feature, name, self.library, self.version
            ),
        };
        Error::EngineUnsupported { engine: name, what }
    }

    /// Every feature some call of which this library lacks, each once, with why.
    pub(crate) fn lacks(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (index, entry) in ENTRIES.iter().enumerate() {
            if let Err(e) = self.address(index) {
                let line = match e {
                    Error::EngineUnsupported { what, .. } => what,
                    other => other.to_string(),
                };
                if !out.iter().any(|l| l.starts_with(&format!("{} (", entry.feature))) {
                    out.push(line);
                }
            }
        }
        out
    }
}

/// `ncclGetVersion`'s C signature.
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;

/// Opens the first of `candidates` that loads and reads its version; the reason names every
/// attempt when none does.
pub(crate) fn load(flavour: Flavour, candidates: &[String]) -> Result<Loaded> {
    let name = flavour.name();
    // SAFETY: loading NCCL or RCCL runs their initialisers, which only set up their own
    // state (the GPU runtime is reached on the first communicator).
    let opened = unsafe {
        crate::library::open_first(candidates, |lib, candidate| {
            read_version(lib).map_err(|why| format!("{candidate} ({why})"))
        })
    };
    match opened {
        Ok(found) => {
            let addresses = [const { OnceLock::new() }; ENTRIES.len()];
            let version_line = format!("{name} {}", found.accepted);
            Ok(Loaded {
                flavour,
                library: found.name,
                version: found.accepted,
                version_line,
                lib: found.lib,
                addresses,
            })
        }
        Err(tried) => Err(Error::EngineUnavailable {
            engine: name,
            reason: format!(
                "no {name} library loaded (tried {}); {} or set {}",
                tried.join("; "),
                flavour.advice(),
                flavour.library_env()
            ),
        }),
    }
}

/// The version `ncclGetVersion` reports, or why there is none.
fn read_version(lib: &Library) -> std::result::Result<Version, String> {
    let symbol = format!("{}\0", ENTRIES[GET_VERSION].nccl);
    // SAFETY: `ncclGetVersion` is `ncclResult_t ncclGetVersion(int *version)` in NCCL and RCCL.
    let get = match unsafe { lib.get::<GetVersion>(symbol.as_bytes()) } {
        Ok(f) => *f,
        Err(_) => return Err("no ncclGetVersion: not an NCCL or RCCL library".into()),
    };
    let mut code: c_int = 0;
    // SAFETY: one writable int; the call needs no initialisation and touches no device.
    let status = unsafe { get(&mut code) };
    if status != 0 {
        return Err(format!("ncclGetVersion failed with status {status}"));
    }
    Version::from_code(code).ok_or_else(|| format!("ncclGetVersion gave {code}, no NCCL 2 version"))
}

/// The engine as this process finds it, loaded once.
pub(crate) fn loaded(flavour: Flavour) -> Result<&'static Loaded> {
    static ENGINES: [OnceLock<Result<Loaded>>; 2] = [const { OnceLock::new() }; 2];
    let slot = &ENGINES[flavour as usize];
    slot.get_or_init(|| load(flavour, &candidates(flavour, |v| std::env::var_os(v)))).as_ref().map_err(Clone::clone)
}

#[cfg(test)]
mod tests;
