//! Folders a program names for the engines' libraries, beside where each engine looks itself.

use std::path::PathBuf;
use std::sync::Mutex;

/// Folders [`add_search_dir`] named, in order.
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Also looks in `dir` for the engines' libraries, after their sonames, when each engine
/// is first loaded — a later call has no effect on an engine already loaded: MPI's
/// standard-ABI library in it (a Python environment's `lib/`, where the `mpich` wheel
/// installs `libmpi_abi.so.1`), NCCL in its `nvidia/nccl/lib` (a package folder, where the
/// `nvidia-nccl-cu13` and `-cu12` wheels install `libnccl.so.2`) or under its
/// `python3.*/site-packages` (an environment's `lib/`). The Python module names its
/// interpreter's `lib/` and every folder of its `sys.path`, so a script finds both
/// wherever its interpreter's packages live, without the environment being activated.
pub fn add_search_dir(dir: impl Into<PathBuf>) {
    DIRS.lock().unwrap_or_else(|p| p.into_inner()).push(dir.into());
}

/// The folders named so far.
pub(crate) fn dirs() -> Vec<PathBuf> {
    DIRS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
