//! The Rust side of the interchange: DLPack export and import, and the CUDA Array
//! Interface's neutral form, each beside a floor measured in the same run.
//!
//! This bench lives in `gpuport-cai` because that crate sees both interchange crates
//! (it dev-depends on `gpuport-dlpack`).
//!
//! A floor does what the exchange cannot avoid and nothing more: the same number of heap
//! allocations as gpuport makes for the figure — counted here, in this run, by the
//! counting allocator below, so a floor never flatters or punishes a change in how much
//! gpuport allocates — and the descriptor filled by hand (a `DLManagedTensorVersioned`
//! with its shape and strides for DLPack; the typed interface for CAI). The figures'
//! verdicts are in `cargo xtask bench`'s table.

// criterion's macros define undocumented public functions.
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

#[path = "../../../backends/test-support/bench_pair.rs"]
mod bench_pair;

use criterion::{criterion_group, criterion_main, Criterion};
use gpuport_dlpack::abi::{DLManagedTensorVersioned, DLTensor};
use gpuport_dlpack::{DLDataType, DLDevice, ExportRequest, ImportRequest, DLPACK_VERSION};
use gpuport_runtime::{Array, Backend, Runtime};

/// The system allocator, counting allocations while `COUNTING` is set (one relaxed load
/// per allocation otherwise).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// How many heap allocations one call of `f` makes (after a first, uncounted call that
/// fills any cache).
fn allocations_of(mut f: impl FnMut()) -> usize {
    f();
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    f();
    COUNTING.store(false, Ordering::Relaxed);
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// A hand-made export: the versioned managed tensor with its shape and strides in one
/// allocation, as a C producer writes it.
struct HandExport {
    tensor: DLManagedTensorVersioned,
    shape: [i64; 2],
    strides: [i64; 2],
}

/// The floor of an exchange that makes `allocations` heap allocations: one hand-filled
/// export, and the rest small blocks, all freed.
fn floor(array: &Array, allocations: usize) {
    let mut export = Box::new(HandExport {
        tensor: DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: None,
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::with_exposed_provenance_mut(array.data_addr() as usize),
                device: DLDevice { device_type: 1, device_id: 0 },
                ndim: 2,
                dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: [array.shape()[0] as i64, array.shape()[1] as i64],
        strides: [array.strides()[0] as i64, array.strides()[1] as i64],
    });
    export.tensor.dl_tensor.shape = export.shape.as_mut_ptr();
    export.tensor.dl_tensor.strides = export.strides.as_mut_ptr();
    let export = black_box(export);
    for _ in 1..allocations {
        black_box(Box::new([0u64; 4]));
    }
    drop(export);
}

/// One figure: `exchange` beside a floor with as many allocations.
fn figure(c: &mut Criterion, name: &str, array: &Array, mut exchange: impl FnMut()) {
    let allocations = allocations_of(&mut exchange);
    println!("{name}: {allocations} heap allocation(s) per exchange");
    bench_pair::pair(c, name, None, |b| b.iter(|| floor(array, allocations)), |b| b.iter(&mut exchange));
}

fn benches(c: &mut Criterion) {
    Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default()).unwrap()).unwrap();
    let rt = Runtime::discover();
    let host = rt.device("host").unwrap();
    let ext = rt.device("ext:0").unwrap();
    let data: Vec<f32> = (0..128).map(|i| i as f32).collect();
    let on_host = Array::from_slice(&host, &data, &[8, 16]).unwrap();
    let on_ext = Array::from_slice(&ext, &data, &[8, 16]).unwrap();
    let request = ExportRequest::default();

    figure(c, "dlpack_export_host", &on_host, || {
        drop(black_box(gpuport_dlpack::to_dlpack(&rt, &on_host, &request).unwrap()));
    });
    figure(c, "dlpack_export_ext", &on_ext, || {
        drop(black_box(gpuport_dlpack::to_dlpack(&rt, &on_ext, &request).unwrap()));
    });
    figure(c, "dlpack_round_trip", &on_host, || {
        let tensor = gpuport_dlpack::to_dlpack(&rt, &on_host, &request).unwrap();
        drop(black_box(gpuport_dlpack::from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap()));
    });
    figure(c, "cai_round_trip", &on_ext, || {
        let export = gpuport_cai::export(&on_ext).unwrap();
        let value = export.interface.to_value().unwrap();
        let interface = gpuport_cai::Interface::from_value(black_box(&value)).unwrap();
        // SAFETY: the interface describes `on_ext`'s live memory, which outlives the import.
        let imported = unsafe { gpuport_cai::import(&rt, &interface, (), None, gpuport_cai::Sync::Enqueue) }.unwrap();
        drop(black_box(imported));
    });
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! { name = interchange; config = config(); targets = benches }
criterion_main!(interchange);
