//! Pending work lives with the allocation: every view and clone of an array orders after
//! work recorded through any other, on one backend with event waits and across backends
//! without blocking the caller.

mod common;

use std::sync::mpsc::{channel, Sender};
use std::time::{Duration, Instant};

use common::devices;
use gpuport_runtime::{Access, AnyDevice, AnyStream, Array, DType, StreamFlags};

/// A stream held by a host callback until the returned sender fires (or 30 s pass).
fn held_stream(dev: &AnyDevice) -> (AnyStream, Sender<()>) {
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let (open, gate) = channel::<()>();
    stream
        .host_callback(Box::new(move || {
            let _ = gate.recv_timeout(Duration::from_secs(30));
        }))
        .unwrap();
    (stream, open)
}

/// Queues "fill bytes `range` of `a` with `value`" on `stream` and records it as a write.
fn fill(a: &Array, stream: &AnyStream, range: std::ops::Range<usize>, value: u8) {
    a.wait_pending(stream, Access::Write).unwrap();
    stream.memset(a.buffer(), a.byte_offset() + range.start, range.len(), value).unwrap();
    a.record_access(stream, Access::Write).unwrap();
}

#[test]
fn a_view_taken_before_the_work_orders_after_it() {
    let (host, e0, _) = devices();
    for dev in [&host, &e0] {
        let a = Array::zeros(dev, &[4], DType::U8).unwrap();
        let view = a.slice(0, 0, None, 1).unwrap(); // taken before any work is queued
        let (s, open) = held_stream(dev);
        fill(&a, &s, 0..4, 7);
        open.send(()).unwrap();
        assert_eq!(view.to_vec::<u8>().unwrap(), vec![7; 4], "{}: the early view read stale data", dev.id());
        assert_eq!(a.to_vec::<u8>().unwrap(), vec![7; 4]);
    }
}

#[test]
fn writes_on_two_streams_are_both_waited_for() {
    let (host, e0, _) = devices();
    for dev in [&host, &e0] {
        let a = Array::zeros(dev, &[8], DType::U8).unwrap();
        let (first, lo, hi) = (a.slice(0, 0, Some(4), 1).unwrap(), 0..4usize, 4..8usize);
        let second = a.slice(0, 4, None, 1).unwrap();
        let (s1, open1) = held_stream(dev);
        let (s2, open2) = held_stream(dev);
        // Two halves written concurrently, each recorded through its own view, without a
        // wait between them: both are pending writes of the one allocation.
        s1.memset(a.buffer(), lo.start, lo.len(), 1).unwrap();
        first.record_access(&s1, Access::Write).unwrap();
        s2.memset(a.buffer(), hi.start, hi.len(), 2).unwrap();
        second.record_access(&s2, Access::Write).unwrap();
        // A reader on a third stream orders after both.
        let reader = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
        let out = Array::zeros(dev, &[8], DType::U8).unwrap();
        gpuport_runtime::CopyEngine::default().copy_on(&a, &out, &reader).unwrap();
        open2.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!reader.query().unwrap(), "{}: the reader ran before the write on s1", dev.id());
        open1.send(()).unwrap();
        assert_eq!(out.to_vec::<u8>().unwrap(), vec![1, 1, 1, 1, 2, 2, 2, 2], "{}", dev.id());
    }
}

#[test]
fn a_full_join_replaces_earlier_marks_and_reads_hold_back_writers() {
    let (host, _, _) = devices();
    let a = Array::zeros(&host, &[4], DType::U8).unwrap();
    let (r, open_r) = held_stream(&host);
    // A pending read on `r` …
    a.wait_pending(&r, Access::Read).unwrap();
    a.record_access(&r, Access::Read).unwrap();
    // … holds back a writer on `w`, but not a reader on `q`.
    let w = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    fill(&a, &w, 0..4, 9);
    let q = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let b = a.clone();
    b.wait_pending(&q, Access::Read).unwrap(); // waits for the write on `w`, which waits for `r`
    std::thread::sleep(Duration::from_millis(20));
    assert!(!w.query().unwrap(), "the writer ran before the pending read");
    open_r.send(()).unwrap();
    w.synchronize().unwrap();
    q.synchronize().unwrap();
    assert_eq!(b.to_vec::<u8>().unwrap(), vec![9; 4]);
    a.synchronize().unwrap();
    assert!(!a.has_pending_work().unwrap());
}

#[test]
fn across_backends_the_caller_is_not_blocked() {
    let (host, e0, _) = devices();
    // Work on an ext stream writes the array; a host stream orders after it.
    let a = Array::zeros(&e0, &[16], DType::U8).unwrap();
    let (s, open) = held_stream(&e0);
    fill(&a, &s, 0..16, 5);
    let t = host.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let started = Instant::now();
    a.wait_pending(&t, Access::Read).unwrap();
    let (tx, ran) = channel();
    t.host_callback(Box::new(move || tx.send(()).unwrap())).unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "wait_pending blocked the caller");
    assert!(ran.recv_timeout(Duration::from_millis(50)).is_err(), "the host stream ran ahead of the ext write");
    open.send(()).unwrap();
    ran.recv_timeout(Duration::from_secs(30)).expect("the host stream goes on once the ext write is done");
    assert_eq!(a.to_vec::<u8>().unwrap(), vec![5; 16]);
}

#[test]
fn streams_of_another_device_are_refused_by_record_access() {
    let (host, e0, _) = devices();
    let a = Array::zeros(&host, &[4], DType::U8).unwrap();
    let other = e0.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    assert!(matches!(a.record_access(&other, Access::Write), Err(gpuport_runtime::Error::InvalidArgument { .. })));
    a.record_access_on(&e0, &other, Access::Read).unwrap();
}
