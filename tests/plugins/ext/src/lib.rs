//! The ext device (`gpuport-ext`) built as a device plugin: the same Rust port that
//! programs link in and register, exported through `gpuport-plugin-export` as a shared library
//! any gpuport program loads (`libgpuport_ext_plugin.so`). It is exported under the name
//! `extso`, so a process can hold both (the linked-in `ext` and the loaded one) and the
//! test suite runs the ext device both ways; its plugin initialiser registers the
//! conformance suite's `fill_u32` kernel inside the plugin, where the ext device looks
//! its registered modules up.

/// The backend name the plugin's table gives.
pub const NAME: &str = "extso";

/// Registers the suite's kernel in the plugin's own kernel registry.
pub fn register_kernels() {
    let _ = gpuport_conformance::registered_fill_kernel();
}

gpuport_plugin_export::export_plugin!(gpuport_ext::ExtBackend, name = "extso", init = register_kernels);

/// Where the plugin library is, beside the running test executable: cargo puts a
/// dependency's shared library in `deps/`, the package's own one level up; with the build
/// folders of newer cargo (each unit in `build/<package>/<hash>/out/`), in a sibling
/// unit's folder of this package, the newest of them being the one just built.
pub fn library_path() -> std::path::PathBuf {
    let name = format!("{}gpuport_ext_plugin{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let exe = std::env::current_exe().unwrap_or_default();
    let candidates: Vec<std::path::PathBuf> = exe.ancestors().skip(1).take(2).map(|d| d.join(&name)).collect();
    if let Some(found) = candidates.iter().find(|p| p.exists()) {
        return found.clone();
    }
    // `…/build/gpuport-ext-plugin/<hash>/out/<test>`: the package's folder is three up.
    let units = exe.ancestors().nth(3).and_then(|d| std::fs::read_dir(d).ok());
    let newest = units
        .into_iter()
        .flatten()
        .flatten()
        .map(|unit| unit.path().join("out").join(&name))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(modified, _)| *modified);
    match newest {
        Some((_, path)) => path,
        None => candidates.first().cloned().unwrap_or(name.into()),
    }
}
