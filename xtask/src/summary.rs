//! What a `cargo xtask test` run prints last: per backend, whether the conformance suite
//! ran and how it ended (or why it did not run); then every test left ignored, by name and
//! with its reason; then every failure — the test binary (or step) and test, with the first
//! lines of its message — and the totals, failures that named no test (a crate that did
//! not build, a crash, a validation report) counted among them. Built from the commands'
//! output (libtest's and cargo's lines, pytest's short summary) and the conformance
//! harness's summary file, so nothing needs scrolling back for.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Command;

/// The file the conformance harness appends its per-backend lines to
/// (`GPUPORT_CONFORMANCE_SUMMARY`).
const CONFORMANCE_SUMMARY_ENV: &str = "GPUPORT_CONFORMANCE_SUMMARY";

/// How many lines of a failure's message the summary shows.
const MESSAGE_LINES: usize = 4;

/// One failure: where (a test binary as cargo names it when it runs it, or a step of the
/// run), which test (none for a failure that named none), and the first lines of its
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub what: String,
    pub test: Option<String>,
    pub message: Vec<String>,
}

/// Reading one command's output as it goes: the binary running, and the message lines
/// libtest prints for a failed test (`---- NAME stdout ----` …) until its list of failures.
#[derive(Default)]
struct Reading {
    binary: String,
    /// The failed test whose message is being read, and its lines so far.
    message_of: Option<(String, Vec<String>)>,
    messages: Vec<(String, Vec<String>)>,
    /// Failures recorded while reading this command.
    found: usize,
}

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
    /// Every failure, in the order found.
    pub failures: Vec<Failure>,
    reading: Reading,
}

impl Tally {
    /// Takes one line of a `cargo test` run's output: cargo's `Running …` and `error: could
    /// not compile …`, and libtest's `test NAME ... ok|FAILED|ignored[, why]`, `---- NAME
    /// stdout ----` (a failure's message follows) and `test result: ok. 3 passed; …`.
    pub fn add_line(&mut self, line: &str) {
        let raw = line.trim_end();
        let line = raw.trim();
        if let Some((_, lines)) = &mut self.reading.message_of {
            if line == "failures:" || (line.starts_with("---- ") && line.ends_with(" ----")) {
                let (name, lines) = self.reading.message_of.take().unwrap_or_default();
                self.reading.messages.push((name, lines));
            } else {
                // A backtrace, or the hint to ask for one, ends what is worth showing.
                let past = line.starts_with("stack backtrace:") || line.starts_with("note: run with `RUST_BACKTRACE");
                if past {
                    lines.push(String::new());
                }
                let shown = lines.last().is_none_or(|l| !l.is_empty());
                if shown && !line.is_empty() && lines.len() < MESSAGE_LINES {
                    lines.push(line.to_owned());
                }
                return;
            }
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            self.add_totals(rest);
        } else if let Some(name) = line.strip_prefix("---- ").and_then(|l| l.strip_suffix(" ----")) {
            // libtest: `---- NAME stdout ----`; libtest-mimic: `---- NAME ----`.
            let name = name.strip_suffix(" stdout").unwrap_or(name);
            self.reading.message_of = Some((name.to_owned(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("test ") {
            self.add_test(rest);
        } else if let Some(running) = line.strip_prefix("Running ") {
            self.reading.binary = running.to_owned();
        } else if let Some(crate_name) = line.strip_prefix("Doc-tests ") {
            self.reading.binary = format!("doc tests of {crate_name}");
        } else if let Some(krate) = line.strip_prefix("error: could not compile `") {
            let krate = krate.split('`').next().unwrap_or(krate);
            self.add_failure(format!("building {krate}"), None, vec![line.to_owned()]);
            self.failed += 1;
        }
    }

    fn add_failure(&mut self, what: String, test: Option<String>, message: Vec<String>) {
        self.reading.found += 1;
        self.failures.push(Failure { what, test, message });
    }

    /// Ends one command's output: the messages read are given to its failed tests, and a
    /// command that `succeeded` not, yet named no failure, is a failure of `what`.
    fn end_command(&mut self, what: &str, succeeded: bool, tail: &[String]) {
        if let Some(open) = self.reading.message_of.take() {
            self.reading.messages.push(open);
        }
        let mut reading = std::mem::take(&mut self.reading);
        for (_, lines) in &mut reading.messages {
            lines.retain(|l| !l.is_empty());
        }
        let start = self.failures.len() - reading.found.min(self.failures.len());
        for failure in &mut self.failures[start..] {
            if let Some((_, lines)) = reading.messages.iter().find(|(n, _)| Some(n) == failure.test.as_ref()) {
                failure.message.clone_from(lines);
            }
        }
        if !succeeded && reading.found == 0 {
            self.failures.push(Failure {
                what: what.to_owned(),
                test: None,
                message: tail.iter().rev().take(MESSAGE_LINES).rev().cloned().collect(),
            });
            self.failed += 1;
        }
    }

    /// A failure found outside a test binary (a validation report, a step that failed):
    /// recorded and counted.
    pub fn note_failure(&mut self, what: impl Into<String>, message: Vec<String>) {
        self.failures.push(Failure { what: what.into(), test: None, message });
        self.failed += 1;
    }

    /// Whether the only failures are of backends' `X::available` trials (a backend that is
    /// unavailable here), and which.
    pub fn unavailable_backends(&self) -> Vec<&str> {
        self.failures.iter().filter_map(|f| f.test.as_deref().and_then(|t| t.strip_suffix("::available"))).collect()
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
        } else if outcome.starts_with("ok") {
            self.ran.insert(name.to_owned());
        } else if outcome.starts_with("FAILED") {
            self.ran.insert(name.to_owned());
            let binary = self.reading.binary.clone();
            self.add_failure(binary, Some(name.to_owned()), Vec::new());
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

    /// Notes one pytest run's outcome, with the lines of its short summary that name a
    /// failure (`FAILED path::test - message`, `ERROR …`).
    pub fn note_python(&mut self, passed: bool, failed: &[String]) {
        self.python = Some(self.python.unwrap_or(true) && passed);
        for line in failed {
            let (test, message) = line.split_once(" - ").unwrap_or((line, ""));
            let test = test.trim_start_matches("FAILED ").trim_start_matches("ERROR ");
            let message = if message.is_empty() { Vec::new() } else { vec![message.to_owned()] };
            self.failures.push(Failure { what: "pytest".into(), test: Some(test.to_owned()), message });
        }
        if !passed && failed.is_empty() {
            self.failures.push(Failure { what: "pytest".into(), test: None, message: vec!["failed".into()] });
        }
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
        if !self.failures.is_empty() {
            println!("failed ({}):", self.failures.len());
            for f in &self.failures {
                match &f.test {
                    Some(test) => println!("  {}: {test}", f.what),
                    None => println!("  {}", f.what),
                }
                for line in &f.message {
                    println!("      {line}");
                }
            }
        }
        println!("{} passed, {} failed (Rust); {python}", self.passed, self.failed);
    }
}

fn summary_file() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"));
    std::path::absolute(target.join("xtask-conformance-summary.txt")).unwrap_or_default()
}

/// Runs `cmd` with its standard output and error merged into one pipe (so cargo's
/// `Running …` lines stay in order with libtest's), echoing each line to standard output
/// and handing it to `line`; returns whether it succeeded, and its last lines.
pub(crate) fn run_merged(mut cmd: Command, mut line: impl FnMut(&str)) -> (bool, Vec<String>) {
    eprintln!("xtask: running {cmd:?}");
    let (reader, writer) = match std::io::pipe() {
        Ok(pipe) => pipe,
        Err(e) => {
            eprintln!("xtask: no pipe for {cmd:?}: {e}");
            return (false, vec![format!("no pipe: {e}")]);
        }
    };
    let spawned = writer.try_clone().and_then(|w| {
        cmd.stdout(w).stderr(writer);
        cmd.spawn()
    });
    // The command holds the pipe's write ends now: `cmd` keeps copies until dropped.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return (false, vec![format!("could not start: {e}")]),
    };
    let mut tail: Vec<String> = Vec::new();
    for text in BufReader::new(reader).lines().map_while(Result::ok) {
        println!("{text}");
        line(&text);
        if !text.trim().is_empty() {
            if tail.len() == MESSAGE_LINES {
                tail.remove(0);
            }
            tail.push(text);
        }
    }
    (child.wait().is_ok_and(|s| s.success()), tail)
}

/// Runs `cargo test …`, echoing its output and adding its results to `tally`.
pub(crate) fn run_tests(mut cmd: Command, tally: &mut Tally) -> bool {
    let summary = summary_file();
    let _ = std::fs::remove_file(&summary);
    cmd.env(CONFORMANCE_SUMMARY_ENV, &summary);
    let what = describe(&cmd);
    let (ok, tail) = run_merged(cmd, |line| tally.add_line(line));
    tally.end_command(&what, ok, &tail);
    if let Ok(text) = std::fs::read_to_string(&summary) {
        tally.add_conformance(&text);
    }
    ok
}

/// A command as the summary names it: its arguments after the program, without `-q`.
fn describe(cmd: &Command) -> String {
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).filter(|a| a != "-q").collect();
    format!("{} {}", cmd.get_program().to_string_lossy().rsplit('/').next().unwrap_or(""), args.join(" "))
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

    #[test]
    fn failures_are_named_with_their_binary_and_first_lines() {
        let mut t = Tally::default();
        for line in [
            "     Running crates/conformance.rs (target/debug/deps/conformance-0123)",
            "test a::ok_one ... ok",
            "test a::broken ... FAILED",
            "",
            "failures:",
            "",
            "---- a::broken stdout ----",
            "",
            "thread 'a::broken' panicked at src/lib.rs:3:5:",
            "the first line",
            "the second line",
            "the third line",
            "the fourth line, cut",
            "",
            "failures:",
            "    a::broken",
            "",
            "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out",
        ] {
            t.add_line(line);
        }
        t.end_command("cargo test", false, &[]);
        assert_eq!(
            t.failures,
            [Failure {
                what: "crates/conformance.rs (target/debug/deps/conformance-0123)".into(),
                test: Some("a::broken".into()),
                message: vec![
                    "thread 'a::broken' panicked at src/lib.rs:3:5:".into(),
                    "the first line".into(),
                    "the second line".into(),
                    "the third line".into(),
                ],
            }]
        );
        assert_eq!((t.passed, t.failed), (1, 1));
    }

    #[test]
    fn a_build_failure_and_a_silent_failure_are_counted() {
        let mut t = Tally::default();
        t.add_line("error: could not compile `gpuport-vendor-port-template` (lib) due to 1 previous error");
        t.end_command("cargo test --manifest-path x", false, &["error: …".into()]);
        t.end_command("cargo test -p crashes", false, &["Segmentation fault".into()]);
        let named: Vec<&str> = t.failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(named, ["building gpuport-vendor-port-template", "cargo test -p crashes"]);
        assert_eq!(t.failed, 2);
        assert!(t.unavailable_backends().is_empty());
        t.add_line("test cuda::available ... FAILED");
        assert_eq!(t.unavailable_backends(), ["cuda"]);
    }
}
