//! Work per exchange, counted rather than timed: a zero-copy export makes one heap
//! allocation (the managed tensor, its shape, strides and the allocation's handle), a
//! zero-copy import makes the array's own two (its buffer, which holds the tensor, and its
//! storage), and dropping the array frees all three. A change that adds an allocation to
//! an exchange fails here, on any machine, however noisy.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gpuport_dlpack::{ExportRequest, ImportRequest};
use gpuport_runtime::{Array, Runtime};

/// The system allocator, counting this thread's allocations and frees (other threads —
/// the test harness, stream workers — are not counted).
struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
    static FREES: Cell<usize> = const { Cell::new(0) };
}

fn bump(counter: &'static std::thread::LocalKey<Cell<usize>>) {
    // `try_with`: the allocator also runs while thread-locals are being torn down.
    let _ = counter.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCS);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        bump(&FREES);
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump(&ALLOCS);
        bump(&FREES);
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (allocations, frees) made by `f` on this thread.
fn counted<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let (a, d) = (ALLOCS.with(Cell::get), FREES.with(Cell::get));
    let out = f();
    (out, ALLOCS.with(Cell::get) - a, FREES.with(Cell::get) - d)
}

#[test]
fn an_exchange_allocates_only_what_it_promises() {
    let rt = Runtime::discover();
    let host = rt.device("host").unwrap();
    // Rank 2 (inline dimensions) and rank 8 (beyond them: the layout's own allocations).
    let data: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let matrix = Array::from_slice(&host, &data, &[16, 16]).unwrap();
    let request = ExportRequest::default();
    // A first exchange opens and caches what later ones reuse (the host device handle).
    drop(gpuport_dlpack::from_dlpack(
        &rt,
        gpuport_dlpack::to_dlpack(&rt, &matrix, &request).unwrap(),
        &Default::default(),
    ));

    let (tensor, allocs, frees) = counted(|| gpuport_dlpack::to_dlpack(&rt, &matrix, &request).unwrap());
    assert_eq!((allocs, frees), (1, 0), "a zero-copy export is one allocation");
    let (imported, allocs, frees) =
        counted(|| gpuport_dlpack::from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap());
    assert_eq!((allocs, frees), (2, 0), "a zero-copy import is the array's buffer and storage");
    let ((), allocs, frees) = counted(|| drop(imported));
    assert_eq!((allocs, frees), (0, 3), "dropping the import frees the export and the array");

    // A pending-free array exports without waiting or allocating beyond its one block, and
    // a dropped export frees it.
    let ((), allocs, frees) = counted(|| drop(gpuport_dlpack::to_dlpack(&rt, &matrix, &request).unwrap()));
    assert_eq!((allocs, frees), (1, 1));

    let high: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let rank8 = Array::from_slice(&host, &high, &[2, 2, 2, 2, 2, 2, 2, 2]).unwrap();
    let (tensor, allocs, _) = counted(|| gpuport_dlpack::to_dlpack(&rt, &rank8, &request).unwrap());
    assert_eq!(allocs, 1, "a high-rank export is still one allocation");
    let (imported, allocs, _) =
        counted(|| gpuport_dlpack::from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap());
    assert_eq!(allocs, 4, "beyond the inline rank, the layout's extents and strides are two more");
    assert_eq!(imported.shape(), rank8.shape());
}
