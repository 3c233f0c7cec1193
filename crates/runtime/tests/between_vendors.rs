//! A staged copy between two vendors (CUDA → ROCm and ROCm → CUDA) keeps both halves of
//! its pipeline in flight: its staging buffers are one vendor's pinned memory registered
//! with the other, so the source's driver queues each chunk's device-to-host copy and
//! returns, where a copy into memory it takes for pageable would make the caller wait
//! until that copy is done.
//!
//! Shown on the driver doubles, which make a copy into pageable memory return only once
//! it has completed, as both vendors' drivers do, and which say how many operations are
//! queued (`gpuport_double_queued_ops`, a test hook of theirs): with the source's stream
//! held by a gate, the caller queues two chunks' copies behind it before it waits for
//! the first. Needs both doubles (ignored by default); `cargo xtask test --backend
//! cuda|rocm --double` runs it.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpuport_runtime::{release_copy_resources, AnyDevice, Array, CopyEngine, CopyRoute, DefaultStream, Runtime};

/// How many operations the double at `$var` has queued and not completed.
fn queued_ops(var: &str) -> u64 {
    let path = std::env::var_os(var).unwrap_or_else(|| panic!("{var} must name a driver double"));
    // SAFETY: the double is already loaded by the backend (this opens it again, which runs
    // no initialiser), and its hook takes nothing and returns a count.
    unsafe {
        let lib = libloading::Library::new(&path).expect("the double opens");
        let hook = lib
            .get::<unsafe extern "C" fn() -> u64>(b"gpuport_double_queued_ops\0")
            .expect("the double exports gpuport_double_queued_ops");
        hook()
    }
}

/// Copies `CHUNKS` chunks from `from` to `to` while `from`'s legacy default stream (which
/// a staged copy reads the source on) is held, and checks that the caller queued two
/// chunks' copies before waiting.
fn two_chunks_in_flight(from: &AnyDevice, to: &AnyDevice, double: &str) {
    const CHUNK: usize = 64 << 10;
    const CHUNKS: usize = 4;
    let data: Vec<u32> = (0..(CHUNK * CHUNKS / 4) as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let src = Array::from_slice(from, &data, &[data.len()]).unwrap();
    let dst = Array::zeros(to, &[data.len()], src.dtype()).unwrap();
    let engine = CopyEngine::with_chunk_bytes(CHUNK).unwrap();
    from.synchronize().unwrap();
    to.synchronize().unwrap();

    let (open, gate) = mpsc::channel::<()>();
    let held = from.default_stream(DefaultStream::Legacy).unwrap();
    held.host_callback(Box::new(move || {
        let _ = gate.recv_timeout(Duration::from_secs(120));
    }))
    .unwrap();
    let before = queued_ops(double);
    let worker = {
        let (src, dst) = (src.clone(), dst.clone());
        std::thread::spawn(move || engine.copy(&src, &dst))
    };
    // Each chunk's first half is a copy and an event record on the held stream: two
    // chunks queued are four operations. A copy the driver takes for one into pageable
    // memory holds the caller inside it after one.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = queued_ops(double) - before;
    while seen < 4 {
        if Instant::now() > deadline {
            let _ = open.send(());
            let _ = worker.join();
            panic!(
                "{} → {}: {seen} operation(s) queued behind the held stream, not two chunks' four: the caller \
                 waited inside a chunk's copy (its staging buffer is pageable memory to {})",
                from.id(),
                to.id(),
                from.id().kind
            );
        }
        std::thread::sleep(Duration::from_millis(1));
        seen = queued_ops(double) - before;
    }
    open.send(()).unwrap();
    let route = worker.join().expect("the copy does not panic").unwrap();
    assert_eq!(route, CopyRoute::Staged { chunks: CHUNKS }, "{} → {}", from.id(), to.id());
    assert_eq!(dst.to_vec::<u32>().unwrap(), data, "{} → {}", from.id(), to.id());
}

#[test]
#[ignore = "needs the CUDA and HIP driver doubles: cargo xtask test --backend cuda|rocm --double"]
fn staged_copies_between_vendors_keep_two_chunks_in_flight() {
    let rt = Runtime::discover();
    let (Ok(cuda), Ok(rocm)) = (rt.device("cuda:0"), rt.device("rocm:0")) else {
        panic!("both CUDA and ROCm must be available (the double runs load both doubles)");
    };
    two_chunks_in_flight(&cuda, &rocm, "GPUPORT_CUDA_LIBRARY");
    two_chunks_in_flight(&rocm, &cuda, "GPUPORT_HIP_LIBRARY");
    // The pooled staging sets (and their registrations) go before the doubles' exit check.
    release_copy_resources();
}
