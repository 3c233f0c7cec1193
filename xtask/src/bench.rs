//! `cargo xtask bench [--quick]`: the HAL benchmarks (`crates/runtime/benches/hal.rs`,
//! criterion), each figure beside its floor measured in the same run, in two thread
//! placements — `free` (the scheduler places every thread) and `one-core` (every thread on
//! CPU 0) — then one table: figure, floor, gpuport, ratio per placement, target, and
//! whether the free placement meets it. The table is also written to
//! `target/bench-table.md`. The full run measures each figure of up to 16 MiB in five
//! rounds (floor, then gpuport, five times) and shows the median of the rounds' ratios: on
//! a small virtual machine a sub-microsecond hand-off moves by 2–3× with where the threads
//! happen to run, and a 16 MiB copy by 30 %. `--quick` runs the free placement only, one round, with criterion's quick
//! mode (under two minutes; CI runs it as a smoke test and asserts nothing about time).
//! The full run then also runs the staged-copy benchmark (`benches/staged_copy.rs`).
//!
//! The interchange figures come from two more benchmarks, in the free placement only (an
//! exchange runs on the calling thread): `crates/cai/benches/interchange.rs` (criterion:
//! DLPack and CUDA Array Interface in Rust, floors with as many heap allocations and the
//! descriptor filled by hand) and `crates/python/benches/interchange.py`, run with the
//! wheel built as users get it (the `wheel` profile; never the dev-profile build) against
//! NumPy, apache-tvm-ffi, dicts built in Python and a C loop over a hand-written producer.

use std::path::{Path, PathBuf};

use crate::python::Floor;

/// What a figure must meet.
#[derive(Clone, Copy)]
enum Target {
    /// gpuport ÷ floor at most this.
    Ratio(f64),
    /// An absolute time, in nanoseconds, at most this.
    AtMost(f64),
    /// No target: reported for information (a path the issue's figures no longer cover).
    Report,
}

/// Which benchmark measures a figure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `crates/runtime/benches/hal.rs`, in every placement.
    Hal,
    /// `crates/cai/benches/interchange.rs`, free placement.
    RustInterchange,
    /// `crates/python/benches/interchange.py`, free placement.
    PythonInterchange,
    /// The same with the 3.12 wheel (vectorcall), run by the interpreter
    /// `GPUPORT_BENCH_PYTHON` names; not measured without it.
    Python312Interchange,
    /// `backends/cuda/benches/compile.rs`, free placement, on the CUDA driver double with
    /// NVRTC.
    Compile,
}

struct Figure {
    source: Source,
    group: &'static str,
    what: &'static str,
    /// Operations per measured iteration (the table shows per-operation times).
    ops: f64,
    target: Target,
}

const FIGURES: &[Figure] = &[
    Figure {
        source: Source::Hal,
        group: "enqueue_100k",
        what: "no-op enqueue (100k + synchronize), per op",
        ops: 100_000.0,
        target: Target::Ratio(2.0),
    },
    Figure {
        source: Source::Hal,
        group: "copy_8b",
        what: "8-byte copy + synchronize",
        ops: 1.0,
        target: Target::Ratio(1.5),
    },
    Figure {
        source: Source::Hal,
        group: "copy_4k",
        what: "4 KiB copy + synchronize",
        ops: 1.0,
        target: Target::Ratio(1.5),
    },
    Figure {
        source: Source::Hal,
        group: "copy_1m",
        what: "1 MiB copy + synchronize",
        ops: 1.0,
        target: Target::Ratio(1.3),
    },
    Figure {
        source: Source::Hal,
        group: "array_1m",
        what: "Array upload + download, 1 MiB f32",
        ops: 1.0,
        target: Target::Ratio(1.5),
    },
    Figure {
        source: Source::Hal,
        group: "staged_64k",
        what: "host → ext → host (copy engine), 64 KiB",
        ops: 1.0,
        target: Target::Ratio(5.0),
    },
    Figure {
        source: Source::Hal,
        group: "staged_1m",
        what: "host → ext → host (copy engine), 1 MiB",
        ops: 1.0,
        target: Target::Ratio(2.0),
    },
    Figure {
        source: Source::Hal,
        group: "staged_16m",
        what: "host → ext → host (copy engine), 16 MiB",
        ops: 1.0,
        target: Target::Ratio(1.25),
    },
    Figure {
        source: Source::Hal,
        group: "staged_64m",
        what: "host → ext → host (copy engine), 64 MiB",
        ops: 1.0,
        target: Target::Ratio(1.25),
    },
    Figure {
        source: Source::Hal,
        group: "ext_staged_1m",
        what: "staged ext:0 → ext:1, 1 MiB",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::Hal,
        group: "ext_staged_16m",
        what: "staged ext:0 → ext:1, 16 MiB",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::Hal,
        group: "stream_lifecycle",
        what: "stream create + use + destroy",
        ops: 1.0,
        target: Target::AtMost(20_000.0),
    },
    Figure {
        source: Source::Hal,
        group: "stream_create_100k",
        what: "stream create with 100,000 live / with a handful, per stream",
        ops: 1_000.0,
        target: Target::Ratio(3.0),
    },
    Figure {
        source: Source::Hal,
        group: "dispatch_query",
        what: "AnyStream::query vs the typed call",
        ops: 1.0,
        target: Target::Ratio(1.2),
    },
    Figure {
        source: Source::Hal,
        group: "strided_2d",
        what: "sliced matrix host → ext (2048 rows × 256 B) / a memcpy per row",
        ops: 1.0,
        target: Target::Ratio(3.0),
    },
    Figure {
        source: Source::Hal,
        group: "column_read",
        what: "a 4096 × 4096 f32 ext matrix's column to host / a gathering loop",
        ops: 1.0,
        target: Target::Ratio(5.0),
    },
    Figure {
        source: Source::Hal,
        group: "plugin_enqueue_10k",
        what: "ext as a plugin / linked in: no-op enqueue, per op",
        ops: 10_000.0,
        target: Target::Ratio(1.2),
    },
    Figure {
        source: Source::Hal,
        group: "plugin_dispatch_query",
        what: "ext as a plugin / linked in: AnyStream::query",
        ops: 1.0,
        target: Target::Ratio(1.2),
    },
    Figure {
        source: Source::Hal,
        group: "plugin_copy_4k",
        what: "ext as a plugin / linked in: 4 KiB copy + synchronize",
        ops: 1.0,
        target: Target::Ratio(1.2),
    },
    Figure {
        source: Source::Hal,
        group: "plugin_copy_1m",
        what: "ext as a plugin / linked in: 1 MiB copy + synchronize",
        ops: 1.0,
        target: Target::Ratio(1.2),
    },
    Figure {
        source: Source::Hal,
        group: "callback_round_trip",
        what: "no-op callback + synchronize (stays)",
        ops: 1.0,
        target: Target::Ratio(1.4),
    },
    Figure {
        source: Source::Hal,
        group: "copy_256m",
        what: "256 MiB copy + synchronize (stays)",
        ops: 1.0,
        target: Target::Ratio(1.1),
    },
    Figure {
        source: Source::RustInterchange,
        group: "dlpack_export_host",
        what: "Rust: to_dlpack + drop, host (zero-copy)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::RustInterchange,
        group: "dlpack_export_ext",
        what: "Rust: to_dlpack + drop, ext (zero-copy)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::RustInterchange,
        group: "dlpack_round_trip",
        what: "Rust: to_dlpack + from_dlpack + drop",
        ops: 1.0,
        target: Target::AtMost(100.0),
    },
    Figure {
        source: Source::RustInterchange,
        group: "cai_round_trip",
        what: "Rust: CAI export to the neutral form + import",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_np_from_gp",
        what: "np.from_dlpack(gp) / np.from_dlpack(np)",
        ops: 1.0,
        target: Target::Ratio(1.1),
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_gp_from_np",
        what: "gp.from_dlpack(np) / np.from_dlpack(np)",
        ops: 1.0,
        target: Target::Ratio(1.25),
    },
    Figure {
        source: Source::Python312Interchange,
        group: "py_np_from_gp",
        what: "np.from_dlpack(gp) / np.from_dlpack(np), 3.12 wheel",
        ops: 1.0,
        target: Target::Ratio(1.25),
    },
    Figure {
        source: Source::Python312Interchange,
        group: "py_gp_from_np",
        what: "gp.from_dlpack(np) / np.from_dlpack(np), 3.12 wheel",
        ops: 1.0,
        target: Target::Ratio(1.5),
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_gp_from_gp",
        what: "gp.from_dlpack(gp) / np.from_dlpack(np)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_dunder",
        what: "gp.__dlpack__() / np.__dlpack__()",
        ops: 1.0,
        target: Target::Ratio(1.25),
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_gp_from_table",
        what: "gp.from_dlpack(x), x a producer's C table / tvm_ffi.from_dlpack(np)",
        ops: 1.0,
        target: Target::Ratio(1.0),
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_tvm_from_gp",
        what: "tvm_ffi.from_dlpack(gp), gpuport's C table / tvm_ffi.from_dlpack(np)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_cai_read",
        what: "interface dict read / the same dict built in Python",
        ops: 1.0,
        target: Target::Ratio(1.5),
    },
    Figure {
        source: Source::PythonInterchange,
        group: "py_cai_import",
        what: "from_cuda_array_interface(dict), ext / np.asarray(__array_interface__)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::PythonInterchange,
        group: "c_exchange",
        what: "C exchange API: from_py_object_no_sync + deleter",
        ops: 1.0,
        target: Target::AtMost(80.0),
    },
    Figure {
        source: Source::Compile,
        group: "compile_cold",
        what: "compile from source, no cache hit (NVRTC; floor: the disk cache off)",
        ops: 1.0,
        target: Target::Report,
    },
    Figure {
        source: Source::Compile,
        group: "compile_disk_hit",
        what: "compile from source, disk-cache hit (floor: reading the entry)",
        ops: 1.0,
        target: Target::AtMost(1_000_000.0),
    },
    Figure {
        source: Source::Compile,
        group: "compile_memory_hit",
        what: "compile from source, in-process hit (floor: a hash lookup)",
        ops: 1.0,
        target: Target::AtMost(1_000.0),
    },
];

const PLACEMENTS: &[&str] = &["free", "one-core"];

/// How many times the full run measures each figure of up to 16 MiB (see `pair` in the
/// bench).
const FULL_ROUNDS: &str = "5";
const ROUNDS_ENV: &str = "GPUPORT_BENCH_ROUNDS";

fn criterion_home(placement: &str) -> Result<PathBuf, String> {
    let here = std::env::current_dir().map_err(|e| format!("current folder: {e}"))?;
    Ok(here.join("target").join(format!("criterion-{placement}")))
}

/// The median of one benchmark, in nanoseconds per iteration, from criterion's
/// `estimates.json`.
fn median_ns(home: &Path, group: &str, function: &str) -> Option<f64> {
    let text = std::fs::read_to_string(home.join(group).join(function).join("new/estimates.json")).ok()?;
    let median = &text[text.find("\"median\"")?..];
    let value = &median[median.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = value.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+')))?;
    value[..end].parse().ok()
}

/// The medians of `function`'s rounds (`function/0`, `function/1`, …) in `group`.
fn rounds_ns(home: &Path, group: &str, function: &str) -> Vec<Option<f64>> {
    (0..)
        .map_while(|r| home.join(group).join(function).join(r.to_string()).is_dir().then_some(r))
        .map(|r| median_ns(home, group, &format!("{function}/{r}")))
        .collect()
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (n > 0).then(|| if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

/// One figure in one placement: the median floor and gpuport times over the rounds, and
/// the median of the rounds' ratios.
struct Measured {
    floor: Option<f64>,
    ours: Option<f64>,
    ratio: Option<f64>,
}

fn measure(home: &Path, group: &str) -> Measured {
    from_rounds(rounds_ns(home, group, "floor"), rounds_ns(home, group, "gpuport"))
}

fn from_rounds(floors: Vec<Option<f64>>, ours: Vec<Option<f64>>) -> Measured {
    let ratios = floors.iter().zip(&ours).filter_map(|(f, g)| Some(g.as_ref()? / f.as_ref()?)).collect();
    Measured {
        floor: median(floors.into_iter().flatten().collect()),
        ours: median(ours.into_iter().flatten().collect()),
        ratio: median(ratios),
    }
}

/// The Python benchmark's results: lines `NAME floor|gpuport NS…`.
struct PythonRounds(String);

impl PythonRounds {
    fn measure(&self, group: &str) -> Measured {
        let side = |which: &str| -> Vec<Option<f64>> {
            self.0
                .lines()
                .filter_map(|l| l.strip_prefix(group)?.strip_prefix(' ')?.strip_prefix(which)?.strip_prefix(' '))
                .flat_map(|rest| rest.split_whitespace().map(|v| v.parse().ok()))
                .collect()
        };
        from_rounds(side("floor"), side("gpuport"))
    }
}

fn interchange_home() -> Result<PathBuf, String> {
    criterion_home("interchange")
}

/// The Rust interchange benchmark (free placement: an exchange runs on the caller's thread).
fn run_rust_interchange(quick: bool) -> Result<(), String> {
    let home = interchange_home()?;
    let _ = std::fs::remove_dir_all(&home);
    let mut cmd = crate::cargo();
    cmd.args(["bench", "-p", "gpuport-cai", "--bench", "interchange", "--"]);
    if quick {
        cmd.arg("--quick");
    }
    cmd.env("CRITERION_HOME", &home).env(ROUNDS_ENV, if quick { "1" } else { FULL_ROUNDS }).env_remove(WORKER_CPUS_ENV);
    if crate::run(cmd) {
        Ok(())
    } else {
        Err("the interchange benchmark failed".into())
    }
}

/// The compile benchmark, on the CUDA driver double with the compilers `cargo xtask test`
/// names (NVRTC from the Python environment's wheel; made first).
fn run_compile(quick: bool) -> Result<(), String> {
    let home = criterion_home("compile")?;
    let _ = std::fs::remove_dir_all(&home);
    crate::python::ensure_venv()?;
    crate::doubles::build()?;
    let mut cmd = crate::cargo();
    cmd.args(["bench", "-p", "gpuport-cuda", "--bench", "compile", "--"]);
    if quick {
        cmd.arg("--quick");
    }
    let cuda = crate::doubles::DOUBLES.iter().find(|d| d.backend == "cuda").ok_or("no CUDA double")?;
    cmd.envs(crate::doubles::Place::plain().env(cuda)).envs(crate::doubles::compilers());
    cmd.env("CRITERION_HOME", &home).env(ROUNDS_ENV, if quick { "1" } else { FULL_ROUNDS }).env_remove(WORKER_CPUS_ENV);
    if crate::run(cmd) {
        Ok(())
    } else {
        Err("the compile benchmark failed".into())
    }
}

/// The Python interchange benchmark with the `wheel`-profile wheel for `floor`; its rounds (none
/// when the 3.12 wheel has no interpreter to run with).
fn run_python_interchange(quick: bool, floor: Floor) -> Result<PythonRounds, String> {
    let rounds = if quick { "1" } else { FULL_ROUNDS };
    let results = PathBuf::from(format!("target/bench-python-{floor:?}.txt").to_lowercase());
    if !crate::python::bench_interchange(&results, rounds, quick, floor)? {
        println!(
            "xtask: the 3.12 wheel's figures are not measured: set {} to a Python ≥ 3.12 with NumPy",
            crate::python::BENCH_PYTHON_ENV
        );
        return Ok(PythonRounds(String::new()));
    }
    std::fs::read_to_string(&results).map(PythonRounds).map_err(|e| format!("{}: {e}", results.display()))
}

fn run_placement(placement: &str, quick: bool) -> Result<(), String> {
    let home = criterion_home(placement)?;
    let _ = std::fs::remove_dir_all(&home);
    let mut cmd = crate::cargo();
    cmd.args(["bench", "-p", "gpuport-runtime", "--bench", "hal", "--"]);
    if quick {
        cmd.arg("--quick");
    }
    cmd.env("GPUPORT_BENCH_PLACEMENT", placement)
        .env("CRITERION_HOME", &home)
        .env(ROUNDS_ENV, if quick { "1" } else { FULL_ROUNDS });
    if placement == "one-core" {
        cmd.env(WORKER_CPUS_ENV, "0");
    } else {
        cmd.env_remove(WORKER_CPUS_ENV);
    }
    if crate::run(cmd) {
        Ok(())
    } else {
        Err(format!("the benchmarks failed ({placement} placement)"))
    }
}

/// gpuport-queue's pool placement variable.
const WORKER_CPUS_ENV: &str = "GPUPORT_WORKER_CPUS";

fn human(ns: f64) -> String {
    match ns {
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}

/// Which figures a run measures, and how long.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Every figure, full rounds, both placements; then the staged-copy benchmark.
    Full,
    /// Every figure, one round, the free placement, criterion's quick mode (CI's smoke
    /// run: nothing about time is judged).
    Quick,
    /// The interchange figures only, full rounds.
    Interchange,
}

/// Runs the benchmarks and prints the table.
pub fn bench(run: Run) -> Result<(), String> {
    let quick = run == Run::Quick;
    let placements: &[&str] = if run == Run::Full { PLACEMENTS } else { &PLACEMENTS[..1] };
    if run != Run::Interchange {
        for placement in placements {
            run_placement(placement, quick)?;
        }
    }
    run_rust_interchange(quick)?;
    let python = run_python_interchange(quick, Floor::Py311)?;
    let python312 = run_python_interchange(quick, Floor::Py312)?;
    if run != Run::Interchange {
        run_compile(quick)?;
    }
    let compile = criterion_home("compile")?;
    let homes: Vec<PathBuf> = placements.iter().map(|p| criterion_home(p)).collect::<Result<_, _>>()?;
    let interchange = interchange_home()?;
    let figures =
        FIGURES.iter().filter(|f| run != Run::Interchange || !matches!(f.source, Source::Hal | Source::Compile));
    // Interchange figures have the free placement only: the other columns show "—".
    let table = render(placements, figures, |f, i| match f.source {
        Source::Hal => measure(&homes[i], f.group),
        _ if i > 0 => from_rounds(vec![], vec![]),
        Source::RustInterchange => measure(&interchange, f.group),
        Source::PythonInterchange => python.measure(f.group),
        Source::Python312Interchange => python312.measure(f.group),
        Source::Compile => measure(&compile, f.group),
    });
    println!("\n{table}");
    let _ = std::fs::write("target/bench-table.md", &table);
    if run == Run::Full {
        let mut staged = crate::cargo();
        staged.args(["bench", "-p", "gpuport-runtime", "--bench", "staged_copy"]);
        if !crate::run(staged) {
            return Err("the staged-copy benchmark failed".into());
        }
    }
    Ok(())
}

/// The table: one row per figure — its floor and gpuport's time in the first placement,
/// the ratio in each placement, the target, and whether the first placement meets it.
/// `measured(figure, i)` gives the figure's rounds in `placements[i]`.
fn render<'a>(
    placements: &[&str],
    figures: impl Iterator<Item = &'a Figure>,
    measured: impl Fn(&Figure, usize) -> Measured,
) -> String {
    let mut table = String::new();
    table.push_str("| figure | floor | gpuport |");
    for p in placements {
        table.push_str(&format!(" ratio ({p}) |"));
    }
    table.push_str(&format!(" target | meets ({}) |\n|---|---|---|", placements.first().unwrap_or(&"—")));
    for _ in placements {
        table.push_str("---|");
    }
    table.push_str("---|---|\n");
    for f in figures {
        let measured: Vec<Measured> = (0..placements.len()).map(|i| measured(f, i)).collect();
        let (floor, ours) = (measured[0].floor.map(|v| v / f.ops), measured[0].ours.map(|v| v / f.ops));
        let show = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), human);
        table.push_str(&format!("| {} | {} | {} |", f.what, show(floor), show(ours)));
        for m in &measured {
            table.push_str(&m.ratio.map_or_else(|| " — |".to_owned(), |r| format!(" {r:.2}× |")));
        }
        let (target, meets) = match f.target {
            Target::Ratio(t) => (format!("≤ {t}×"), measured[0].ratio.map(|r| r <= t)),
            Target::AtMost(ns) => (format!("≤ {}", human(ns)), ours.map(|g| g <= ns)),
            Target::Report => ("—".to_owned(), None),
        };
        let verdict = match (meets, f.target) {
            (_, Target::Report) => "—",
            (Some(true), _) => "yes",
            (Some(false), _) => "**no**",
            (None, _) => "not measured",
        };
        table.push_str(&format!(" {target} | {verdict} |\n"));
    }
    table
}

/// `xtask bench-table [--prefix P] PLACEMENT=DIR…`: the table of the HAL figures (those
/// whose group starts with `P`) from criterion folders a benchmark binary already wrote —
/// the GPU bundle runs `hal` there without cargo, and this prints what `bench` would. The
/// first placement is the one the "meets" column judges.
pub fn table_from(prefix: &str, homes: &[(&str, &Path)]) -> Result<String, String> {
    if homes.is_empty() {
        return Err("bench-table: name at least one PLACEMENT=CRITERION_DIR".into());
    }
    let placements: Vec<&str> = homes.iter().map(|(p, _)| *p).collect();
    let figures: Vec<&Figure> =
        FIGURES.iter().filter(|f| f.source == Source::Hal && f.group.starts_with(prefix)).collect();
    if figures.is_empty() {
        return Err(format!("bench-table: no HAL figure's group starts with `{prefix}`"));
    }
    Ok(render(&placements, figures.into_iter(), |f, i| measure(homes[i].1, f.group)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_rounds_are_read_by_exact_name_and_side() {
        let rounds = PythonRounds(
            "py_dunder floor 100 200 400\npy_dunder gpuport 150 200 200\npy_dunder_more floor 1\nc_exchange gpuport 50\n"
                .into(),
        );
        let m = rounds.measure("py_dunder");
        assert_eq!(m.floor, Some(200.0));
        assert_eq!(m.ours, Some(200.0));
        // The rounds' ratios are 1.5, 1.0 and 0.5: their median, not the medians' quotient.
        assert_eq!(m.ratio, Some(1.0));
        let only_ours = rounds.measure("c_exchange");
        assert_eq!((only_ours.floor, only_ours.ours, only_ours.ratio), (None, Some(50.0), None));
        assert_eq!(rounds.measure("absent").ours, None);
    }

    /// Writes criterion's `estimates.json` for one round of one side, median `ns`.
    fn estimate(home: &Path, group: &str, side: &str, round: usize, ns: f64) {
        let dir = home.join(group).join(side).join(round.to_string()).join("new");
        std::fs::create_dir_all(&dir).unwrap();
        let json = format!(
            r#"{{"mean":{{"point_estimate":1.0}},"median":{{"confidence_interval":{{}},"point_estimate":{ns}}}}}"#
        );
        std::fs::write(dir.join("estimates.json"), json).unwrap();
    }

    #[test]
    fn a_table_is_made_from_criterion_folders_alone() {
        let home = std::env::temp_dir().join(format!("xtask-bench-table-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let (free, one) = (home.join("free"), home.join("one-core"));
        // Three rounds of the enqueue figure (10,000 operations an iteration): ratios 1.5,
        // 1.1 and 1.0 — the median 1.1 meets 1.2×; one round of the query figure at 1.3×.
        for (round, floor, ours) in [(0, 100_000.0, 150_000.0), (1, 100_000.0, 110_000.0), (2, 200_000.0, 200_000.0)] {
            estimate(&free, "plugin_enqueue_10k", "floor", round, floor);
            estimate(&free, "plugin_enqueue_10k", "gpuport", round, ours);
        }
        estimate(&free, "plugin_dispatch_query", "floor", 0, 10.0);
        estimate(&free, "plugin_dispatch_query", "gpuport", 0, 13.0);
        estimate(&one, "plugin_enqueue_10k", "floor", 0, 100_000.0);
        estimate(&one, "plugin_enqueue_10k", "gpuport", 0, 90_000.0);
        let table = table_from("plugin_", &[("free", &free), ("one-core", &one)]).unwrap();
        let row = |what: &str| table.lines().find(|l| l.contains(what)).unwrap().to_owned();
        assert!(
            table.starts_with("| figure | floor | gpuport | ratio (free) | ratio (one-core) | target | meets (free) |")
        );
        // Per operation: the floor's median round 100 µs / 10,000 = 10 ns; ours 15 ns.
        assert_eq!(
            row("no-op enqueue"),
            "| ext as a plugin / linked in: no-op enqueue, per op | 10.0 ns | 15.0 ns | 1.10× | 0.90× | ≤ 1.2× | yes |"
        );
        assert_eq!(
            row("AnyStream::query"),
            "| ext as a plugin / linked in: AnyStream::query | 10.0 ns | 13.0 ns | 1.30× | — | ≤ 1.2× | **no** |"
        );
        assert!(row("4 KiB copy").ends_with("| — | — | ≤ 1.2× | not measured |"));
        assert_eq!(table.lines().count(), 2 + 4, "only the plugin figures");
        assert!(table_from("no_such_", &[("free", &free)]).is_err());
        assert!(table_from("plugin_", &[]).is_err());
        std::fs::remove_dir_all(&home).unwrap();
    }
}
