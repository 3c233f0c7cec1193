//! `cargo xtask mutants --sample N [--seed S] [--target NAME]`: re-runs N of each target's
//! recorded caught mutants (see `record`) without cargo-mutants, and fails when the suite
//! no longer catches one. Mutants `docs/conformance-rules.md` lists are left out: a listed
//! mutant a run recorded as caught was caught by a thread's timing, not every time. A template changed since its record was written fails too (its
//! mutants would no longer be the ones recorded; its full run takes minutes). A kit's full
//! run takes hours, so a changed kit is sampled among the recorded mutants whose text is
//! still where the record says, and the run says how many no longer are. Fast enough for
//! every CI run; the full run stays `cargo xtask mutants`.
//!
//! Which mutants run is decided by the seed (by default from the checked-out commit), so a
//! failure is reproduced with the seed the run printed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::record::{self, byte_range, hash, Outcome, Record};
use super::Target;
use crate::{cargo, template_cargo};

/// Longer than any caught mutant took in the full run: a mutant that makes the suite hang
/// is caught by this timeout (the suite's own timeouts fail it well before).
const TIMEOUT: Duration = Duration::from_secs(600);

/// The default seed: the checked-out commit, so every commit samples other mutants and a
/// re-run of one commit samples the same.
fn default_seed() -> u64 {
    let head = Command::new("git").args(["rev-parse", "HEAD"]).output();
    head.ok().filter(|o| o.status.success()).map(|o| hash(o.stdout.trim_ascii())).unwrap_or(0)
}

/// `count` distinct indices below `len`, drawn with the seed (splitmix64).
fn draw(seed: u64, len: usize, count: usize) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut picked = Vec::new();
    while picked.len() < count.min(len) {
        let i = (next() % len as u64) as usize;
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    picked
}

/// Puts a file's text back when dropped, so a failed or interrupted step never leaves a
/// mutant in the target.
struct Restore {
    path: PathBuf,
    text: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.text) {
            eprintln!("xtask: COULD NOT PUT BACK {}: {e}; `git checkout` it", self.path.display());
        }
    }
}

/// Where the suite's output against the mutant under test goes (the cases that failed
/// are printed from it).
const LOG: &str = "target/mutants/sample.log";

/// Runs a command with a deadline, its output to `LOG`; `None` when it ran past the
/// deadline (and was killed).
fn run_with_timeout(mut cmd: Command, limit: Duration) -> Result<Option<bool>, String> {
    eprintln!("xtask: running {cmd:?} (output in {LOG})");
    std::fs::create_dir_all("target/mutants").map_err(|e| format!("creating target/mutants: {e}"))?;
    let log = std::fs::File::create(LOG).map_err(|e| format!("creating {LOG}: {e}"))?;
    let log2 = log.try_clone().map_err(|e| format!("{LOG}: {e}"))?;
    cmd.stdout(log).stderr(log2);
    let mut child = cmd.spawn().map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(Some(status.success()));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The tests that judge the target, as `cargo xtask test` runs them (same target folder,
/// so only what the mutant reaches is rebuilt): a template's own, or the packages that
/// judge a kit, in the kit's environment.
pub(super) fn target_test(target: &Target, args: &[&str]) -> Command {
    let mut cmd = match target.kit {
        None => template_cargo(&format!("{}/Cargo.toml", target.dir), "test", &[&["--workspace"], args].concat()),
        Some(kit) => {
            let mut cmd = cargo();
            cmd.arg("test");
            for t in kit.tests {
                cmd.args(["-p", t]);
            }
            cmd.args(args);
            cmd
        }
    };
    cmd.env_remove("GPUPORT_BACKENDS").envs(target.env());
    cmd
}

/// Where `mutant`'s text is in the target's file today, if it is still the text recorded.
fn located(
    target: &Target,
    mutant: &record::Mutant,
) -> Result<Option<(PathBuf, String, std::ops::Range<usize>)>, String> {
    let path = Path::new(target.root()).join(&mutant.file);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let range =
        byte_range(&text, mutant.start, mutant.end).filter(|r| hash(text[r.clone()].as_bytes()) == mutant.replaced);
    Ok(range.map(|r| (path, text, r)))
}

/// Applies one mutant, builds it, runs the suite; `Ok(())` when the suite fails it.
fn check(target: &Target, mutant: &record::Mutant) -> Result<(), String> {
    let (path, text, range) = located(target, mutant)?
        .ok_or_else(|| format!("{}: {} no longer has the text this mutant replaces", mutant.name, target.name))?;
    let mutated = format!("{}{}{}", &text[..range.start], mutant.replacement, &text[range.end..]);
    let _restore = Restore { path: path.clone(), text };
    std::fs::write(&path, mutated).map_err(|e| format!("writing {}: {e}", path.display()))?;
    // Built first, apart: a mutant that no longer builds must not count as caught.
    if run_with_timeout(target_test(target, &["--no-run"]), TIMEOUT)? != Some(true) {
        let log = std::fs::read_to_string(LOG).unwrap_or_default();
        let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("error")).take(5).collect();
        return Err(format!("{}: recorded as caught, but it no longer builds: {}", mutant.name, errors.join("; ")));
    }
    match run_with_timeout(target_test(target, &["-q"]), TIMEOUT)? {
        Some(false) => {
            let log = std::fs::read_to_string(LOG).unwrap_or_default();
            let cases: Vec<&str> = log.lines().filter(|l| l.contains(" ... FAILED")).take(3).collect();
            if cases.is_empty() {
                // No case failed: the suite's process itself did (a crash, an abort).
                let last = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
                eprintln!("xtask:   the suite's process failed before any case could: {last}");
            }
            for line in cases {
                eprintln!("xtask:   {line}");
            }
            Ok(())
        }
        None => {
            eprintln!("xtask: {}: caught by the timeout", mutant.name);
            Ok(())
        }
        Some(true) => Err(format!("{}: the suite no longer catches this mutant", mutant.name)),
    }
}

/// `cargo xtask mutants --sample N [--seed S] [--target NAME]`.
pub fn sample(target: Option<&str>, count: usize, seed: Option<u64>) -> Result<(), String> {
    let seed = seed.unwrap_or_else(default_seed);
    let mut failures = Vec::new();
    for target in super::chosen(target)? {
        let name = target.name;
        let path = Path::new(record::DIR).join(format!("{name}.txt"));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let record = Record::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let changed = record::hash_sources(Path::new(target.dir))? != record.sources;
        if changed && target.kit.is_none() {
            failures.push(format!(
                "{name}: {} changed since its mutants were recorded; run `cargo xtask mutants --target {name}` \
                 (cargo-mutants, the full run) and commit {}",
                target.dir,
                path.display()
            ));
            continue;
        }
        // A mutant the rule page lists is one no case catches every time (caught in a run
        // only when a thread's timing exposed it): never required of a sample.
        let listed = super::explained(name)?;
        let is_listed = |m: &&record::Mutant| super::key(&m.name).is_some_and(|k| listed.contains(&k));
        let mut caught = Vec::new();
        let mut moved = 0;
        for m in record.mutants.iter().filter(|m| m.outcome == Outcome::Caught && !is_listed(m)) {
            if !changed || located(&target, m)?.is_some() {
                caught.push(m);
            } else {
                moved += 1;
            }
        }
        let untested = record.mutants.iter().filter(|m| m.outcome == Outcome::Untested).count();
        if changed || untested > 0 {
            eprintln!(
                "xtask: {name}: of {} recorded mutants, {untested} not yet run{}; `cargo xtask mutants --target \
                 {name} --shard K/N` runs them",
                record.mutants.len(),
                if changed { format!(", and {moved} caught ones whose code changed since") } else { String::new() },
            );
        }
        let picked = draw(seed ^ hash(name.as_bytes()), caught.len(), count);
        eprintln!(
            "xtask: {} of the {} caught mutants of {name}, seed {seed:#018x} (`--seed {seed}`)",
            picked.len(),
            caught.len()
        );
        if !picked.is_empty() {
            target.prepare()?;
        }
        for i in picked {
            let mutant = caught[i];
            eprintln!("xtask: mutant {}", mutant.name);
            match check(&target, mutant) {
                Ok(()) => eprintln!("xtask: caught, as recorded"),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("sampled mutants:\n  {}", failures.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::draw;

    #[test]
    fn a_seed_draws_distinct_indices_and_the_same_ones_again() {
        let a = draw(7, 10, 4);
        assert_eq!(a.len(), 4);
        assert!(a.iter().all(|i| *i < 10));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
        assert_eq!(draw(7, 10, 4), a);
        assert_ne!(draw(8, 10, 4), a);
        assert_eq!(draw(1, 3, 9).len(), 3);
        assert!(draw(1, 0, 2).is_empty());
    }
}
