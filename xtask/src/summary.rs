//! What a `cargo xtask test` run prints last: per backend, whether the conformance suite
//! ran and how it ended (or why it did not run); then every test left ignored, by name and
//! with its reason; then the totals. Built from libtest's output lines and the
//! conformance harness's summary file, so nothing needs scrolling back for.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The file the conformance harness appends its per-backend lines to
/// (`GPUPORT_CONFORMANCE_SUMMARY`).
const CONFORMANCE_SUMMARY_ENV: &str = "GPUPORT_CONFORMANCE_SUMMARY";

/// Results gathered over a run.
#[derive(Default)]
pub(crate) struct Tally {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    /// What the commands run now are for (`on the cuda double`), for conformance lines.
    pub context: String,
    /// Per backend, one line: `host: ran — 39 passed, 0 failed, 1 skipped`.
    pub conformance: Vec<String>,
    /// Tests libtest left ignored: (name, reason).
    ignored_tests: Vec<(String, String)>,
    /// Tests that ran, pass or fail (a test ignored in one command and run by a later one
    /// is not listed as ignored).
    ran: BTreeSet<String>,
    /// Whether every Python test run passed (`None`: none ran).
    python: Option<bool>,
}

impl Tally {
    /// Takes one line of libtest output: a `test NAME ... ok|FAILED|ignored[, why]` line or
    /// a `test result: ok. 3 passed; 0 failed; 1 ignored; …` line.
    pub fn add_line(&mut self, line: &str) {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("test result: ") {
            self.add_totals(rest);
        } else if let Some(rest) = line.strip_prefix("test ") {
            self.add_test(rest);
        }
    }

    fn add_totals(&mut self, rest: &str) {
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else { continue };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }

    fn add_test(&mut self, rest: &str) {
        let Some((name, outcome)) = rest.split_once(" ... ") else { return };
        // libtest-mimic writes a trial's kind first: `test [kind] name ... ignored`.
        let (kind, name) = match name.trim().strip_prefix('[').and_then(|r| r.split_once("] ")) {
            Some((kind, name)) => (Some(kind), name.trim()),
            None => (None, name.trim()),
        };
        if let Some(why) = outcome.strip_prefix("ignored") {
            let why = why.trim_start_matches(',').trim();
            let why = if why.is_empty() { kind.unwrap_or("ignored by default") } else { why };
            self.ignored_tests.push((name.to_owned(), why.to_owned()));
        } else if outcome.starts_with("ok") || outcome.starts_with("FAILED") {
            self.ran.insert(name.to_owned());
        }
    }

    /// The conformance harness's lines from the summary file, under the current context.
    fn add_conformance(&mut self, text: &str) {
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            let context = if self.context.is_empty() { String::new() } else { format!(" {}", self.context) };
            let entry = match fields.as_slice() {
                [backend, "ran", passed, failed, skipped] => {
                    format!("{backend}{context}: ran — {passed} passed, {failed} failed, {skipped} skipped")
                }
                [backend, "not run", why] => format!("{backend}{context}: did not run — {why}"),
                _ => continue,
            };
            self.conformance.push(entry);
        }
    }

    /// Tests still ignored at the end: ignored by every command that listed them.
    fn still_ignored(&self) -> Vec<&(String, String)> {
        let mut seen = BTreeSet::new();
        self.ignored_tests.iter().filter(|(name, _)| !self.ran.contains(name) && seen.insert(name.clone())).collect()
    }

    /// Whether the Python tests that ran passed (`None`: none ran yet).
    pub fn python_ran(&self) -> Option<bool> {
        self.python
    }

    /// Notes one pytest run's outcome.
    pub fn note_python(&mut self, passed: bool) {
        self.python = Some(self.python.unwrap_or(true) && passed);
    }

    /// Prints the summary.
    pub fn print(&self, title: &str, not_run: &[(String, String)]) {
        println!("\n==== {title} ====");
        println!("conformance suite:");
        if self.conformance.is_empty() {
            println!("  (no conformance run)");
        }
        for line in &self.conformance {
            println!("  {line}");
        }
        let ignored = self.still_ignored();
        println!("ignored tests ({}):", ignored.len());
        for (name, why) in ignored {
            println!("  {name} — {why}");
        }
        if !not_run.is_empty() {
            println!("not run by this command:");
            for (what, why) in not_run {
                println!("  {what} — {why}");
            }
        }
        let python = match self.python {
            Some(true) => "Python tests passed",
            Some(false) => "Python tests FAILED",
            None => "Python tests not run",
        };
        println!("{} passed, {} failed (Rust); {python}", self.passed, self.failed);
    }
}

fn summary_file() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"));
    std::path::absolute(target.join("xtask-conformance-summary.txt")).unwrap_or_default()
}

/// Runs `cargo test …`, echoing its output and adding its results to `tally`.
pub(crate) fn run_tests(mut cmd: Command, tally: &mut Tally) -> bool {
    let summary = summary_file();
    let _ = std::fs::remove_file(&summary);
    cmd.env(CONFORMANCE_SUMMARY_ENV, &summary);
    eprintln!("xtask: running {cmd:?}");
    let mut child = match cmd.stdout(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask: could not start {cmd:?}: {e}");
            return false;
        }
    };
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            tally.add_line(&line);
        }
    }
    let ok = child.wait().is_ok_and(|s| s.success());
    if let Ok(text) = std::fs::read_to_string(&summary) {
        tally.add_conformance(&text);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libtest_and_libtest_mimic_lines() {
        let mut t = Tally::default();
        for line in [
            "test info_is_complete ... ignored, needs an AMD GPU: cargo xtask test --backend rocm",
            "test [needs a driver double: cargo xtask test --backend cuda --double] driver/cuda/noop-wait ... ignored",
            "test plain_ignored ... ignored",
            "test later_run ... ignored",
            "test later_run ... ok",
            "test failing ... FAILED",
            "test result: FAILED. 3 passed; 1 failed; 4 ignored; 0 measured; 0 filtered out; finished in 0.1s",
        ] {
            t.add_line(line);
        }
        assert_eq!((t.passed, t.failed, t.ignored), (3, 1, 4));
        let ignored: Vec<(&str, &str)> = t.still_ignored().iter().map(|(n, w)| (n.as_str(), w.as_str())).collect();
        assert_eq!(
            ignored,
            [
                ("info_is_complete", "needs an AMD GPU: cargo xtask test --backend rocm"),
                ("driver/cuda/noop-wait", "needs a driver double: cargo xtask test --backend cuda --double"),
                ("plain_ignored", "ignored by default"),
            ]
        );
    }

    #[test]
    fn reads_the_conformance_harness_lines() {
        let mut t = Tally { context: "on the cuda double".into(), ..Tally::default() };
        t.add_conformance("cuda\tran\t39\t0\t1\nrocm\tnot run\trocm: no device\nnonsense\n");
        assert_eq!(
            t.conformance,
            [
                "cuda on the cuda double: ran — 39 passed, 0 failed, 1 skipped",
                "rocm on the cuda double: did not run — rocm: no device"
            ]
        );
    }
}
