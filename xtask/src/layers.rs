//! The crate layers `docs/architecture.md` draws, checked against the manifests: each
//! crate of the library depends only on crates of lower layers (its normal dependencies;
//! tests may reach up), and the two kits do not depend on each other. And within each
//! library crate, the imports between its top-level modules (`crate::x` in module `y`)
//! form no circle but the ones the architecture page names as still needing each other.

/// The library's crates, bottom layer first; a crate may depend on crates of lower layers
/// only.
#[cfg(test)]
const LAYERS: &[&[&str]] = &[
    &["gpuport-core", "gpuport-plugin-abi"],
    &["gpuport-queue", "gpuport-vendor-kit"],
    &["gpuport-host", "gpuport-cuda", "gpuport-rocm", "gpuport-loaded", "gpuport-ext", "gpuport-plugin-export"],
    &["gpuport-runtime"],
    &["gpuport-dlpack", "gpuport-cai", "gpuport-conformance", "gpuport-collective"],
    &["gpuport"],
    &["gpuport-python"],
];

/// The circles between a crate's top-level modules that `docs/architecture.md` names, each
/// with why it is there: (crate folder, the modules of one circle, sorted). Any other
/// circle fails the check, and so does a listed one that is gone (say so in the docs).
#[cfg(test)]
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[
    // An opened device records its default streams and a stream holds its device; events
    // and modules, kept by streams' parked work, hold their device too.
    ("crates/vendor-kit", &["device", "event", "module", "stream"]),
];

/// The library crates whose modules are checked.
#[cfg(test)]
const MODULE_CHECKED: &[&str] = &[
    "crates/core",
    "crates/queue",
    "crates/vendor-kit",
    "crates/runtime",
    "crates/dlpack",
    "crates/cai",
    "crates/collective",
    "crates/plugin-export",
    "crates/python",
    "backends/host",
    "backends/ext",
    "backends/cuda",
    "backends/rocm",
    "backends/loaded",
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::{KNOWN_CIRCLES, LAYERS, MODULE_CHECKED};

    /// Each top-level module of the crate in `dir` (a file or folder under `src/`, the root
    /// file left out) and the other top-level modules it names as `crate::x`, outside
    /// comments.
    fn module_imports(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
        fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    out.push(path);
                }
            }
        }
        let src = dir.join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for path in &all {
            let rel = path.strip_prefix(&src).expect("under src");
            let top = rel.components().next().expect("a file").as_os_str().to_string_lossy();
            let top = top.trim_end_matches(".rs").to_owned();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(path).expect("a source file");
            let named = graph.entry(top.clone()).or_default();
            for line in text.lines().map(|l| l.split("//").next().unwrap_or("")) {
                let mut rest = line;
                while let Some(at) = rest.find("crate::") {
                    let tail = &rest[at + "crate::".len()..];
                    let end = tail.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(tail.len());
                    if end > 0 && tail[..end] != top {
                        named.insert(tail[..end].to_owned());
                    }
                    rest = &tail[end..];
                }
            }
        }
        let modules: BTreeSet<String> = graph.keys().cloned().collect();
        for named in graph.values_mut() {
            named.retain(|m| modules.contains(m));
        }
        graph
    }

    /// The circles of `graph`: its strongly connected components of two or more modules.
    fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
        let reaches = |from: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from.to_owned()];
            while let Some(m) = todo.pop() {
                for next in &graph[&m] {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let reach: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reaches(m))).collect();
        graph
            .keys()
            .map(|m| {
                let mut circle: Vec<String> = graph
                    .keys()
                    .filter(|n| *n == m || (reach[m].contains(*n) && reach[n].contains(m)))
                    .cloned()
                    .collect();
                circle.sort();
                circle
            })
            .filter(|c| c.len() > 1)
            .collect()
    }

    #[test]
    fn modules_import_one_way_but_for_the_named_circles() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = BTreeSet::new();
        for krate in MODULE_CHECKED {
            let graph = module_imports(&root.join(krate));
            assert!(!graph.is_empty(), "{krate}: no modules found");
            for circle in circles(&graph) {
                found.insert((krate.to_string(), circle));
            }
        }
        let known: BTreeSet<(String, Vec<String>)> =
            KNOWN_CIRCLES.iter().map(|(k, c)| (k.to_string(), c.iter().map(|m| m.to_string()).collect())).collect();
        let new: Vec<_> = found.difference(&known).collect();
        let gone: Vec<_> = known.difference(&found).collect();
        assert!(new.is_empty(), "modules that import each other, not named in docs/architecture.md: {new:?}");
        assert!(gone.is_empty(), "circles named in KNOWN_CIRCLES that are gone (update it and the docs): {gone:?}");
    }

    #[test]
    fn circles_are_found() {
        let g = |edges: &[(&str, &str)]| {
            let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (a, b) in edges {
                graph.entry(a.to_string()).or_default().insert(b.to_string());
                graph.entry(b.to_string()).or_default();
            }
            graph
        };
        assert!(circles(&g(&[("a", "b"), ("b", "c")])).is_empty());
        let found = circles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), [vec!["a".to_owned(), "b".into(), "c".into()]]);
    }

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
        // The vendor kit's clients are backends; the runtime above them keeps discovery and
        // the dynamic tier, and drives no call table itself.
        for client in ["gpuport-cuda", "gpuport-rocm", "gpuport-loaded"] {
            assert!(deps_of(client).contains(&"gpuport-vendor-kit".to_owned()), "{client} is not on the vendor kit");
        }
        assert!(!deps_of("gpuport-runtime").contains(&"gpuport-vendor-kit".to_owned()), "the runtime drives a kit");
    }
}
