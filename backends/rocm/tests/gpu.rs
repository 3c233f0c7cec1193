//! ROCm-only behaviour on a real AMD GPU. Ignored by default; `cargo xtask test --backend
//! rocm` runs them (with `--include-ignored`) and they fail when no AMD GPU is available.

#[path = "../../test-support/compile_cases.rs"]
mod compile_cases;
#[path = "../../test-support/gate.rs"]
mod gate;

use std::time::Duration;

use gate::gate;
use gpuport_core::{
    Backend, DefaultStream, Device, Error, Event, KernelArg, LaunchConfig, LoadOptions, MemoryKind, ModuleImage,
    Stream, StreamFlags,
};
use gpuport_rocm::{RocmBackend, RocmDevice};

fn backend() -> RocmBackend {
    RocmBackend::load(&LoadOptions::default()).expect("a HIP runtime with a device")
}

fn device() -> RocmDevice {
    backend().open(0).expect("ROCm device 0")
}

/// The runtime's major version (5, 6, 7).
fn major() -> i32 {
    backend().runtime_version() / 10_000_000
}

/// `fill_u32` for the architectures of the machines the tests run on (the doubles' devices
/// are gfx90a and gfx942; MI200 and MI300).
fn fill_bundle() -> Vec<u8> {
    gpuport_rocm::offload_bundle(&[
        ("gfx90a", include_bytes!("../kernels/fill_u32-gfx90a.co").as_slice()),
        ("gfx942", include_bytes!("../kernels/fill_u32-gfx942.co").as_slice()),
    ])
    .unwrap()
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn null_stream_waits_for_blocking_streams_only() {
    let dev = device();
    let buf = dev.alloc(1 << 20).unwrap();
    let blocking = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    // Memory of its own: touching the legacy stream's bytes unordered would be a race.
    // Allocated before the gate: a device allocation may make later work wait for all
    // earlier work of the device (CUDA's did, on an H200), the gated stream's too.
    let other = dev.alloc(16).unwrap();
    let non_blocking = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let open = gate(&blocking);
    let null = dev.default_stream(DefaultStream::Legacy).unwrap();
    let legacy = if major() >= 7 { 1 } else { 0 };
    assert_eq!(
        null.raw_handle(),
        legacy,
        "the legacy default stream: hipStreamLegacy on HIP 7, the null stream before"
    );
    null.memset(&buf, 0, 1 << 20, 1).unwrap();
    non_blocking.memset(&other, 0, 16, 2).unwrap();
    non_blocking.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!null.query().unwrap(), "the null stream must wait for the blocking stream");
    open.open();
    null.synchronize().unwrap();
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn info_is_complete() {
    let info = device().info().unwrap();
    assert!(!info.name.is_empty() && info.total_memory > 0);
    assert!(info.multiprocessors.is_some_and(|n| n > 0));
    assert!(info.pci_bus_id.as_deref().is_some_and(|p| p.contains(':')));
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn the_default_streams_use_each_versions_handles() {
    let dev = device();
    let buf = dev.alloc(256).unwrap();
    let legacy = dev.default_stream(DefaultStream::Legacy).unwrap();
    assert_eq!(legacy.raw_handle(), if major() >= 7 { 1 } else { 0 });
    legacy.memset(&buf, 0, 256, 3).unwrap();
    legacy.synchronize().unwrap();
    match dev.default_stream(DefaultStream::PerThread) {
        // From ROCm 6: hipStreamPerThread, the same handle on every thread.
        Ok(per_thread) => {
            assert!(major() >= 6);
            assert_eq!(per_thread.raw_handle(), 2);
            per_thread.memset(&buf, 0, 256, 4).unwrap();
            let ev = dev.create_event(Default::default()).unwrap();
            per_thread.record(&ev).unwrap();
            legacy.wait(&ev).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| dev.default_stream(DefaultStream::PerThread).unwrap().synchronize().unwrap());
            });
            per_thread.synchronize().unwrap();
            legacy.synchronize().unwrap();
        }
        Err(e) => {
            assert_eq!(major(), 5, "only ROCm 5 lacks the per-thread handle: {e}");
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        }
    }
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn null_is_nobodys_memory_on_every_version() {
    // HIP 7 answers hipPointerGetAttributes(NULL) with success where earlier runtimes
    // refused it: gpuport's answer does not depend on which.
    let attrs = device().pointer_attributes(0).unwrap();
    assert_eq!(attrs.memory, MemoryKind::Unregistered);
    assert_eq!(attrs.allocation, None);
    // Nothing gpuport frees is NULL (HIP 7 takes hipFreeAsync(NULL), earlier runtimes
    // refuse it, and the doubles before 7 would report the refusal as a stream error).
    let dev = device();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    if let Ok(empty) = dev.alloc_async(0, &s) {
        drop(empty);
    }
    s.synchronize().unwrap();
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn a_launch_out_of_range_is_an_invalid_argument_on_every_version() {
    let dev = device();
    let bundle = fill_bundle();
    let module = dev.load_module(ModuleImage::HipCodeObject(&bundle)).unwrap();
    let fill = dev.kernel(&module, "fill_u32").unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let b = dev.alloc(4096).unwrap();
    // fill_u32 takes at most 256 work-items per block (its max_flat_workgroup_size): 1024
    // is refused by the runtime — hipErrorInvalidConfiguration on HIP 7,
    // hipErrorInvalidValue before.
    let config = LaunchConfig { grid: [1, 1, 1], block: [1024, 1, 1], shared_mem_bytes: 0 };
    let args = [KernelArg::buffer(&b), KernelArg::scalar(1u32), KernelArg::scalar(1024u32)];
    let err = s.launch(&fill, &config, &args).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    let status = if major() >= 7 { "hipErrorInvalidConfiguration" } else { "hipErrorInvalidValue" };
    assert!(err.to_string().contains(status), "{err}");
    // The stream is not broken by the refusal.
    s.launch(&fill, &LaunchConfig::for_items(1024, 256).unwrap(), &args).unwrap();
    s.synchronize().unwrap();
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn a_code_object_for_another_target_is_refused_naming_both() {
    let dev = device();
    let arch = dev.info().unwrap().arch.expect("the device's target ID");
    assert!(arch.starts_with("gfx") && arch.contains(':'), "the target ID keeps its features: {arch}");
    let other =
        gpuport_rocm::offload_bundle(&[("gfx1030", include_bytes!("../kernels/fill_u32-gfx1030.co").as_slice())])
            .unwrap();
    let err = dev.load_module(ModuleImage::HipCodeObject(&other)).expect_err("no code for this device");
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("gfx1030") && err.to_string().contains(&arch), "{err}");
    let bare = include_bytes!("../kernels/fill_u32-gfx1030.co");
    let err = dev.load_module(ModuleImage::HipCodeObject(bare)).expect_err("a code object of another target");
    assert!(err.to_string().contains("built for gfx1030"), "{err}");
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn a_dropped_stream_is_never_named_again() {
    // HIP 7 may crash on a destroyed stream where earlier runtimes returned an error; the
    // doubles report any call naming one. Work, events and buffers outliving the stream
    // they were queued on never reach the runtime with it.
    let dev = device();
    let buf = dev.alloc(1 << 16).unwrap();
    let other = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let ev = dev.create_event(Default::default()).unwrap();
    {
        let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
        let open = gate(&s);
        s.memset(&buf, 0, 1 << 16, 5).unwrap();
        s.record(&ev).unwrap();
        let pending = dev.alloc_async(4096, &s);
        drop(s);
        other.wait(&ev).unwrap();
        assert!(!ev.query().unwrap(), "the work is still held");
        drop(pending);
        open.open();
    }
    ev.synchronize().unwrap();
    other.synchronize().unwrap();
    dev.synchronize().unwrap();
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn a_kernel_compiled_from_source_runs() {
    // hiprtc, loaded at run time: one source for both vendors.
    compile_cases::a_compiled_kernel_runs(&device());
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn a_compile_error_carries_the_compilers_log() {
    compile_cases::a_compile_error_carries_the_log(&device());
}

#[test]
#[ignore = "needs an AMD GPU: cargo xtask test --backend rocm"]
fn several_threads_compile_at_once() {
    compile_cases::several_threads_compile_at_once(&device());
}
