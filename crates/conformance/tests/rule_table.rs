//! `docs/conformance-rules.md` and the suite kept in step: every case the table names
//! exists, every case of the suite is named there, every method of the `Backend`,
//! `Device`, `Stream` and `Event` traits has a row, and every row either names cases or
//! says why it has none.

use std::collections::BTreeSet;
use std::path::PathBuf;

use gpuport_conformance::CASES;

const TRAITS: [&str; 4] = ["Backend", "Device", "Stream", "Event"];
/// What a row without cases must start its last column with.
const NO_CASE: [&str; 2] = ["not checkable black-box:", "not yet checked"];

fn workspace_file(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

/// `Trait::method` for every method the four traits declare, read from their source.
fn trait_methods() -> BTreeSet<String> {
    let source = workspace_file("crates/core/src/traits.rs");
    let mut methods = BTreeSet::new();
    let mut current: Option<&str> = None;
    for line in source.lines() {
        if let Some(name) = TRAITS.iter().find(|t| line.starts_with(&format!("pub trait {t}:"))) {
            current = Some(name);
        } else if line.starts_with('}') {
            current = None;
        } else if let Some(t) = current {
            let decl = line.trim_start();
            let decl = decl.strip_prefix("unsafe ").unwrap_or(decl);
            if let Some(rest) = decl.strip_prefix("fn ") {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                methods.insert(format!("{t}::{name}"));
            }
        }
    }
    methods
}

/// The backticked words of a table cell.
fn ticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

struct Row {
    method: String,
    cases: Vec<String>,
    last: String,
}

fn rows() -> Vec<Row> {
    let page = workspace_file("docs/conformance-rules.md");
    page.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let method = ticked(cells[0]).first().copied().unwrap_or_default().to_owned();
            let last = cells.last().copied().unwrap_or_default().to_owned();
            let cases = if NO_CASE.iter().any(|p| last.starts_with(p)) {
                Vec::new()
            } else {
                ticked(&last).into_iter().map(str::to_owned).collect()
            };
            Row { method, cases, last }
        })
        .collect()
}

#[test]
fn every_trait_method_has_a_row() {
    let methods = trait_methods();
    assert!(methods.len() > 40, "the trait parser found only {methods:?}");
    let rows: BTreeSet<String> = rows().into_iter().map(|r| r.method).collect();
    let missing: Vec<&String> = methods.iter().filter(|m| !rows.contains(*m)).collect();
    assert!(missing.is_empty(), "methods without a row in docs/conformance-rules.md: {missing:?}");
}

#[test]
fn every_named_case_exists_and_every_case_is_named() {
    let known: BTreeSet<&str> = CASES.iter().map(|c| c.name).collect();
    let rows = rows();
    let mut named = BTreeSet::new();
    for row in &rows {
        assert!(
            !row.cases.is_empty() || NO_CASE.iter().any(|p| row.last.starts_with(p)),
            "the row for {} names no case and does not say why: {:?}",
            row.method,
            row.last
        );
        for case in &row.cases {
            assert!(known.contains(case.as_str()), "the row for {} names `{case}`, which is no case", row.method);
            named.insert(case.clone());
        }
    }
    let unnamed: Vec<&&str> = known.iter().filter(|c| !named.contains(**c)).collect();
    assert!(unnamed.is_empty(), "cases no row of docs/conformance-rules.md names: {unnamed:?}");
}
