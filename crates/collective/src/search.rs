//! Folders a program names for the engines' libraries, beside where each engine looks itself.

use std::path::PathBuf;
use std::sync::Mutex;

/// Folders [`add_search_dir`] named, in order.
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Also looks in `dir` (a Python environment's `lib/`) for the engines' libraries, after
/// their sonames, when each engine is first loaded — a later call has no effect on an
/// engine already loaded: MPI's standard-ABI library in it (where the `mpich` wheel
/// installs `libmpi_abi.so.1`), NCCL under its `python3.*/site-packages/nvidia/nccl/lib`
/// (where the `nvidia-nccl-cu13` and `-cu12` wheels install `libnccl.so.2`). The Python
/// module names its interpreter's `lib/`, so a script run by that environment's `python`
/// finds both without the environment being activated.
pub fn add_search_dir(dir: impl Into<PathBuf>) {
    DIRS.lock().unwrap_or_else(|p| p.into_inner()).push(dir.into());
}

/// The folders named so far.
pub(crate) fn dirs() -> Vec<PathBuf> {
    DIRS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
