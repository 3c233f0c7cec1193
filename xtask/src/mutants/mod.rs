//! `cargo xtask mutants [--template queue|vendor] [--shard K/N]`: automatic mutation
//! testing of the port templates, with the conformance suite as their test. cargo-mutants
//! (installed with `cargo install` where it is missing) changes the template's code one
//! small way at a time — a function returning a default, an operator or a condition
//! flipped — builds it and runs the template's tests, which run the whole suite through
//! `run_port`. A mutant the suite does not catch either gets a case, or is listed in
//! `docs/conformance-rules.md` ("Surviving mutants") with why no user could tell it apart;
//! the command fails on any other survivor.
//!
//! Each template's mutants are built in place, in a target folder of their own shared
//! between mutants, so that only the template itself is rebuilt each time. `--shard K/N` runs the
//! K-th of N slices (cargo-mutants' sharding), for a run split over time or machines.
//!
//! A full run (no `--shard`) also writes the template's record (`record`): every mutant
//! with its outcome, checked in, from which `--sample N` (`sample`) re-runs N caught
//! mutants of each template without cargo-mutants — CI's run — and which tells when a
//! template changed after its last full run.

mod record;
mod sample;

pub use sample::sample;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::{cargo, run};

/// The templates, by the name `--template` takes: (name, folder).
const TEMPLATES: [(&str, &str); 2] = [("queue", "examples/port-template"), ("vendor", "examples/vendor-port-template")];

/// Where each template's survivors are explained.
const RULES: &str = "docs/conformance-rules.md";

/// One mutant, as cargo-mutants lists it without its line and column (which move as the
/// file changes): `src/lib.rs: replace … with …`.
fn key(line: &str) -> Option<String> {
    let mut parts = line.splitn(4, ':');
    let (file, _line, _col, what) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some(format!("{file}: {}", what.trim()))
}

/// The mutants in one of cargo-mutants' result lists (`missed.txt`, `caught.txt`, …).
fn listed(out: &Path, file: &str) -> Result<Vec<String>, String> {
    let path = out.join("mutants.out").join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(text.lines().filter_map(key).collect())
}

/// The survivors `docs/conformance-rules.md` explains for `template`: rows of its
/// "Surviving mutants" table, `| template | \`mutant\` | why |` (a `|` inside the mutant
/// written `\|`, as tables need).
fn explained(template: &str) -> Result<BTreeSet<String>, String> {
    let page = std::fs::read_to_string(RULES).map_err(|e| format!("reading {RULES}: {e}"))?;
    explained_in(&page, template)
}

fn explained_in(page: &str, template: &str) -> Result<BTreeSet<String>, String> {
    let Some(section) = page.split("\n## Surviving mutants").nth(1) else {
        return Err(format!("{RULES} has no \"Surviving mutants\" section"));
    };
    let section = section.split("\n## ").next().unwrap_or_default();
    Ok(section
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().strip_prefix('|')?.split_once('|')?;
            let (mutant, _why) = rest.trim().strip_prefix('`')?.split_once("` |")?;
            (name.trim() == template).then(|| mutant.replace("\\|", "|"))
        })
        .collect())
}

/// Installs cargo-mutants where `cargo mutants` does not run.
fn ensure_tool() -> Result<(), String> {
    let mut probe = cargo();
    probe.args(["mutants", "--version"]);
    if probe.output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    let mut install = cargo();
    install.args(["install", "cargo-mutants", "--locked"]);
    if run(install) {
        Ok(())
    } else {
        Err("cargo install cargo-mutants failed".into())
    }
}

/// Counts of one template's run.
struct Tally {
    caught: usize,
    missed: usize,
    explained: usize,
    timeout: usize,
    unviable: usize,
}

/// The tool's name and version, as the record names them.
fn tool_version() -> String {
    let mut probe = cargo();
    probe.args(["mutants", "--version"]);
    probe.output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default()
}

/// Writes the template's record from the finished full run whose output is `out`.
fn write_record(name: &str, dir: &str, out: &Path) -> Result<(), String> {
    let record = record::from_run(Path::new(dir), out)?;
    let path = Path::new(record::DIR).join(format!("{name}.txt"));
    std::fs::create_dir_all(record::DIR).map_err(|e| format!("creating {}: {e}", record::DIR))?;
    std::fs::write(&path, record.to_text(name, &tool_version()))
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("xtask: recorded {} mutants of the {name} template in {}", record.mutants.len(), path.display());
    Ok(())
}

/// Runs cargo-mutants over one template; returns its counts and the survivors nobody
/// explained.
fn mutate(name: &str, dir: &str, shard: Option<&str>) -> Result<(Tally, Vec<String>), String> {
    let out = std::path::absolute(PathBuf::from("target/mutants").join(name)).map_err(|e| e.to_string())?;
    let build = std::path::absolute(PathBuf::from("target/mutants").join(format!("{name}-build")))
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    // In place: a copy elsewhere would lose the template's relative path dependencies on
    // gpuport's crates. cargo-mutants puts each file back after each mutant; do not edit
    // the template while it runs.
    let mut cmd = cargo();
    cmd.args(["mutants", "--in-place", "--no-shuffle", "--dir", dir, "--output"]).arg(&out);
    if let Some(shard) = shard {
        cmd.args(["--shard", shard]);
    }
    // Every mutant's build shares one target folder: only the template is rebuilt.
    cmd.env("CARGO_TARGET_DIR", &build).env_remove("GPUPORT_BACKENDS");
    // cargo-mutants exits non-zero when a mutant survives or times out: the lists decide.
    let _ = run(cmd);
    let missed = listed(&out, "missed.txt")?;
    if listed(&out, "caught.txt")?.is_empty() && missed.is_empty() {
        return Err(format!("no mutant of the {name} template was tested (did the unmutated template fail?)"));
    }
    let known = explained(name)?;
    let unexplained: Vec<String> = missed.iter().filter(|m| !known.contains(*m)).cloned().collect();
    let tally = Tally {
        caught: listed(&out, "caught.txt")?.len(),
        missed: missed.len(),
        explained: missed.len() - unexplained.len(),
        timeout: listed(&out, "timeout.txt")?.len(),
        unviable: listed(&out, "unviable.txt")?.len(),
    };
    if shard.is_none() {
        write_record(name, dir, &out)?;
    }
    Ok((tally, unexplained))
}

/// `cargo xtask mutants [--template queue|vendor] [--shard K/N]`.
pub fn mutants(template: Option<&str>, shard: Option<&str>) -> Result<(), String> {
    let chosen: Vec<(&str, &str)> = match template {
        None => TEMPLATES.to_vec(),
        Some(t) => TEMPLATES.iter().copied().filter(|(name, _)| *name == t).collect(),
    };
    if chosen.is_empty() {
        return Err(format!("no template named {template:?} (queue or vendor)"));
    }
    ensure_tool()?;
    let mut failures = Vec::new();
    for (name, dir) in chosen {
        let (t, unexplained) = mutate(name, dir, shard)?;
        eprintln!(
            "xtask: mutants of the {name} template: {} tested — {} caught, {} timed out (caught), {} survived \
             ({} explained in {RULES}), {} unviable (did not build)",
            t.caught + t.missed + t.timeout,
            t.caught,
            t.timeout,
            t.missed,
            t.explained,
            t.unviable
        );
        for m in unexplained {
            failures.push(format!("{name}: {m}"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("survivors with no case and no explanation in {RULES}:\n  {}", failures.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::{explained_in, key};

    #[test]
    fn survivors_are_read_from_their_table_only() {
        let page = "## Before\n| queue | `not this` | no |\n## Surviving mutants\n\n| Template | Mutant | Why |\n\
                    | --- | --- | --- |\n| queue | `src/lib.rs: replace \\|\\| with && in f` | why |\n\
                    | vendor | `src/x.rs: other` | why |\n## After\n| queue | `nor this` | no |\n";
        let queue = explained_in(page, "queue").unwrap();
        assert_eq!(queue.into_iter().collect::<Vec<_>>(), vec!["src/lib.rs: replace || with && in f".to_owned()]);
        assert!(explained_in("no such section", "queue").is_err());
    }

    #[test]
    fn a_mutant_is_known_without_its_position() {
        assert_eq!(
            key("src/lib.rs:127:9: replace <impl Device for TemplateDevice>::can_access_peer -> Result<bool> with Ok(false)")
                .as_deref(),
            Some("src/lib.rs: replace <impl Device for TemplateDevice>::can_access_peer -> Result<bool> with Ok(false)")
        );
        assert_eq!(key("no position here"), None);
    }
}
