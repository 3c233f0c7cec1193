//! The HAL's host hot paths, each beside its floor — the cheapest thing that does the same
//! work — measured in the same run with criterion. `cargo xtask bench` runs this and
//! prints one table (figure, floor, ratio, target); nothing here asserts a time.
//!
//! Groups are figures; in each, `floor` and `gpuport` (absent where there is no floor).
//! Thread placement (`GPUPORT_BENCH_PLACEMENT`): `free` lets the scheduler place every
//! thread; `one-core` puts this thread, the floors' threads and gpuport's pool threads
//! (`GPUPORT_WORKER_CPUS=0`, which xtask sets) on CPU 0. (Threads pinned to *different*
//! CPUs are the worst case on small virtual machines — a cross-CPU wake-up there costs
//! ~100 µs — and are not a placement anyone should run; docs/performance.md.)

// criterion's macros define undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::PageBuf;
use criterion::{criterion_group, criterion_main, Bencher, BenchmarkGroup, BenchmarkId, Criterion};
use gpuport_runtime::{copy, stream_into_any, Array, Backend, CopyRoute, DType, Device, Runtime, Stream, StreamFlags};

mod common;

type Job = Box<dyn FnOnce() + Send>;

/// The CPUs every thread goes on in the one-core placement.
fn helper_cpus() -> Option<Vec<usize>> {
    (std::env::var("GPUPORT_BENCH_PLACEMENT").as_deref() == Ok("one-core")).then(|| vec![0])
}

fn pin_main() {
    if helper_cpus().is_some() {
        gpuport_queue::affinity::pin_current_thread(&[0]);
    }
}

/// The floors' worker: runs boxed jobs from a channel in order. Like gpuport's queues it
/// polls briefly before it sleeps, and a caller waiting for a job's end polls briefly too —
/// the cheapest hand-off there is, so the floor is not a straw man made of wake-ups.
struct Floor {
    jobs: Sender<Job>,
    acks: Receiver<()>,
    ack: Sender<()>,
    done: Arc<AtomicU64>,
}

/// Polls `ready` for up to 50 µs (as gpuport's waits do).
fn poll(mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(50) {
        for _ in 0..64 {
            std::hint::spin_loop();
            if ready() {
                return true;
            }
        }
    }
    false
}

impl Floor {
    fn new() -> Floor {
        let (jobs, rx) = channel::<Job>();
        let (ack, acks) = channel();
        let cpus = helper_cpus();
        std::thread::spawn(move || {
            if let Some(cpus) = cpus {
                gpuport_queue::affinity::pin_current_thread(&cpus);
            }
            loop {
                let mut next = rx.try_recv().ok();
                if next.is_none() {
                    poll(|| {
                        next = rx.try_recv().ok();
                        next.is_some()
                    });
                }
                let job = match next {
                    Some(job) => job,
                    None => match rx.recv() {
                        Ok(job) => job,
                        Err(_) => return,
                    },
                };
                job();
            }
        });
        Floor { jobs, acks, ack, done: Arc::new(AtomicU64::new(0)) }
    }

    /// Queues `job` and waits for it: one hand-off each way.
    fn round_trip(&self, job: Job) {
        let (ack, done) = (self.ack.clone(), self.done.clone());
        let target = self.done.load(Ordering::Relaxed) + 1;
        self.jobs
            .send(Box::new(move || {
                job();
                done.fetch_add(1, Ordering::Release);
                let _ = ack.send(());
            }))
            .unwrap();
        poll(|| self.done.load(Ordering::Acquire) >= target);
        self.acks.recv().unwrap();
    }
}

/// A raw pointer the floor's worker may write through (the caller waits for the job).
#[derive(Clone, Copy)]
struct Ptr(*mut u8);
// SAFETY: only dereferenced by a job the sending thread waits for.
unsafe impl Send for Ptr {}

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Rounds of each figure of up to 16 MiB (`GPUPORT_BENCH_ROUNDS`, default 1); the 64 and
/// 256 MiB ones take one.
fn rounds() -> usize {
    std::env::var("GPUPORT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

/// Benchmarks `floor` then `gpuport`, `rounds` times, as `floor/<round>` and
/// `gpuport/<round>`: on a small virtual machine a sub-microsecond hand-off moves by 2–3×
/// with where the threads happen to run (and a 16 MiB copy by 30 %), so the table takes
/// the median of the rounds' ratios rather than one pair of medians.
fn pair(
    g: &mut Group<'_>,
    rounds: usize,
    mut floor: impl FnMut(&mut Bencher<'_>),
    mut ours: impl FnMut(&mut Bencher<'_>),
) {
    for round in 0..rounds {
        g.bench_function(BenchmarkId::new("floor", round), &mut floor);
        g.bench_function(BenchmarkId::new("gpuport", round), &mut ours);
    }
}

fn group<'a>(c: &'a mut Criterion, name: &str, big: bool) -> Group<'a> {
    let mut g = c.benchmark_group(name);
    if big {
        g.sample_size(10);
    }
    g
}

/// The ext device's plugin entry point, its table made in this process by
/// `gpuport-plugin-export` exactly as a `cdylib` of it would make it.
extern "C" fn ext_as_plugin() -> *const gpuport_plugin_export::abi::PluginApi {
    std::panic::catch_unwind(|| {
        gpuport_plugin_export::entry::<gpuport_ext::ExtBackend>(Some("extplug"), gpuport_plugin_export::no_init)
    })
    .unwrap_or(std::ptr::null())
}

fn benches(c: &mut Criterion) {
    pin_main();
    Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default()).unwrap()).unwrap();
    // SAFETY: the entry's table is static and its code is this binary's.
    unsafe { Runtime::load_plugin_entry(ext_as_plugin) }.unwrap();
    let rt = Runtime::discover();
    let host = rt.device("host").unwrap();
    let ext = rt.device("ext:0").unwrap();
    let floor = Floor::new();
    let stream = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();

    // 100k no-op enqueues + synchronize (the table divides by 100k).
    const OPS: usize = 100_000;
    let rounds = rounds();
    let mut g = group(c, "enqueue_100k", true);
    pair(
        &mut g,
        rounds,
        |b| {
            b.iter(|| {
                for _ in 0..OPS {
                    floor.jobs.send(Box::new(|| {})).unwrap();
                }
                floor.round_trip(Box::new(|| {}));
            })
        },
        |b| {
            b.iter(|| {
                for _ in 0..OPS {
                    stream.host_callback(Box::new(|| {})).unwrap();
                }
                stream.synchronize().unwrap();
            })
        },
    );
    g.finish();

    // A no-op callback and its synchronize.
    let mut g = group(c, "callback_round_trip", false);
    pair(
        &mut g,
        rounds,
        |b| b.iter(|| floor.round_trip(Box::new(|| {}))),
        |b| {
            b.iter(|| {
                stream.host_callback(Box::new(|| {})).unwrap();
                stream.synchronize().unwrap();
            })
        },
    );
    g.finish();

    // Stream copies + synchronize, against a ping-pong that does the same memcpy.
    for (name, n, big) in [
        ("copy_8b", 8usize, false),
        ("copy_4k", 4 << 10, false),
        ("copy_1m", 1 << 20, false),
        ("copy_256m", 256 << 20, true),
    ] {
        let (src, dst) = (host.alloc(n).unwrap(), host.alloc(n).unwrap());
        let (mut a, mut z) = (PageBuf::new(n, 1), PageBuf::new(n, 0));
        let mut g = group(c, name, big);
        let ours = |b: &mut Bencher<'_>| {
            b.iter(|| {
                stream.copy(&src, 0, &dst, 0, n).unwrap();
                stream.synchronize().unwrap();
            })
        };
        let (pa, pz) = (Ptr(a.as_mut_ptr()), Ptr(z.as_mut_ptr()));
        if n >= 64 << 20 {
            // The floor of a large copy is the copy itself on two threads (gpuport splits
            // large copies too), on the helpers' CPUs.
            let cpus = helper_cpus();
            let two_threads = |b: &mut Bencher<'_>| {
                b.iter(|| {
                    std::thread::scope(|s| {
                        for half in 0..2 {
                            let cpus = cpus.clone();
                            s.spawn(move || {
                                if let Some(cpus) = cpus {
                                    gpuport_queue::affinity::pin_current_thread(&cpus);
                                }
                                let (pa, pz) = (pa, pz);
                                let off = half * n / 2;
                                // SAFETY: two disjoint halves of live buffers.
                                unsafe { std::ptr::copy_nonoverlapping(pa.0.add(off), pz.0.add(off), n / 2) };
                            });
                        }
                    })
                })
            };
            pair(&mut g, 1, two_threads, ours);
        } else {
            let ping_pong = |b: &mut Bencher<'_>| {
                b.iter(|| {
                    floor.round_trip(Box::new(move || {
                        let (pa, pz) = (pa, pz);
                        // SAFETY: live buffers; the caller waits for the job.
                        unsafe { std::ptr::copy_nonoverlapping(pa.0, pz.0, n) };
                    }))
                })
            };
            pair(&mut g, if n <= 16 << 20 { rounds } else { 1 }, ping_pong, ours);
        }
        g.finish();
        black_box((&mut a, &mut z));
    }

    // Array upload + download of a contiguous 1 MiB f32 array, against two memcpys.
    let mut values = PageBuf::new(1 << 20, 0);
    values.as_f32_mut().iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
    let mut g = group(c, "array_1m", false);
    let (mut mid, mut out) = (PageBuf::new(1 << 20, 0), PageBuf::new(1 << 20, 0));
    pair(
        &mut g,
        rounds,
        |b| {
            b.iter(|| {
                mid.as_mut_slice().copy_from_slice(black_box(values.as_slice()));
                out.as_mut_slice().copy_from_slice(black_box(mid.as_slice()));
            })
        },
        |b| {
            let values = values.as_f32();
            b.iter(|| {
                let a = Array::from_slice(&host, values, &[values.len()]).unwrap();
                black_box(a.to_vec::<f32>().unwrap());
            })
        },
    );
    g.finish();

    // A sliced matrix through the copy engine, host → ext:0: the first 256 bytes of each
    // of 2048 rows 512 bytes apart — one 2D copy on ext's stream — against the same rows
    // gathered on the calling thread by a loop of memcpys.
    let (rows, width) = (2048usize, 256usize);
    let wide = PageBuf::new(rows * 2 * width, 7);
    let matrix = Array::from_slice(&host, wide.as_slice(), &[rows, 2 * width]).unwrap();
    let view = matrix.slice(1, 0, Some(width), 1).unwrap();
    let packed = Array::zeros(&rt.device("ext:0").unwrap(), &[rows, width], DType::U8).unwrap();
    let mut gathered = PageBuf::new(rows * width, 0);
    let mut g = group(c, "strided_2d", false);
    pair(
        &mut g,
        rounds,
        |b| {
            b.iter(|| {
                let (from, to) = (black_box(wide.as_slice()), gathered.as_mut_slice());
                for (row, out) in to.chunks_exact_mut(width).enumerate() {
                    out.copy_from_slice(&from[row * 2 * width..][..width]);
                }
                black_box(&mut gathered);
            })
        },
        |b| b.iter(|| copy(black_box(&view), &packed).unwrap()),
    );
    g.finish();

    // One column of a 4096 × 4096 `f32` matrix on ext:0 read back with `Array::to_bytes`
    // (its elements alone, one 2D copy), against the same column gathered from a host
    // matrix by a loop on the calling thread.
    let n = 4096usize;
    let square = PageBuf::new(n * n * 4, 3);
    let column = Array::from_slice(&ext, square.as_f32(), &[n, n]).unwrap().index_axis(1, 17).unwrap();
    let mut g = group(c, "column_read", false);
    pair(
        &mut g,
        rounds,
        |b| {
            b.iter(|| {
                let from = black_box(square.as_f32());
                black_box((0..n).map(|row| from[row * n + 17]).collect::<Vec<f32>>());
            })
        },
        |b| b.iter(|| black_box(black_box(&column).to_bytes().unwrap())),
    );
    g.finish();

    // Host → ext → host through the copy engine (one direct copy each way: ext's streams
    // reach host memory), and ext:0 → ext:1 (no link: staged through two pinned buffers),
    // each against two memcpys.
    let ext1 = rt.device("ext:1").unwrap();
    for (name, n) in [
        ("staged_64k", 64usize << 10),
        ("staged_1m", 1 << 20),
        ("staged_16m", 16 << 20),
        ("staged_64m", 64 << 20),
        ("ext_staged_1m", 1 << 20),
        ("ext_staged_16m", 16 << 20),
    ] {
        let big = n >= 16 << 20;
        let (src_v, mut mid_v, mut dst_v) = (PageBuf::new(n, 1), PageBuf::new(n, 0), PageBuf::new(n, 0));
        let mut g = group(c, name, big);
        let two_memcpys = |b: &mut Bencher<'_>| {
            b.iter(|| {
                mid_v.as_mut_slice().copy_from_slice(black_box(src_v.as_slice()));
                dst_v.as_mut_slice().copy_from_slice(black_box(mid_v.as_slice()));
            })
        };
        let r = if n <= 16 << 20 { rounds } else { 1 };
        if name.starts_with("ext_") {
            let from = Array::from_slice(&ext, src_v.as_slice(), &[n]).unwrap();
            let to = Array::empty(&ext1, &[n], DType::U8).unwrap();
            assert!(matches!(copy(&from, &to).unwrap(), CopyRoute::Staged { .. }));
            pair(&mut g, r, two_memcpys, |b| b.iter(|| copy(&from, &to).unwrap()));
        } else {
            let src = Array::from_slice(&host, src_v.as_slice(), &[n]).unwrap();
            let on_ext = Array::empty(&ext, &[n], DType::U8).unwrap();
            let back = Array::empty(&host, &[n], DType::U8).unwrap();
            let round_trip = |b: &mut Bencher<'_>| {
                b.iter(|| {
                    copy(&src, &on_ext).unwrap();
                    copy(&on_ext, &back).unwrap();
                })
            };
            pair(&mut g, r, two_memcpys, round_trip);
        }
        g.finish();
    }

    // Stream create + one no-op + synchronize + destroy (an absolute figure: no floor).
    let mut g = group(c, "stream_lifecycle", false);
    g.bench_function(BenchmarkId::new("gpuport", 0), |b| {
        b.iter(|| {
            let s = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
            s.host_callback(Box::new(|| {})).unwrap();
            s.synchronize().unwrap();
        })
    });
    g.finish();

    // Creating streams with 100,000 others live against creating them with a handful: a
    // device's bookkeeping of its streams costs a constant amount per stream, not a sweep
    // of all. Each sample creates a batch and times only that (the batch is dropped
    // outside the timing: freeing into a heap of 100,000 live streams is the allocator's
    // cost, not gpuport's).
    const LIVE: usize = 100_000;
    const BATCH: usize = 1_000;
    fn create_batches(dev: &gpuport_runtime::AnyDevice) -> impl FnMut(&mut Bencher<'_>) + '_ {
        move |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let made: Vec<_> =
                        (0..BATCH).map(|_| dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap()).collect();
                    took += start.elapsed();
                    drop(made);
                }
                took
            })
        }
    }
    let mut g = group(c, "stream_create_100k", true);
    for round in 0..rounds {
        g.bench_function(BenchmarkId::new("floor", round), create_batches(&host));
        let live: Vec<_> = (0..LIVE).map(|_| host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap()).collect();
        g.bench_function(BenchmarkId::new("gpuport", round), create_batches(&host));
        drop(live);
    }
    g.finish();

    // `query()` through AnyStream against the typed call on the same stream.
    let typed_dev = gpuport_runtime::host::HostBackend::load(&Default::default()).unwrap().open(0).unwrap();
    let typed = typed_dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let any = stream_into_any(typed.clone());
    let mut g = group(c, "dispatch_query", false);
    pair(
        &mut g,
        rounds,
        |b| b.iter(|| black_box(Stream::query(black_box(&typed)).unwrap())),
        |b| b.iter(|| black_box(black_box(&any).query().unwrap())),
    );
    g.finish();

    plugin_boundary(c, &rt, rounds);
}

/// The cost of the plugin boundary: the same operations on the ext device linked in (the
/// floor) and loaded as a plugin through the C table (`extplug`).
fn plugin_boundary(c: &mut Criterion, rt: &Runtime, rounds: usize) {
    const OPS: usize = 10_000;
    let (linked, plugged) = (rt.device("ext:0").unwrap(), rt.device("extplug:0").unwrap());
    let (ls, ps) = (
        linked.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap(),
        plugged.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap(),
    );
    let enqueue = |s: gpuport_runtime::AnyStream| {
        move |b: &mut Bencher<'_>| {
            b.iter(|| {
                for _ in 0..OPS {
                    s.host_callback(Box::new(|| {})).unwrap();
                }
                s.synchronize().unwrap();
            })
        }
    };
    let mut g = group(c, "plugin_enqueue_10k", true);
    pair(&mut g, rounds, enqueue(ls.clone()), enqueue(ps.clone()));
    g.finish();

    let query =
        |s: gpuport_runtime::AnyStream| move |b: &mut Bencher<'_>| b.iter(|| black_box(black_box(&s).query().unwrap()));
    let mut g = group(c, "plugin_dispatch_query", false);
    pair(&mut g, rounds, query(ls.clone()), query(ps.clone()));
    g.finish();

    for (name, n) in [("plugin_copy_4k", 4usize << 10), ("plugin_copy_1m", 1 << 20)] {
        let on = |dev: &gpuport_runtime::AnyDevice, s: &gpuport_runtime::AnyStream| {
            let (src, dst, s) = (dev.alloc(n).unwrap(), dev.alloc(n).unwrap(), s.clone());
            move |b: &mut Bencher<'_>| {
                b.iter(|| {
                    s.copy(&src, 0, &dst, 0, n).unwrap();
                    s.synchronize().unwrap();
                })
            }
        };
        let mut g = group(c, name, false);
        pair(&mut g, rounds, on(&linked, &ls), on(&plugged, &ps));
        g.finish();
    }
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! { name = hal; config = config(); targets = benches }
criterion_main!(hal);
