//! The crate layers `docs/architecture.md` draws, checked against the manifests: each
//! crate of the library depends only on crates of lower layers (its normal dependencies;
//! tests may reach up), and the two kits do not depend on each other.

/// The library's crates, bottom layer first; a crate may depend on crates of lower layers
/// only.
#[cfg(test)]
const LAYERS: &[&[&str]] = &[
    &["gpuport-core", "gpuport-plugin-abi"],
    &["gpuport-queue", "gpuport-vendor-kit"],
    &["gpuport-host", "gpuport-cuda", "gpuport-rocm", "gpuport-ext", "gpuport-plugin-export"],
    &["gpuport-runtime"],
    &["gpuport-dlpack", "gpuport-cai", "gpuport-conformance"],
    &["gpuport"],
    &["gpuport-python"],
];

#[cfg(test)]
mod tests {
    use super::LAYERS;

    /// (package, its normal dependencies) from `cargo metadata`.
    fn manifests() -> Vec<(String, Vec<String>)> {
        let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .expect("cargo metadata runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
        meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| {
                let deps = p["dependencies"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|d| d["kind"].is_null())
                    .filter_map(|d| d["name"].as_str().map(str::to_owned))
                    .collect();
                (p["name"].as_str().unwrap_or_default().to_owned(), deps)
            })
            .collect()
    }

    fn layer(name: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&name))
    }

    #[test]
    fn every_crate_depends_only_on_lower_layers() {
        let all = manifests();
        for layered in LAYERS.iter().flat_map(|l| l.iter()) {
            assert!(all.iter().any(|(name, _)| name == layered), "{layered} is in LAYERS but not in the workspace");
        }
        for (name, deps) in &all {
            let Some(mine) = layer(name) else { continue };
            for dep in deps {
                if let Some(theirs) = layer(dep) {
                    assert!(
                        theirs < mine,
                        "{name} (layer {mine}) depends on {dep} (layer {theirs}): imports run one way"
                    );
                }
            }
        }
    }

    #[test]
    fn the_kits_stand_apart_and_software_devices_take_no_vendor_kit() {
        let all = manifests();
        let deps_of =
            |crate_name: &str| all.iter().find(|(n, _)| n == crate_name).map(|(_, d)| d.clone()).unwrap_or_default();
        assert!(!deps_of("gpuport-queue").contains(&"gpuport-vendor-kit".to_owned()));
        assert!(!deps_of("gpuport-vendor-kit").contains(&"gpuport-queue".to_owned()));
        for software in ["gpuport-host", "gpuport-ext"] {
            assert!(!deps_of(software).contains(&"gpuport-vendor-kit".to_owned()), "{software} takes the vendor kit");
        }
    }
}
