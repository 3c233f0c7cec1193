//! Kernels compiled from source, for gpuport's small test kernel
//! (`tests/python/fill_and_scale.cu`) on a CUDA device — the driver double in `cargo xtask
//! bench`, with NVIDIA's real NVRTC — each beside a floor measured in the same run:
//!
//! - `compile_cold`: a compilation that misses every cache (a fresh define each time) and
//!   is written to the disk cache, beside the same compilation with the disk cache off;
//! - `compile_disk_hit`: an image read from the disk cache (`compile_for_arch`, which
//!   keeps nothing in the process), beside reading the entry's file;
//! - `compile_memory_hit`: `Device::compile` of a module already compiled and held,
//!   beside hashing the same source and options and one map lookup.
//!
//! The verdicts (disk hit ≤ 1 ms, in-process hit ≤ 1 µs) are in `cargo xtask bench`'s
//! table. Without a device or NVRTC the benchmark says why and measures nothing.

#![allow(missing_docs)]

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::hint::black_box;
use std::time::Duration;

#[path = "../../test-support/bench_pair.rs"]
mod bench_pair;

use bench_pair::pair;
use criterion::{criterion_group, criterion_main, Criterion};
use gpuport_core::{Backend, CompileOptions, Device, KernelSource, LoadOptions};
use gpuport_cuda::{compile_for_arch, CudaBackend};

fn source() -> KernelSource {
    KernelSource::new(include_str!("../../../tests/python/fill_and_scale.cu")).named("fill.cu")
}

fn benches(c: &mut Criterion) {
    let device = match CudaBackend::load(&LoadOptions::default()).and_then(|b| b.open(0)) {
        Ok(d) => d,
        Err(e) => return eprintln!("compile benchmark: no CUDA device ({e}); nothing measured"),
    };
    let arch = match device.info() {
        Ok(info) => info.compute_capability.map(|(a, b)| format!("sm_{a}{b}")).unwrap_or_default(),
        Err(e) => return eprintln!("compile benchmark: {e}"),
    };
    let cache = std::env::temp_dir().join(format!("gpuport-bench-kernels-{}", std::process::id()));
    // Single-threaded here: the variable is read by each compilation.
    std::env::set_var("GPUPORT_KERNEL_CACHE", &cache);
    if let Err(e) = compile_for_arch(&arch, &source(), &CompileOptions::default()) {
        return eprintln!("compile benchmark: {e}; nothing measured");
    }

    let arch_cold = arch.clone();
    let cache_cold = cache.clone();
    let fresh = std::cell::Cell::new(0u64);
    let next = || {
        fresh.set(fresh.get() + 1);
        fresh.get()
    };
    pair(
        c,
        "compile_cold",
        Some(10),
        |b| {
            b.iter(|| {
                let options = CompileOptions::default().define("BENCH_FRESH", format!("off{}", next()));
                std::env::set_var("GPUPORT_KERNEL_CACHE", "off");
                let image = compile_for_arch(&arch_cold, &source(), &options).expect("compiles");
                std::env::set_var("GPUPORT_KERNEL_CACHE", &cache_cold);
                black_box(image)
            })
        },
        |b| {
            b.iter(|| {
                let options = CompileOptions::default().define("BENCH_FRESH", format!("on{}", next()));
                black_box(compile_for_arch(&arch_cold, &source(), &options).expect("compiles"))
            })
        },
    );

    let entry = std::fs::read_dir(&cache)
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path())))
        .expect("the first compilation left an entry");
    let warm = CompileOptions::default();
    pair(
        c,
        "compile_disk_hit",
        None,
        |b| b.iter(|| black_box(std::fs::read(&entry).expect("the entry"))),
        |b| b.iter(|| black_box(compile_for_arch(&arch, &source(), &warm).expect("a hit"))),
    );

    let held = device.compile(&source(), &warm).expect("compiles");
    let (src, mut map) = (source(), HashMap::new());
    let key = |s: &KernelSource, o: &CompileOptions| {
        let mut h = DefaultHasher::new();
        (s, o).hash(&mut h);
        h.finish()
    };
    map.insert(key(&src, &warm), held.clone());
    pair(
        c,
        "compile_memory_hit",
        None,
        |b| b.iter(|| black_box(map.get(&key(black_box(&src), &warm)).cloned())),
        |b| b.iter(|| black_box(device.compile(black_box(&src), &warm).expect("a hit"))),
    );
    drop(held);
    let _ = std::fs::remove_dir_all(&cache);
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2))
}

criterion_group! { name = compile; config = config(); targets = benches }
criterion_main!(compile);
