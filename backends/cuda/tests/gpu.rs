//! CUDA-only behaviour on a real GPU. Ignored by default; `cargo xtask test --backend cuda`
//! runs them (with `--include-ignored`), and they fail when no CUDA device is available.

#[path = "../../test-support/compile_cases.rs"]
mod compile_cases;
#[path = "../../test-support/gate.rs"]
mod gate;

use std::time::Duration;

use gate::gate;
use gpuport_core::{Backend, DefaultStream, Device, LoadOptions, MemoryKind, Stream, StreamFlags};
use gpuport_cuda::{CudaBackend, CudaDevice};

fn device() -> CudaDevice {
    let b = CudaBackend::load(&LoadOptions::default()).unwrap_or_else(|e| panic!("no CUDA driver: {e}"));
    b.open(0).unwrap_or_else(|e| panic!("no CUDA device 0: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn legacy_default_stream_waits_for_blocking_streams_only() {
    let dev = device();
    let buf = dev.alloc(1 << 20).unwrap();
    let blocking = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    // Memory of its own: touching the legacy stream's bytes unordered would be a race.
    // Allocated before the gate: CUDA may make work issued after a device allocation wait
    // for all earlier work of the device (the gated stream's too), and on an H200 it did.
    let other = dev.alloc(16).unwrap();
    let non_blocking = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let open = gate(&blocking);
    let legacy = dev.default_stream(DefaultStream::Legacy).unwrap();
    legacy.memset(&buf, 0, 1 << 20, 1).unwrap();
    non_blocking.memset(&other, 0, 16, 2).unwrap();
    non_blocking.synchronize().unwrap(); // not held back by the gated blocking stream
    std::thread::sleep(Duration::from_millis(20));
    assert!(!legacy.query().unwrap(), "the legacy stream must wait for the blocking stream");
    open.open();
    legacy.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn per_thread_default_stream_is_not_held_by_other_streams() {
    let dev = device();
    let buf = dev.alloc(4096).unwrap();
    let other = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let open = gate(&other);
    let pt = dev.default_stream(DefaultStream::PerThread).unwrap();
    assert_eq!(pt.raw_handle(), 2);
    pt.memset(&buf, 0, 4096, 3).unwrap();
    pt.synchronize().unwrap();
    open.open();
    other.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn managed_memory_is_host_and_device_accessible() {
    let dev = device();
    let m = dev.alloc_managed(4096).unwrap();
    assert_eq!(m.memory(), MemoryKind::Managed);
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    s.memset(&m, 0, 4096, 7).unwrap();
    s.synchronize().unwrap();
    let p = m.host_ptr(0, 4096).unwrap();
    // SAFETY: managed memory, the stream is idle, the range is inside the buffer.
    let host_view = unsafe { std::slice::from_raw_parts(p, 4096) };
    assert!(host_view.iter().all(|&b| b == 7));
    let attrs = dev.pointer_attributes(m.addr() + 100).unwrap();
    assert!(attrs.managed && attrs.host_accessible);
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn info_is_complete() {
    let info = device().info().unwrap();
    assert!(!info.name.is_empty());
    assert!(info.total_memory > 0);
    assert!(info.compute_capability.is_some_and(|(major, _)| major >= 3));
    assert!(info.multiprocessors.is_some_and(|n| n > 0));
    assert!(info.pci_bus_id.as_deref().is_some_and(|p| p.contains(':')));
    assert!(info.uuid.is_some());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn the_per_thread_stream_is_refused_on_other_threads() {
    let dev = device();
    let pt = dev.default_stream(DefaultStream::PerThread).unwrap();
    let again = dev.default_stream(DefaultStream::PerThread).unwrap();
    assert_eq!(pt.raw_handle(), again.raw_handle());
    let buf = dev.alloc(64).unwrap();
    let elsewhere = std::thread::scope(|s| s.spawn(|| pt.memset(&buf, 0, 64, 1)).join().unwrap());
    assert!(matches!(elsewhere, Err(gpuport_core::Error::InvalidArgument { .. })), "{elsewhere:?}");
    pt.memset(&buf, 0, 64, 1).unwrap();
    pt.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn dropping_a_wrapped_stream_neither_waits_nor_destroys() {
    let dev = device();
    let owner = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let open = gate(&owner);
    // SAFETY: `owner` outlives the wrapper.
    let wrapped = unsafe { dev.wrap_stream(owner.raw_handle()) }.unwrap();
    let buf = dev.alloc(1 << 20).unwrap();
    wrapped.memset(&buf, 0, 1 << 20, 5).unwrap(); // parks `buf` on the wrapper
    drop(buf);
    drop(wrapped); // must return at once: the owner is still gated
    assert!(!owner.query().unwrap(), "the wrapper's drop waited for the stream");
    open.open();
    owner.synchronize().unwrap();
    gpuport_core::release::flush();
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn a_kernel_compiled_from_source_runs() {
    // NVRTC, loaded at run time: one source for both vendors.
    compile_cases::a_compiled_kernel_runs(&device());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn a_compile_error_carries_the_compilers_log() {
    compile_cases::a_compile_error_carries_the_log(&device());
}

#[test]
#[ignore = "needs a CUDA GPU: cargo xtask test --backend cuda"]
fn several_threads_compile_at_once() {
    compile_cases::several_threads_compile_at_once(&device());
}
