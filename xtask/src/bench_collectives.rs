//! `cargo xtask bench --collectives`: `all_reduce` through gpuport beside the same MPI's
//! `MPI_Allreduce_c` called directly, in one job, from 8 B to 64 MiB, with 2 ranks and with
//! 4, under the `mpich` wheel's `mpiexec` (`crates/collective/benches/allreduce.rs` measures;
//! this runs it and makes the table). Targets: at most 1.05× the direct call from 64 KiB
//! up, at most 2 µs added below. The table is also written to
//! `target/bench-collectives.md`.

use std::process::Command;

use crate::bench_logs::{size, time};

/// Bytes from which the ratio target applies (below, the added time's).
const RATIO_FROM: u64 = 64 << 10;
/// The ratio target.
const RATIO: f64 = 1.05;
/// The added-time target below [`RATIO_FROM`], in nanoseconds.
const ADDED_NS: f64 = 2_000.0;

/// One measured size.
#[derive(Debug, PartialEq)]
struct Row {
    ranks: u32,
    bytes: u64,
    direct_ns: f64,
    /// The engine's nonblocking call tested to completion on the calling thread.
    nonblocking_ns: f64,
    gpuport_ns: f64,
    ratio: f64,
}

/// Reads the benchmark's `allreduce ranks=… bytes=… direct_ns=… nonblocking_ns=…
/// gpuport_ns=… ratio=…` lines.
fn parse(text: &str) -> Vec<Row> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("allreduce ")?;
            let field = |name: &str| {
                rest.split_whitespace().find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse::<f64>().ok())
            };
            Some(Row {
                ranks: field("ranks")? as u32,
                bytes: field("bytes")? as u64,
                direct_ns: field("direct_ns")?,
                nonblocking_ns: field("nonblocking_ns")?,
                gpuport_ns: field("gpuport_ns")?,
                ratio: field("ratio")?,
            })
        })
        .collect()
}

/// The table: per rank count and size, the direct call's time, the engine's nonblocking
/// path's, gpuport's, the time gpuport adds to the direct call, the ratio, the target and
/// whether it is met.
fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| ranks | size | MPI_Allreduce_c | MPI_Iallreduce_c + MPI_Test | gpuport all_reduce | added | ratio | target | met |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let added = r.gpuport_ns - r.direct_ns;
        let (target, met) = if r.bytes >= RATIO_FROM {
            (format!("≤ {RATIO}×"), r.ratio <= RATIO)
        } else {
            (format!("≤ {} µs added", ADDED_NS / 1e3), added <= ADDED_NS)
        };
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.3}× | {target} | {} |\n",
            r.ranks,
            size(r.bytes),
            time(r.direct_ns),
            time(r.nonblocking_ns),
            time(r.gpuport_ns),
            if added >= 0.0 { format!("+{}", time(added)) } else { format!("−{}", time(-added)) },
            r.ratio,
            if met { "yes" } else { "no" }
        );
    }
    out
}

/// Builds the benchmark, runs it with every rank count, prints the table.
pub fn bench_collectives() -> Result<(), String> {
    crate::python::ensure_venv()?;
    let (mpiexec, library) = crate::collectives::mpich()?;
    let exe =
        crate::rocm_sid::test_binary(&["bench", "-p", "gpuport-collective", "--bench", "allreduce"], "allreduce")?;
    let mut rows = Vec::new();
    for ranks in crate::collectives::RANKS {
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=10", "900"]).arg(&mpiexec).args(["-n", &ranks.to_string()]).arg(&exe);
        cmd.env("GPUPORT_MPI_LIBRARY", &library).env_remove("GPUPORT_BACKENDS");
        eprintln!("xtask: running {cmd:?}");
        let out = cmd.output().map_err(|e| format!("could not start mpiexec: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        if !out.status.success() {
            return Err(format!("the benchmark failed with {ranks} ranks: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let found = parse(&text);
        if found.is_empty() {
            return Err(format!("the benchmark printed no figures with {ranks} ranks"));
        }
        rows.extend(found);
    }
    let table = render(&rows);
    println!("\n{table}");
    let _ = std::fs::write(crate::doubles::target_dir().join("bench-collectives.md"), &table);
    Ok(())
}

/// The table from the benchmark's logs (`bench-collectives-table LOG…`, for the GPU bundle's
/// logs, where there is no cargo).
pub fn table_from(logs: &[&str]) -> Result<String, String> {
    let rows = parse(&crate::bench_logs::read(logs)?);
    if rows.is_empty() {
        return Err(format!("no figures in {}", logs.join(", ")));
    }
    Ok(render(&rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_and_judged_by_their_own_target() {
        let rows = parse(
            "# 2 ranks, MPICH Version: 5.0.2, 5 rounds\n\
             allreduce ranks=2 bytes=8 direct_ns=850 nonblocking_ns=1400 gpuport_ns=1650 ratio=1.941\n\
             allreduce ranks=2 bytes=65536 direct_ns=20000 nonblocking_ns=20700 gpuport_ns=21400 ratio=1.070\n",
        );
        assert_eq!(rows.len(), 2);
        let first =
            Row { ranks: 2, bytes: 8, direct_ns: 850.0, nonblocking_ns: 1400.0, gpuport_ns: 1650.0, ratio: 1.941 };
        assert_eq!(rows[0], first);
        let table = render(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[2].contains("| 8 B |") && lines[2].contains("+800 ns") && lines[2].ends_with("| yes |"),
            "{table}"
        );
        assert!(
            lines[3].contains("| 64 KiB |") && lines[3].contains("≤ 1.05×") && lines[3].ends_with("| no |"),
            "{table}"
        );
    }
}
