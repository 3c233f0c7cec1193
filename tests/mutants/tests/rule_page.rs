//! `docs/conformance-rules.md` names, for every case of the suite, each broken port that
//! proves the case has teeth — the hand-written mutants (`mut-…`), the driver doubles'
//! flaws (`driver:FLAW`, run on the CUDA and ROCm backends) and the C plugin's broken
//! variants (`cplugin-VARIANT`) whose check requires that case to fail — or says `none
//! yet`. Kept in step both ways: a mutant added, moved to another case or removed changes
//! the page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gpuport_conformance::CASES;
use gpuport_mutants::{DRIVER_MUTANTS, MUTANTS};

const SECTION: &str = "## The mutant behind each case";

fn workspace_file(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

/// The C plugin's broken variants and their cases, as its test declares them:
/// `broken_variant!(test_name, "variant", "group::case")`.
fn c_plugin_variants() -> Vec<(String, String)> {
    let source = workspace_file("tests/plugins/c/tests/conformance.rs");
    let quoted = |s: &str| s.split('"').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>();
    source
        .split("broken_variant!(")
        .skip(1) // what precedes the first use
        .filter_map(|use_| {
            let args = quoted(use_.split(");").next()?);
            match args.as_slice() {
                [variant, case] => Some((format!("cplugin-{variant}"), case.clone())),
                _ => None,
            }
        })
        .collect()
}

/// Every broken port, by the case its check requires to fail.
fn proofs() -> BTreeMap<String, BTreeSet<String>> {
    let mut by_case: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let all = MUTANTS
        .iter()
        .filter(|m| !m.caught_by.is_empty())
        .map(|m| (m.name.to_owned(), m.caught_by.to_owned()))
        .chain(DRIVER_MUTANTS.iter().map(|m| (format!("driver:{}", m.flaw), m.caught_by.to_owned())))
        .chain(c_plugin_variants());
    for (mutant, case) in all {
        by_case.entry(case).or_default().insert(mutant);
    }
    by_case
}

/// The page's table: case → the mutants its row names (empty for `none yet`).
fn page() -> BTreeMap<String, BTreeSet<String>> {
    let text = workspace_file("docs/conformance-rules.md");
    let section = text.split(SECTION).nth(1).unwrap_or_else(|| panic!("no {SECTION:?} section"));
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| Case") && !l.starts_with("| ---")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [case, mutants] = cells.as_slice() else { panic!("not a row of two cells: {line}") };
        let named: BTreeSet<String> = mutants.split('`').skip(1).step_by(2).map(str::to_owned).collect();
        assert!(
            named.is_empty() == (*mutants == "none yet"),
            "{case}: a row names its mutants in backticks, or says `none yet`: {line}"
        );
        assert!(rows.insert(case.to_string(), named).is_none(), "{case} has two rows");
    }
    rows
}

#[test]
fn every_case_names_the_mutants_that_prove_it() {
    let (proofs, page) = (proofs(), page());
    assert!(c_plugin_variants().len() >= 6, "the C plugin's variants were not read: {:?}", c_plugin_variants());
    let mut wrong = Vec::new();
    for case in CASES.iter().map(|c| c.name) {
        let expected = proofs.get(case).cloned().unwrap_or_default();
        match page.get(case) {
            None => wrong.push(format!("{case}: no row")),
            Some(named) if *named != expected => {
                wrong.push(format!("{case}: the page names {named:?}, the checks {expected:?}"))
            }
            Some(_) => {}
        }
    }
    for case in page.keys().chain(proofs.keys()) {
        if !CASES.iter().any(|c| c.name == case) {
            wrong.push(format!("{case}: no such case"));
        }
    }
    assert!(wrong.is_empty(), "docs/conformance-rules.md, {SECTION:?}:\n  {}", wrong.join("\n  "));
}
