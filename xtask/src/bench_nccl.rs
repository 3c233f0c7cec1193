//! `cargo xtask bench-nccl-table LOG…`: the GPU bundle's NCCL
//! `all_reduce` figures side by side — gpuport's `Communicator::all_reduce`, the engine's
//! `ncclAllReduce` called directly in the same job (`crates/collective/benches/
//! nccl_allreduce.rs`), and PyTorch's `torch.distributed` on the same GPUs in the same run
//! (the bundle's `nccl_peer.py`). Targets, against PyTorch: at least 0.95× its bus
//! bandwidth from 16 MiB, at most 1.1× its time per call at 8 B.

use std::collections::BTreeMap;

use crate::bench_logs::{size, time};

/// The size from which the bandwidth target applies.
const BANDWIDTH_FROM: u64 = 16 << 20;
/// The bandwidth target (gpuport's over PyTorch's).
const BANDWIDTH: f64 = 0.95;
/// The latency target at 8 B (gpuport's time over PyTorch's).
const LATENCY: f64 = 1.1;

/// One size's figures: (ranks, bytes) → the named values.
type Figures = BTreeMap<(u64, u64), BTreeMap<String, f64>>;

/// Reads `prefix ranks=… bytes=… name=value…` lines into `figures`.
fn parse(text: &str, prefix: &str, figures: &mut Figures) {
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix) else { continue };
        let values: BTreeMap<String, f64> = rest
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_owned(), v.parse::<f64>().ok()?)))
            .collect();
        if let (Some(&ranks), Some(&bytes)) = (values.get("ranks"), values.get("bytes")) {
            figures.entry((ranks as u64, bytes as u64)).or_default().extend(values);
        }
    }
}

/// The table: per rank count and size, each path's time per call and bus bandwidth, and
/// gpuport against PyTorch with the target where one applies.
fn render(figures: &Figures) -> String {
    let mut out = String::from(
        "| ranks | size | ncclAllReduce | gpuport | torch.distributed | gpuport busbw | torch busbw | gpuport / torch | target | met |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let cell = |v: Option<&f64>, f: &dyn Fn(f64) -> String| v.map_or_else(|| "—".to_owned(), |&v| f(v));
    let gbs = |v: f64| format!("{v:.1} GB/s");
    for (&(ranks, bytes), v) in figures {
        let (gp, torch) = (v.get("gpuport_ns"), v.get("torch_ns"));
        let (against, target, met) = match (gp, torch) {
            (Some(&g), Some(&t)) if bytes <= 8 => {
                (format!("{:.2}× the time", g / t), format!("≤ {LATENCY}× the time"), Some(g / t <= LATENCY))
            }
            (Some(&g), Some(&t)) if bytes >= BANDWIDTH_FROM => (
                format!("{:.2}× the bandwidth", t / g),
                format!("≥ {BANDWIDTH}× the bandwidth"),
                Some(t / g >= BANDWIDTH),
            ),
            (Some(&g), Some(&t)) => (format!("{:.2}× the time", g / t), String::new(), None),
            _ => ("—".to_owned(), String::new(), None),
        };
        out += &format!(
            "| {ranks} | {} | {} | {} | {} | {} | {} | {against} | {target} | {} |\n",
            size(bytes),
            cell(v.get("direct_ns"), &time),
            cell(gp, &time),
            cell(torch, &time),
            cell(v.get("gpuport_busbw_gbs"), &gbs),
            cell(v.get("torch_busbw_gbs"), &gbs),
            match met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "",
            }
        );
    }
    out
}

/// The table from the bundle's logs: gpuport's benchmark, and PyTorch's peer where it ran.
pub fn table_from(logs: &[&str]) -> Result<String, String> {
    let text = crate::bench_logs::read(logs)?;
    let mut figures = Figures::new();
    parse(&text, "nccl_allreduce ", &mut figures);
    parse(&text, "torch_allreduce ", &mut figures);
    if figures.is_empty() {
        return Err(format!("no figures in {}", logs.join(", ")));
    }
    Ok(render(&figures))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_logs_meet_by_size_and_each_target_applies_where_it_says() {
        let mut figures = Figures::new();
        parse(
            "# 1 ranks, NCCL 2.27.5\n\
             nccl_allreduce ranks=1 bytes=8 direct_ns=5000 gpuport_ns=5400 ratio=1.08 direct_busbw_gbs=0.00 gpuport_busbw_gbs=0.00\n\
             nccl_allreduce ranks=1 bytes=1073741824 direct_ns=2000000 gpuport_ns=2010000 ratio=1.005 direct_busbw_gbs=536.87 gpuport_busbw_gbs=534.20\n\
             nccl_allreduce ranks=1 bytes=4096 direct_ns=5100 gpuport_ns=5600 ratio=1.1 direct_busbw_gbs=0.8 gpuport_busbw_gbs=0.73\n",
            "nccl_allreduce ",
            &mut figures,
        );
        parse(
            "torch_allreduce ranks=1 bytes=8 torch_ns=5000 torch_busbw_gbs=0.00\n\
             torch_allreduce ranks=1 bytes=1073741824 torch_ns=2000000 torch_busbw_gbs=536.87\n",
            "torch_allreduce ",
            &mut figures,
        );
        assert_eq!(figures.len(), 3);
        let table = render(&figures);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[2].contains("| 8 B |") && lines[2].contains("1.08× the time") && lines[2].ends_with("| yes |"));
        assert!(lines[3].contains("| 4 KiB |") && lines[3].contains("| — |"), "{table}");
        assert!(lines[4].contains("| 1 GiB |") && lines[4].contains("1.00× the bandwidth"), "{table}");
        assert!(lines[4].ends_with("| yes |"), "{table}");
        // Slower than PyTorch at 8 B by more than the target: not met.
        let mut slow = Figures::new();
        parse("nccl_allreduce ranks=1 bytes=8 gpuport_ns=6000\n", "nccl_allreduce ", &mut slow);
        parse("torch_allreduce ranks=1 bytes=8 torch_ns=5000\n", "torch_allreduce ", &mut slow);
        assert!(render(&slow).lines().nth(2).unwrap().ends_with("| **no** |"));
    }
}
