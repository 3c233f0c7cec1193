//! ROCm-only behaviour on a real AMD GPU. Ignored by default; `cargo xtask test --backend
//! rocm` runs them (with `--include-ignored`) and they fail when no AMD GPU is available.

#[path = "../../test-support/gate.rs"]
mod gate;

use std::time::Duration;

use gate::gate;
use gpuport_core::{Backend, DefaultStream, Device, LoadOptions, Stream, StreamFlags};
use gpuport_rocm::{RocmBackend, RocmDevice};

fn device() -> RocmDevice {
    RocmBackend::load(&LoadOptions::default()).expect("a HIP runtime with a device").open(0).expect("ROCm device 0")
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
    assert_eq!(null.raw_handle(), 0, "the legacy default stream is HIP's null stream");
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
