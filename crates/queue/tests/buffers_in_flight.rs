//! A queued copy's memory: written before `synchronize` returns, and kept alive by the
//! copy while it waits even when its last user handle is gone.
//!
//! These two rules are also where the checkers prove themselves: built with the
//! `deliberate-race` feature the worker counts the copy complete before writing, and
//! ThreadSanitizer reports the read below racing with the write; built with
//! `deliberate-early-free` the copy lets its buffers go, and Miri reports the write into
//! freed memory (`cargo xtask sanitize bugs`).

use std::sync::mpsc;

use gpuport_core::{Buffer, DeviceId, MemoryKind};
use gpuport_queue::memory::{host_buffer, PointerRegistry};
use gpuport_queue::{Rows, WorkQueue};

static REGISTRY: PointerRegistry = PointerRegistry::new();

/// Below the size the host block cache keeps, so a freed block goes back to the system
/// allocator at once (and a checker sees it freed).
const LEN: usize = 256;

fn filled(value: u8) -> Buffer {
    let b = host_buffer(&REGISTRY, DeviceId::HOST, LEN, MemoryKind::Device, 1 << 30).unwrap();
    // SAFETY: a fresh host buffer of LEN bytes that nothing else uses yet.
    unsafe { std::ptr::write_bytes(b.host_ptr(0, LEN).unwrap(), value, LEN) };
    b
}

fn contents(b: &Buffer) -> Vec<u8> {
    // SAFETY: LEN readable bytes, with no work pending on them.
    unsafe { std::slice::from_raw_parts(b.host_ptr(0, LEN).unwrap(), LEN) }.to_vec()
}

#[test]
fn a_copy_has_written_its_bytes_when_synchronize_returns() {
    let q = WorkQueue::new("copy then read".into()).unwrap();
    // Several rounds, each ending in a different way of waiting (a waiter that spins, one
    // that sleeps): a bug that shows only in one of them still shows.
    for round in 1..=20u8 {
        let (src, dst) = (filled(round), filled(0));
        let (s, d) = (src.host_ptr(0, LEN).unwrap(), dst.host_ptr(0, LEN).unwrap());
        // SAFETY: both ranges are LEN bytes of the buffers the copy keeps.
        unsafe { q.copy(s, d, LEN, [Some(src.clone()), Some(dst.clone())]) }.unwrap();
        q.synchronize().unwrap();
        assert_eq!(contents(&dst), vec![round; LEN], "round {round}");
    }
}

#[test]
fn a_waiting_copy_keeps_its_buffers_after_their_last_handle_is_dropped() {
    let q = WorkQueue::new("held copy".into()).unwrap();
    let (open, gate) = mpsc::channel::<()>();
    q.callback(Box::new(move || {
        let _ = gate.recv();
    }))
    .unwrap();
    let (src, dst) = (filled(9), filled(0));
    let (s, d) = (src.host_ptr(0, LEN).unwrap(), dst.host_ptr(0, LEN).unwrap());
    let watch = dst.clone();
    // SAFETY: both ranges are LEN bytes of the buffers the copy keeps.
    unsafe { q.copy(s, d, LEN, [Some(src), Some(dst)]) }.unwrap();
    // The source's last user handle went while the copy waits behind the gate: the copy's
    // own handle must keep the memory until it has run.
    open.send(()).unwrap();
    q.synchronize().unwrap();
    assert_eq!(contents(&watch), vec![9; LEN]);
    assert_eq!(watch.handle_count(), 1, "the copy let its handle go once it ran");
}

#[test]
fn a_copy_of_rows_writes_each_row_at_its_pitch_and_nothing_between() {
    let q = WorkQueue::new("rows".into()).unwrap();
    let (src, dst) = (host_buffer(&REGISTRY, DeviceId::HOST, LEN, MemoryKind::Device, 1 << 30).unwrap(), filled(0));
    let s = src.host_ptr(0, LEN).unwrap();
    // SAFETY: LEN bytes of a fresh buffer nothing else uses.
    unsafe { (0..LEN).for_each(|i| s.add(i).write(i as u8)) };
    // Seven rows of 5 bytes, every 32 bytes of the source, every 9 of the destination.
    let rows = Rows { count: 7, src_pitch: 32, dst_pitch: 9 };
    let d = dst.host_ptr(0, LEN).unwrap();
    // SAFETY: the last row ends at 6 * 32 + 5 and 6 * 9 + 5, inside both buffers, which
    // the copy keeps.
    unsafe { q.copy_rows(s, d, 5, rows, [Some(src.clone()), Some(dst.clone())]) }.unwrap();
    q.synchronize().unwrap();
    let mut want = vec![0u8; LEN];
    for row in 0..7 {
        for i in 0..5 {
            want[row * 9 + i] = (row * 32 + i) as u8;
        }
    }
    assert_eq!(contents(&dst), want);
}
