//! README's environment tables and the variables the code reads, kept in step: a variable
//! the code reads that the tables do not list is a setting no user can find, and a listed
//! one that nothing reads is a promise nothing keeps. Checked by this module's test over
//! the repository's sources (Rust, Python, shell, CI).

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// Every `GPUPORT_…` name in `text`.
    fn names_in(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let mut rest = text;
        while let Some(at) = rest.find("GPUPORT_") {
            let tail = &rest[at..];
            let len =
                tail.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(tail.len());
            let name = tail[..len].trim_end_matches('_');
            if name.len() > "GPUPORT_".len() {
                names.insert(name.to_owned());
            }
            rest = &tail[len.max(1)..];
        }
        names
    }

    /// The sources under `dir` (build outputs, virtual environments and VCS data left out).
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | ".venv" | ".git" | "node_modules" | "__pycache__") {
                    sources(&path, out);
                }
            } else if name.ends_with(".rs") || name.ends_with(".py") || name.ends_with(".sh") || name == "run" {
                out.push(path);
            }
        }
    }

    #[test]
    fn readme_lists_exactly_the_variables_the_code_reads() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root");
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let listed: BTreeSet<String> = readme
            .lines()
            .filter(|l| l.starts_with("| `GPUPORT_"))
            .flat_map(|l| names_in(l.split(" | ").next().unwrap_or("")))
            .collect();
        let mut files = Vec::new();
        sources(root, &mut files);
        let mut read = BTreeSet::new();
        for file in &files {
            // This file names variables only as examples of the pattern; the plugin ABI's
            // crate and the loader's table of its error kinds name the C header's macros
            // (its constants), not variables.
            let abi_names = file.components().any(|c| c.as_os_str() == "plugin-abi")
                || file.ends_with("backends/loaded/src/table.rs");
            if file.ends_with("xtask/src/env_table.rs") || abi_names {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(file) {
                read.extend(names_in(&text));
            }
        }
        // Kernel sources name the portability header's macros (`GPUPORT_KERNEL`): not
        // variables.
        let header = std::fs::read_to_string(root.join("crates/vendor-kit/src/compile/kernel.h")).expect("kernel.h");
        let macros: BTreeSet<String> =
            header.lines().filter_map(|l| l.strip_prefix("#define ")).flat_map(names_in).collect();
        assert!(macros.contains("GPUPORT_KERNEL"), "the portability header's macros were not found");
        read.retain(|name| !macros.contains(name));
        let unlisted: Vec<&String> = read.difference(&listed).collect();
        let unread: Vec<&String> = listed.difference(&read).collect();
        assert!(unlisted.is_empty(), "read by the code but not in README's environment tables: {unlisted:?}");
        assert!(unread.is_empty(), "in README's environment tables but read by no code: {unread:?}");
        assert!(files.len() > 50, "the scan found too few sources ({}): wrong root?", files.len());
    }

    #[test]
    fn names_are_read_whole() {
        let found = names_in("x GPUPORT_CUDA_LIBRARY=1, `GPUPORT_EXT_DEVICES`; GPUPORT_ prefix and GPUPORT_A1_B.");
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            ["GPUPORT_A1_B", "GPUPORT_CUDA_LIBRARY", "GPUPORT_EXT_DEVICES"]
        );
    }
}
