//! Where ROCm installs its libraries, for the HIP runtime and for the libraries beside it
//! (`libhiprtc`, `librccl`): first the bare sonames (the dynamic loader's own search:
//! `LD_LIBRARY_PATH`, its cache, the system folders, where distributions install them),
//! then the ROCm installation folders AMD's installers use — `$ROCM_PATH`, `$HIP_PATH`,
//! `/opt/rocm`, then each versioned `/opt/rocm-X.Y.Z`, newest first — in each its `lib`
//! (ROCm 5 to 7), `lib64`, and the `core-*/lib` folders of ROCm 10's layout, where the HIP 7
//! runtime lives in a component folder (`core-7.13/lib`), newest first.

use std::path::{Path, PathBuf};

use gpuport_vendor_kit::loading::newest_first;

/// The sonames of the HIP runtime compiler, newest first: its own library from ROCm 5.6
/// (`.so.6`) and in HIP 7 (`.so.7`); ROCm 5.2's runtime exports the `hiprtc*` functions
/// itself, HIP 7's no longer does.
pub const HIPRTC_NAMES: &[&str] = &["libhiprtc.so.7", "libhiprtc.so.6"];
/// The soname of RCCL (NCCL's API for AMD GPUs).
pub const RCCL_NAMES: &[&str] = &["librccl.so.1"];

/// The default install folder of AMD's installers.
const OPT_ROCM: &str = "/opt/rocm";

/// The candidates for a library known by `sonames` (most wanted first): the bare names,
/// then every file of those names in the ROCm folders that exist here.
pub fn library_candidates(sonames: &[&str]) -> Vec<String> {
    candidates_in(sonames, &roots())
}

/// [`library_candidates`] with the installation roots given.
fn candidates_in(sonames: &[&str], roots: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = sonames.iter().map(|s| s.to_string()).collect();
    for dir in library_folders(roots) {
        for name in sonames {
            let path = dir.join(name);
            if path.is_file() {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// The ROCm installation roots, in the order they are searched, each once.
fn roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["ROCM_PATH", "HIP_PATH"]
        .iter()
        .filter_map(|var| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from))
        .collect();
    roots.push(PathBuf::from(OPT_ROCM));
    roots.extend(newest_first(Path::new("/opt"), "rocm-"));
    let mut seen = Vec::new();
    roots.retain(|r| {
        let key = std::fs::canonicalize(r).unwrap_or_else(|_| r.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    roots
}

/// The library folders of every root that exist.
fn library_folders(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        let mut dirs = vec![root.join("lib"), root.join("lib64")];
        dirs.extend(newest_first(root, "core-").into_iter().map(|c| c.join("lib")));
        out.extend(dirs.into_iter().filter(|d| d.is_dir()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_folders_sort_by_number_not_by_text() {
        let dir = std::env::temp_dir().join(format!("gpuport-locate-{}", std::process::id()));
        for name in ["rocm-6.4.3", "rocm-7.2.0", "rocm-10.1.0", "rocm-latest", "other"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        let found: Vec<String> =
            newest_first(&dir, "rocm-").iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(found, ["rocm-10.1.0", "rocm-7.2.0", "rocm-6.4.3"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rocm_10_layout_is_searched_in_its_component_folder() {
        let root = std::env::temp_dir().join(format!("gpuport-rocm10-{}", std::process::id()));
        for dir in ["core-7.9/lib", "core-7.13/lib", "lib"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("core-7.13/lib/libamdhip64.so.7"), b"").unwrap();
        std::fs::write(root.join("core-7.9/lib/libamdhip64.so.7"), b"").unwrap();
        let found = candidates_in(&["libamdhip64.so.7", "libamdhip64.so.6"], std::slice::from_ref(&root));
        let newest = root.join("core-7.13/lib/libamdhip64.so.7").to_string_lossy().into_owned();
        let older = root.join("core-7.9/lib/libamdhip64.so.7").to_string_lossy().into_owned();
        assert_eq!(&found[..2], ["libamdhip64.so.7", "libamdhip64.so.6"], "bare sonames first");
        let at = |p: &str| found.iter().position(|f| f == p).unwrap_or_else(|| panic!("{p} not in {found:?}"));
        assert!(at(&newest) < at(&older), "{found:?}");
        assert!(!found.iter().any(|f| f.ends_with("libamdhip64.so.6") && f.contains("gpuport-rocm10")));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
