//! `cargo xtask mutants [--target NAME] [--shard K/N] [--untested] [--missed]`: automatic mutation testing, with
//! the conformance suite as the test. cargo-mutants (installed with `cargo install` where it
//! is missing) changes the code one small way at a time — a function returning a default,
//! an operator or a condition flipped — builds it and runs the tests that judge it. A mutant
//! the suite does not catch either gets a case, or is listed in
//! `docs/conformance-rules.md` ("Surviving mutants") with why no user could tell it apart;
//! the command fails on any other survivor.
//!
//! Four targets ([`TARGETS`]): the two port templates (`queue`, `vendor`; each its own
//! workspace, whose tests run the whole suite through `run_port`) and the two kits the
//! templates delegate to (`queue-kit`: `crates/queue`, judged by the host and ext suites;
//! `vendor-kit`: `crates/vendor-kit`, judged by the CUDA and ROCm backends' suites on the
//! driver doubles, where a validation report fails the run as a failed case does, and by
//! the loaded plugins').
//!
//! Mutants are built in place, in a target folder of each target's own shared between its
//! mutants, so that only what the mutated crate reaches is rebuilt. `--shard K/N` runs the
//! K-th of N slices (cargo-mutants' sharding), for a run split over time or machines;
//! `--untested` only the mutants the record has no outcome for (before any slicing), so a
//! record is completed, and a file's mutants re-run after it changed, without repeating
//! the rest; `--missed` only the survivors it records that the rule page does not explain
//! (a new case's check), and both together either.
//!
//! Every run writes the target's record (`record`): every mutant with its outcome, checked
//! in. A sharded run fills in its slice's outcomes and keeps the others' from the record
//! (while their file is the one recorded), so a kit's several hundred mutants are
//! recorded over several runs; mutants not yet run are `untested`. From the record
//! `--sample N` (`sample`) re-runs N caught mutants of each target without cargo-mutants —
//! CI's run — and it tells when a target changed after its last run.

mod record;
mod sample;

pub use record::Outcome;
pub use sample::sample;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, run};

/// What `cargo xtask mutants` mutates.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// The name `--target` takes, the record's and the survivors table's.
    pub name: &'static str,
    /// The folder whose `src/` is mutated.
    pub dir: &'static str,
    /// `None` for a template (its own workspace, its own tests); a kit's workspace crate
    /// and what judges it otherwise.
    pub kit: Option<Kit>,
}

/// A kit: a crate of gpuport's workspace, judged through the backends built on it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kit {
    pub package: &'static str,
    /// The packages whose tests run against each mutant.
    pub tests: &'static [&'static str],
    /// The suite's backends (`GPUPORT_CONFORMANCE_BACKENDS`).
    pub backends: &'static str,
    /// Whether the backends run on the driver doubles (built first).
    pub doubles: bool,
}

/// Every target.
pub(crate) const TARGETS: [Target; 4] = [
    Target { name: "queue", dir: "examples/port-template", kit: None },
    Target { name: "vendor", dir: "examples/vendor-port-template", kit: None },
    Target {
        name: "queue-kit",
        dir: "crates/queue",
        kit: Some(Kit {
            package: "gpuport-queue",
            tests: &["gpuport-queue", "gpuport-host", "gpuport-ext", "gpuport-conformance"],
            backends: "host,ext",
            doubles: false,
        }),
    },
    Target {
        name: "vendor-kit",
        dir: "crates/vendor-kit",
        kit: Some(Kit {
            package: "gpuport-vendor-kit",
            // The loaded plugins share one set of types between libraries: only their tests
            // see a kind check that a type check does not already make.
            tests: &[
                "gpuport-vendor-kit",
                "gpuport-cuda",
                "gpuport-rocm",
                "gpuport-conformance",
                "gpuport-loaded",
                "gpuport-c-plugin-test",
                "gpuport-ext-plugin",
            ],
            backends: "cuda,rocm",
            doubles: true,
        }),
    },
];

impl Target {
    /// Where cargo-mutants runs and its file names start: the template's folder, or the
    /// workspace's root for a kit.
    pub fn root(&self) -> &'static str {
        if self.kit.is_some() {
            "."
        } else {
            self.dir
        }
    }

    /// The environment every build and test of a mutant runs in.
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let Some(kit) = self.kit else { return Vec::new() };
        let mut env = Vec::new();
        if kit.doubles {
            // The CUDA double and HIP 7's, with the validation layer's reports ending the
            // process with a failing status: a mutant that misuses the driver is caught
            // even where every case passes.
            let place = crate::doubles::Place::plain();
            env = place.env(&crate::doubles::DOUBLES[0]);
            env.retain(|(k, _)| *k != "GPUPORT_HIP_LIBRARY" && *k != "GPUPORT_DOUBLE_REPORT");
            env.push(("GPUPORT_HIP_LIBRARY", place.library(&crate::doubles::DOUBLES[2]).into_os_string()));
            env.push(("GPUPORT_DOUBLE_FAIL_EXIT", "86".into()));
        }
        env.retain(|(k, _)| *k != "GPUPORT_CONFORMANCE_BACKENDS");
        env.push(("GPUPORT_CONFORMANCE_BACKENDS", kit.backends.into()));
        env
    }

    /// Builds what the target's tests load (the doubles, for the vendor kit).
    fn prepare(&self) -> Result<(), String> {
        match self.kit {
            Some(kit) if kit.doubles => crate::doubles::build(),
            _ => Ok(()),
        }
    }

    /// The cargo-mutants arguments that choose what is mutated and what judges it.
    fn selection(&self) -> Vec<&'static str> {
        match self.kit {
            None => vec!["--dir", self.dir],
            Some(kit) => {
                let mut args = vec!["--package", kit.package];
                for t in kit.tests {
                    args.extend(["--test-package", t]);
                }
                args
            }
        }
    }
}

/// The targets `--target` names (every one when `None`).
pub(crate) fn chosen(name: Option<&str>) -> Result<Vec<Target>, String> {
    let chosen: Vec<Target> = TARGETS.iter().copied().filter(|t| name.is_none_or(|n| n == t.name)).collect();
    if chosen.is_empty() {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        return Err(format!("no target named {name:?} ({})", names.join(", ")));
    }
    Ok(chosen)
}

/// Where each target's survivors are explained.
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

/// The survivors `docs/conformance-rules.md` explains for `target`: rows of its
/// "Surviving mutants" table, `| target | \`mutant\` | why |` (a `|` inside the mutant
/// written `\|`, as tables need).
fn explained(target: &str) -> Result<BTreeSet<String>, String> {
    let page = std::fs::read_to_string(RULES).map_err(|e| format!("reading {RULES}: {e}"))?;
    explained_in(&page, target)
}

fn explained_in(page: &str, target: &str) -> Result<BTreeSet<String>, String> {
    let Some(section) = page.split("\n## Surviving mutants").nth(1) else {
        return Err(format!("{RULES} has no \"Surviving mutants\" section"));
    };
    let section = section.split("\n## ").next().unwrap_or_default();
    Ok(section
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.trim().strip_prefix('|')?.split_once('|')?;
            let (mutant, _why) = rest.trim().strip_prefix('`')?.split_once("` |")?;
            (name.trim() == target).then(|| mutant.replace("\\|", "|"))
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

/// Counts of one target's run.
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

/// `cargo mutants --in-place` over `target`, its environment set, its selection made.
fn mutants_command(target: &Target, build: &Path) -> Command {
    let mut cmd = cargo();
    cmd.args(["mutants", "--in-place", "--no-shuffle"]).args(target.selection());
    // Every mutant's build shares one target folder: only what the mutant reaches is
    // rebuilt.
    cmd.env("CARGO_TARGET_DIR", build).env_remove("GPUPORT_BACKENDS").envs(target.env());
    cmd
}

/// The target's record as a run whose output is `out` would leave it: the current sources'
/// mutants, with the outcomes of `out` and those the record keeps (see the module
/// documentation).
fn current_record(target: &Target, build: &Path, out: &Path) -> Result<record::Record, String> {
    let mut list = mutants_command(target, build);
    list.args(["--list", "--json"]);
    let listed = list.output().map_err(|e| format!("could not start cargo mutants --list: {e}"))?;
    if !listed.status.success() {
        return Err(format!("cargo mutants --list failed: {}", String::from_utf8_lossy(&listed.stderr)));
    }
    let previous = std::fs::read_to_string(record_path(target)).ok().and_then(|t| record::Record::parse(&t).ok());
    record::from_run(target, &String::from_utf8_lossy(&listed.stdout), out, previous.as_ref())
}

fn record_path(target: &Target) -> PathBuf {
    Path::new(record::DIR).join(format!("{}.txt", target.name))
}

/// Writes the target's record from the finished run whose output is `out`, keeping the
/// outcomes of mutants another slice ran.
fn write_record(target: &Target, build: &Path, out: &Path) -> Result<record::Record, String> {
    let record = current_record(target, build, out)?;
    let path = record_path(target);
    std::fs::create_dir_all(record::DIR).map_err(|e| format!("creating {}: {e}", record::DIR))?;
    std::fs::write(&path, record.to_text(target.name, &tool_version()))
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    let untested = record.mutants.iter().filter(|m| m.outcome == record::Outcome::Untested).count();
    eprintln!(
        "xtask: recorded {} mutants of {} in {} ({untested} not yet run)",
        record.mutants.len(),
        target.name,
        path.display()
    );
    Ok(record)
}

/// cargo-mutants' `--re` arguments that choose exactly the mutants whose outcome the
/// record gives as one of `only` (`Untested`: the current sources' mutants no kept outcome
/// covers; `Missed`: the survivors the rule page does not explain — those waiting for a
/// case); `None` when there are none.
fn outcome_filter(
    target: &Target,
    build: &Path,
    out: &Path,
    only: &[record::Outcome],
) -> Result<Option<Vec<String>>, String> {
    // A folder with no results: only the record's kept outcomes count.
    let record = current_record(target, build, &out.join("no-run"))?;
    let known = explained(target.name)?;
    let explained = |m: &record::Mutant| key(&m.name).is_some_and(|k| known.contains(&k));
    let names: Vec<String> = record
        .mutants
        .iter()
        .filter(|m| only.contains(&m.outcome))
        .filter(|m| !(m.outcome == record::Outcome::Missed && explained(m)))
        .flat_map(|m| ["--re".to_owned(), format!("^{}$", regex_escape(&m.name))])
        .collect();
    Ok((!names.is_empty()).then_some(names))
}

/// `text` as a regular expression (the `regex` crate's syntax) that matches only itself.
fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Runs cargo-mutants over one target; returns its counts and the survivors nobody
/// explained, in this run and in the record's earlier slices.
fn mutate(
    target: &Target,
    shard: Option<&str>,
    only: &[record::Outcome],
) -> Result<Option<(Tally, Vec<String>)>, String> {
    let name = target.name;
    let out = std::path::absolute(PathBuf::from("target/mutants").join(name)).map_err(|e| e.to_string())?;
    let build = std::path::absolute(PathBuf::from("target/mutants").join(format!("{name}-build")))
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    target.prepare()?;
    if target.kit.is_some_and(|kit| kit.doubles)
        && !crate::doubles::compilers().iter().any(|(k, _)| *k == "GPUPORT_NVRTC_LIBRARY")
    {
        // Without a compiler the kit's compile path runs in no test (NVRTC's tests say
        // "skipped"), and every mutant of it would be recorded as a survivor.
        return Err(format!(
            "{name} is judged with NVRTC compiling, and no NVRTC was found: `cargo xtask python-test` \
             installs the Python test packages (NVRTC's wheel among them) into `.venv`"
        ));
    }
    if target.kit.is_some() {
        // cargo-mutants' unmutated baseline runs the mutated crate's own tests only: the
        // packages that judge a kit must pass unmutated too, or every mutant would count
        // as caught.
        let mut baseline = sample::target_test(target, &["-q"]);
        baseline.env("CARGO_TARGET_DIR", &build);
        if !run(baseline) {
            return Err(format!("the tests that judge {name} fail without a mutant; fix them first"));
        }
    }
    // In place: a copy elsewhere would lose the templates' relative path dependencies on
    // gpuport's crates. cargo-mutants puts each file back after each mutant; do not edit
    // the target while it runs.
    let mut cmd = mutants_command(target, &build);
    cmd.arg("--output").arg(&out);
    if !only.is_empty() {
        match outcome_filter(target, &build, &out, only)? {
            Some(filter) => cmd.args(filter),
            None => {
                eprintln!("xtask: no mutant of {name} is recorded as {only:?} in {}", record_path(target).display());
                return Ok(None);
            }
        };
    }
    if target.kit.is_some() {
        // Hours of runs share the machine with other work: a slow test must not pass for a
        // hang (cargo-mutants' own limit is twenty seconds here), and a real hang — an
        // event that never completes — ends in two minutes, several times the judging
        // tests' own time on a loaded machine.
        cmd.args(["--timeout", "120"]);
    }
    if let Some(shard) = shard {
        cmd.args(["--shard", shard]);
    }
    // cargo-mutants exits non-zero when a mutant survives or times out: the lists decide.
    let _ = run(cmd);
    let missed = listed(&out, "missed.txt")?;
    if listed(&out, "caught.txt")?.is_empty() && missed.is_empty() {
        return Err(format!("no mutant of {name} was tested (did the unmutated code fail its tests?)"));
    }
    let record = write_record(target, &build, &out)?;
    let known = explained(name)?;
    let all_missed: BTreeSet<String> = record
        .mutants
        .iter()
        .filter(|m| m.outcome == record::Outcome::Missed)
        .filter_map(|m| key(&m.name))
        .chain(missed.iter().cloned())
        .collect();
    let unexplained: Vec<String> = all_missed.iter().filter(|m| !known.contains(*m)).cloned().collect();
    let tally = Tally {
        caught: listed(&out, "caught.txt")?.len(),
        missed: missed.len(),
        explained: missed.iter().filter(|m| known.contains(*m)).count(),
        timeout: listed(&out, "timeout.txt")?.len(),
        unviable: listed(&out, "unviable.txt")?.len(),
    };
    Ok(Some((tally, unexplained)))
}

/// `cargo xtask mutants [--target NAME] [--shard K/N] [--untested] [--missed]`: `only`
/// chooses the mutants by their recorded outcome (every one when empty).
pub fn mutants(target: Option<&str>, shard: Option<&str>, only: &[Outcome]) -> Result<(), String> {
    let chosen = chosen(target)?;
    ensure_tool()?;
    let mut failures = Vec::new();
    for target in chosen {
        let Some((t, unexplained)) = mutate(&target, shard, only)? else { continue };
        eprintln!(
            "xtask: mutants of {}: {} tested — {} caught, {} timed out (caught), {} survived \
             ({} explained in {RULES}), {} unviable (did not build)",
            target.name,
            t.caught + t.missed + t.timeout,
            t.caught,
            t.timeout,
            t.missed,
            t.explained,
            t.unviable
        );
        for m in unexplained {
            failures.push(format!("{}: {m}", target.name));
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
    fn a_mutant_name_is_chosen_as_written() {
        let name = "src/a.rs:3:9: replace || with && in <impl Drop for B<'_>>::drop (x * [y]) -> $";
        assert_eq!(
            super::regex_escape(name),
            "src/a\\.rs:3:9: replace \\|\\| with \\&\\& in <impl Drop for B<'_>>::drop \\(x \\* \\[y\\]\\) \\-> \\$"
        );
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
