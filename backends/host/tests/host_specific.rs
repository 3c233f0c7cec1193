//! Host-only behaviour the generic conformance suite cannot check on vendors (where a stale
//! handle is undefined behaviour): stale raw handles are refused, failing queued work is
//! reported by the next synchronize, and the stream keeps working afterwards.

use gpuport_core::{Backend, Device, Error, Event, EventFlags, LoadOptions, Stream, StreamFlags};
use gpuport_host::{HostBackend, HostDevice};

fn device() -> HostDevice {
    HostBackend::load(&LoadOptions::default()).unwrap().open(0).unwrap()
}

#[test]
fn stale_raw_handles_are_refused() {
    let dev = device();
    let s = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    let raw = s.raw_handle();
    // SAFETY: the host backend checks raw handles against its registry.
    let borrowed = unsafe { dev.wrap_stream(raw) }.unwrap();
    drop(s); // destroys the stream
    assert!(matches!(borrowed.memset(&dev.alloc(8).unwrap(), 0, 8, 0), Err(Error::InvalidHandle { .. })));
    // SAFETY: as above.
    let stale = unsafe { dev.wrap_stream(raw) };
    assert!(matches!(stale, Err(Error::InvalidHandle { .. })));
    // SAFETY: as above; 1 and 2 are never host handles.
    assert!(unsafe { dev.wrap_stream(1) }.is_err());

    let e = dev.create_event(EventFlags::empty()).unwrap();
    let raw = e.raw_handle();
    drop(e);
    // SAFETY: as above.
    let stale = unsafe { dev.wrap_event(raw) };
    assert!(matches!(stale, Err(Error::InvalidHandle { .. })));
}

#[test]
fn pending_work_outlives_the_stream_and_keeps_buffers_alive() {
    let dev = device();
    let s = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    let src = dev.alloc(1 << 20).unwrap();
    let dst = dev.alloc(1 << 20).unwrap();
    s.memset(&src, 0, 1 << 20, 9).unwrap();
    s.copy(&src, 0, &dst, 0, 1 << 20).unwrap();
    let probe = dst.clone();
    drop((s, src, dst)); // the queued copy still holds both buffers
    dev.synchronize().unwrap();
    let s2 = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    let mut out = vec![0u8; 1 << 20];
    s2.read(&probe, 0, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 9));
    assert_eq!(probe.handle_count(), 1, "queued work released its buffer clones");
}

#[test]
fn allocations_are_aligned_and_registered() {
    let dev = device();
    for n in [1usize, 255, 4097] {
        let b = dev.alloc(n).unwrap();
        assert_eq!(b.addr() % 256, 0);
        let a = dev.pointer_attributes(b.addr() + n as u64 - 1).unwrap();
        assert_eq!(a.allocation, Some((b.addr(), n)));
        let past = dev.pointer_attributes(b.addr() + n as u64).unwrap();
        assert_ne!(past.allocation, Some((b.addr(), n)));
    }
}
