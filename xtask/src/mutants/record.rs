//! The record of a target's mutants: every mutant cargo-mutants generates for it, with
//! where it changes the code, what it writes there and how the suite did against it in the
//! last run that ran it (`untested` until one has). It is checked in
//! (`tests/mutants/recorded/<target>.txt`) so that CI can re-run a sample of the caught
//! mutants without cargo-mutants (`--sample`), and so that a change to a target that was
//! not followed by a fresh run is noticed: the record names a hash of the target's
//! sources, one of each of its files, and each mutant a hash of the text it replaces.
//!
//! A run keeps an earlier outcome of a mutant whose file is unchanged, as cargo-mutants'
//! own incremental mode (`--in-diff`) judges only the mutants of changed code: a kit of
//! several hundred mutants is recorded over many runs, and a change to one file (a case's
//! hook, a fix) sends only that file's mutants back to `untested`. A change elsewhere
//! could still hide a mutant a case caught; the sample CI re-runs from the record
//! (`--sample`) is what notices that.
//!
//! One line per mutant, tab-separated: outcome, file, `line:col-line:col` (cargo-mutants'
//! span: lines and columns counted from 1, in characters, end exclusive), the hash of the
//! replaced text, the replacement (`\\`, tab and newline escaped), cargo-mutants' name.

use std::path::Path;

/// Where the records live, one file per template.
pub const DIR: &str = "tests/mutants/recorded";

/// How the conformance suite did against one mutant in the full run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Caught,
    Timeout,
    Missed,
    Unviable,
    /// Not run yet: its slice of a sharded run is still to come.
    Untested,
}

impl Outcome {
    /// Every outcome with the name cargo-mutants gives its list (`caught.txt`, …) and the
    /// record uses.
    pub const ALL: [(Outcome, &'static str); 5] = [
        (Outcome::Caught, "caught"),
        (Outcome::Timeout, "timeout"),
        (Outcome::Missed, "missed"),
        (Outcome::Unviable, "unviable"),
        (Outcome::Untested, "untested"),
    ];

    fn name(self) -> &'static str {
        Self::ALL.iter().find(|(o, _)| *o == self).map(|(_, n)| *n).unwrap_or("?")
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(o, _)| *o)
    }
}

/// A position in a source file: line and column counted from 1, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

/// One recorded mutant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutant {
    pub outcome: Outcome,
    /// The file, relative to the target's root (`Target::root`).
    pub file: String,
    pub start: Pos,
    /// Exclusive.
    pub end: Pos,
    /// Hash of the text between `start` and `end` when recorded.
    pub replaced: u64,
    pub replacement: String,
    /// cargo-mutants' name, `file:line:col: replace … with …`.
    pub name: String,
}

/// A target's record.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    /// Hash of the target's sources (every `.rs` file under `src/`) when recorded.
    pub sources: u64,
    /// Each of those files, named as the mutants name theirs, with the hash of its text
    /// (empty in a record written before files were hashed one by one).
    pub files: Vec<(String, u64)>,
    pub mutants: Vec<Mutant>,
}

/// FNV-1a, 64 bits: a stable hash with no dependency (not for security: it only tells a
/// changed text from the recorded one).
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The hash of a target's sources: every `.rs` file under `src/`, by relative path, in
/// path order.
pub fn hash_sources(dir: &Path) -> Result<u64, String> {
    let mut files = Vec::new();
    collect_rs(&dir.join("src"), &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let rel = file.strip_prefix(dir).unwrap_or(&file);
        all.extend_from_slice(rel.to_string_lossy().as_bytes());
        all.push(0);
        all.extend(std::fs::read(&file).map_err(|e| format!("reading {}: {e}", file.display()))?);
        all.push(0);
    }
    Ok(hash(&all))
}

/// Each `.rs` file under the target's `src/`, named relative to the target's root (as
/// cargo-mutants names a mutant's file), with the hash of its text, in path order.
pub fn hash_files(target: &super::Target) -> Result<Vec<(String, u64)>, String> {
    let mut files = Vec::new();
    collect_rs(&Path::new(target.dir).join("src"), &mut files)?;
    files.sort();
    let root = Path::new(target.root());
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
            let name = if root == Path::new(".") { &file } else { file.strip_prefix(root).unwrap_or(&file) };
            Ok((name.to_string_lossy().into_owned(), hash(&text)))
        })
        .collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("reading {}: {e}", dir.display()))?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The byte range of `start..end` in `text`, or `None` where the text is shorter.
pub fn byte_range(text: &str, start: Pos, end: Pos) -> Option<std::ops::Range<usize>> {
    let offset = |p: Pos| -> Option<usize> {
        let line_start = if p.line == 1 { 0 } else { text.match_indices('\n').nth(p.line.checked_sub(2)?)?.0 + 1 };
        let line = text[line_start..].split('\n').next()?;
        // The column may point just past the line's last character (an exclusive end).
        let within = line.char_indices().map(|(i, _)| i).chain([line.len()]).nth(p.column.checked_sub(1)?)?;
        Some(line_start + within)
    };
    let (a, b) = (offset(start)?, offset(end)?);
    (a <= b).then_some(a..b)
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn pos(s: &str) -> Option<Pos> {
    let (line, column) = s.split_once(':')?;
    Some(Pos { line: line.parse().ok()?, column: column.parse().ok()? })
}

impl Record {
    /// The record as its file holds it.
    pub fn to_text(&self, target: &str, tool: &str) -> String {
        let mut text = format!(
            "# The mutants of {target}, as {tool} generated them, and the outcome of each in\n\
             # the last run of `cargo xtask mutants` that ran it. Written by that command; CI re-runs\n\
             # a sample of the caught ones from here (`cargo xtask mutants --sample N`).\n\
             sources\t{:016x}\n",
            self.sources
        );
        for (file, h) in &self.files {
            text.push_str(&format!("file\t{file}\t{h:016x}\n"));
        }
        for m in &self.mutants {
            text.push_str(&format!(
                "{}\t{}\t{}:{}-{}:{}\t{:016x}\t{}\t{}\n",
                m.outcome.name(),
                m.file,
                m.start.line,
                m.start.column,
                m.end.line,
                m.end.column,
                m.replaced,
                escape(&m.replacement),
                m.name
            ));
        }
        text
    }

    /// Reads a record's file text.
    pub fn parse(text: &str) -> Result<Record, String> {
        let mut sources = None;
        let mut files = Vec::new();
        let mut mutants = Vec::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
            let bad = || format!("line {}: not a recorded mutant: {line:?}", n + 1);
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["sources", h] => sources = Some(u64::from_str_radix(h, 16).map_err(|_| bad())?),
                ["file", file, h] => files.push(((*file).to_owned(), u64::from_str_radix(h, 16).map_err(|_| bad())?)),
                [outcome, file, span, replaced, replacement, name] => {
                    let (start, end) = span.split_once('-').ok_or_else(bad)?;
                    mutants.push(Mutant {
                        outcome: Outcome::parse(outcome).ok_or_else(bad)?,
                        file: (*file).to_owned(),
                        start: pos(start).ok_or_else(bad)?,
                        end: pos(end).ok_or_else(bad)?,
                        replaced: u64::from_str_radix(replaced, 16).map_err(|_| bad())?,
                        replacement: unescape(replacement),
                        name: (*name).to_owned(),
                    });
                }
                _ => return Err(bad()),
            }
        }
        Ok(Record { sources: sources.ok_or("no `sources` line")?, files, mutants })
    }
}

/// Builds a target's record: every mutant in `list` (cargo-mutants' `--list --json`, with
/// spans), each with its outcome in the finished run whose output is `out`, else the one
/// `previous` holds for it while its file is the one `previous` was made from (all the
/// sources, for a record without file hashes), else `untested`.
pub fn from_run(target: &super::Target, list: &str, out: &Path, previous: Option<&Record>) -> Result<Record, String> {
    let list: serde_json::Value =
        serde_json::from_str(list).map_err(|e| format!("reading cargo mutants --list --json: {e}"))?;
    let sources = hash_sources(Path::new(target.dir))?;
    let files = hash_files(target)?;
    let mut outcomes = std::collections::HashMap::new();
    if let Some(previous) = previous {
        let hash_in = |files: &[(String, u64)], file: &str| files.iter().find(|(f, _)| f == file).map(|(_, h)| *h);
        let unchanged = |file: &str| {
            previous.sources == sources
                || hash_in(&previous.files, file).is_some_and(|h| hash_in(&files, file) == Some(h))
        };
        for m in previous.mutants.iter().filter(|m| unchanged(&m.file)) {
            outcomes.insert(m.name.clone(), m.outcome);
        }
    }
    for (outcome, name) in Outcome::ALL {
        let path = out.join("mutants.out").join(format!("{name}.txt"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            outcomes.insert(line.to_owned(), outcome);
        }
    }
    let root = Path::new(target.root());
    let mut mutants = Vec::new();
    for m in list.as_array().ok_or("cargo mutants --list --json gave no list")? {
        let text = |key: &str| m[key].as_str().map(str::to_owned).ok_or(format!("a mutant without `{key}`: {m}"));
        let at = |end: &str| -> Result<Pos, String> {
            let p = &m["span"][end];
            let n = |k: &str| p[k].as_u64().map(|v| v as usize).ok_or(format!("a mutant without a span: {m}"));
            Ok(Pos { line: n("line")?, column: n("column")? })
        };
        let (file, name) = (text("file")?, text("name")?);
        let (start, end) = (at("start")?, at("end")?);
        let source = std::fs::read_to_string(root.join(&file)).map_err(|e| format!("reading {file}: {e}"))?;
        let range = byte_range(&source, start, end).ok_or(format!("{name}: its span is not in {file}"))?;
        mutants.push(Mutant {
            outcome: outcomes.get(&name).copied().unwrap_or(Outcome::Untested),
            file,
            start,
            end,
            replaced: hash(source[range].as_bytes()),
            replacement: text("replacement")?,
            name,
        });
    }
    Ok(Record { sources, files, mutants })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_count_characters_from_one_with_an_exclusive_end() {
        let text = "fn a() {}\nconst C: u64 = 1 << 30; // é\n";
        let r = byte_range(text, Pos { line: 2, column: 18 }, Pos { line: 2, column: 20 }).unwrap();
        assert_eq!(&text[r], "<<");
        let r = byte_range(text, Pos { line: 2, column: 28 }, Pos { line: 2, column: 29 }).unwrap();
        assert_eq!(&text[r], "é");
        // The end may sit just past a line's last character.
        let r = byte_range(text, Pos { line: 1, column: 8 }, Pos { line: 1, column: 10 }).unwrap();
        assert_eq!(&text[r], "{}");
        assert_eq!(byte_range(text, Pos { line: 9, column: 1 }, Pos { line: 9, column: 2 }), None);
        assert_eq!(byte_range(text, Pos { line: 1, column: 40 }, Pos { line: 1, column: 41 }), None);
    }

    /// A template in a scratch folder holding `files` under `src/`, with a folder `out/`
    /// for cargo-mutants' lists.
    fn scratch(tag: &str, files: &[(&str, &str)]) -> (std::path::PathBuf, super::super::Target) {
        let dir = std::env::temp_dir().join(format!("xtask-record-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::create_dir_all(dir.join("out/mutants.out")).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join("src").join(name), text).unwrap();
        }
        let path: &'static str = Box::leak(dir.to_string_lossy().into_owned().into_boxed_str());
        (dir, super::super::Target { name: "t", dir: path, kit: None })
    }

    /// cargo-mutants' `--list --json` for mutants replacing the `u8` a function `fn NAME() ->
    /// u8 { N }` returns with 0, each `(file, line, NAME)`.
    fn listing(mutants: &[(&str, usize, &str)]) -> String {
        let one = |(file, line, f): &(&str, usize, &str)| {
            format!(
                r#"{{"file": "{file}", "name": "{file}:{line}:16: replace {f} -> u8 with 0", "replacement": "0",
                "span": {{"start": {{"line": {line}, "column": 16}}, "end": {{"line": {line}, "column": 17}}}}}}"#
            )
        };
        format!("[{}]", mutants.iter().map(one).collect::<Vec<_>>().join(","))
    }

    #[test]
    fn a_slice_keeps_the_other_slices_outcomes_while_the_sources_are_unchanged() {
        let (dir, target) = scratch("slices", &[("lib.rs", "fn a() -> u8 { 1 }\nfn b() -> u8 { 2 }\n")]);
        let list = &listing(&[("src/lib.rs", 1, "a"), ("src/lib.rs", 2, "b")]);
        // This slice ran `a` only.
        let out = dir.join("out");
        std::fs::write(out.join("mutants.out/caught.txt"), "src/lib.rs:1:16: replace a -> u8 with 0\n").unwrap();
        let first = from_run(&target, list, &out, None).unwrap();
        let outcomes = |r: &Record| r.mutants.iter().map(|m| m.outcome).collect::<Vec<_>>();
        assert_eq!(outcomes(&first), [Outcome::Caught, Outcome::Untested]);
        // The next slice ran `b`; `a`'s outcome is kept.
        std::fs::write(out.join("mutants.out/caught.txt"), "").unwrap();
        std::fs::write(out.join("mutants.out/missed.txt"), "src/lib.rs:2:16: replace b -> u8 with 0\n").unwrap();
        let second = from_run(&target, list, &out, Some(&first)).unwrap();
        assert_eq!(outcomes(&second), [Outcome::Caught, Outcome::Missed]);
        // Once the sources change, what earlier slices found no longer stands.
        std::fs::write(dir.join("src/lib.rs"), "fn a() -> u8 { 3 }\nfn b() -> u8 { 2 }\n").unwrap();
        let third = from_run(&target, list, &out, Some(&second)).unwrap();
        assert_eq!(outcomes(&third), [Outcome::Untested, Outcome::Missed]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_change_to_one_file_sends_back_only_that_files_mutants() {
        let (dir, target) = scratch("files", &[("a.rs", "fn a() -> u8 { 1 }\n"), ("b.rs", "fn b() -> u8 { 2 }\n")]);
        let list = &listing(&[("src/a.rs", 1, "a"), ("src/b.rs", 1, "b")]);
        let out = dir.join("out");
        std::fs::write(
            out.join("mutants.out/caught.txt"),
            "src/a.rs:1:16: replace a -> u8 with 0\nsrc/b.rs:1:16: replace b -> u8 with 0\n",
        )
        .unwrap();
        let first = from_run(&target, list, &out, None).unwrap();
        let names: Vec<&str> = first.files.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["src/a.rs", "src/b.rs"], "files are named as the mutants name theirs");
        assert_eq!(Record::parse(&first.to_text("t", "tool")).unwrap(), first);
        // A later run that ran nothing, after `b.rs` changed: `a`'s outcome stands.
        std::fs::write(out.join("mutants.out/caught.txt"), "").unwrap();
        std::fs::write(dir.join("src/b.rs"), "fn b() -> u8 { 2 } // changed\n").unwrap();
        let second = from_run(&target, list, &out, Some(&first)).unwrap();
        let outcomes: Vec<Outcome> = second.mutants.iter().map(|m| m.outcome).collect();
        assert_eq!(outcomes, [Outcome::Caught, Outcome::Untested]);
        // A record without file hashes keeps nothing once any source changed.
        let old = Record { files: Vec::new(), ..first };
        let third = from_run(&target, list, &out, Some(&old)).unwrap();
        assert!(third.mutants.iter().all(|m| m.outcome == Outcome::Untested));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let record = Record {
            sources: 0xfeed,
            files: vec![("src/lib.rs".into(), 0xbeef)],
            mutants: vec![Mutant {
                outcome: Outcome::Caught,
                file: "src/lib.rs".into(),
                start: Pos { line: 3, column: 5 },
                end: Pos { line: 4, column: 1 },
                replaced: hash(b"x"),
                replacement: "a\tb\\n\nc".into(),
                name: "src/lib.rs:3:5: replace f -> u8 with 0".into(),
            }],
        };
        assert_eq!(Record::parse(&record.to_text("queue", "cargo-mutants 27.1.0")).unwrap(), record);
        assert!(Record::parse("sources\tzz\n").is_err());
        assert!(Record::parse("caught\tonly three\tfields\n").is_err());
        assert!(Record::parse("# no sources\n").is_err());
    }
}
