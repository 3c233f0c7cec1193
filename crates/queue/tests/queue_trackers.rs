//! A queue's tracker counts as live — kept in its device's list — exactly while it still
//! matters: while the queue can run work, or while an error of its work is unreported. A
//! tracker live for ever would grow the list with every stream ever made; one dead too
//! soon would let a device-wide synchronize miss work or an error. And a device-wide
//! synchronize from a host callback of one of its queues is refused before it waits for
//! any of them.

use std::sync::mpsc::channel;
use std::time::Duration;

use gpuport_core::Error;
use gpuport_queue::{synchronize_all, WorkQueue};

mod common;
use common::eventually;

#[test]
fn a_tracker_lives_while_its_queue_does() {
    let q = WorkQueue::new("tracked".into()).unwrap();
    let tracker = q.tracker();
    assert!(tracker.is_live(), "a live queue's tracker");
    drop(q); // nothing ever ran: no drainer holds it
    assert!(!tracker.is_live(), "a gone queue with nothing to report");
}

#[test]
fn a_tracker_lives_until_its_queues_error_is_reported() {
    let q = WorkQueue::new("failing".into()).unwrap();
    let tracker = q.tracker();
    q.run(Box::new(|| Err(Error::invalid_argument("the work failed")))).unwrap();
    assert!(tracker.synchronize().is_err(), "the error, reported while the queue lives (and kept)");
    drop(q);
    assert!(tracker.is_live(), "a gone queue with an unreported error");
    let reported = tracker.synchronize();
    assert!(reported.is_err_and(|e| e.to_string().contains("the work failed")));
    assert!(eventually(|| !tracker.is_live()), "the error reported and the queue gone, its tracker still lives");
}

/// Refused at once, not after waiting for the other queues: one of them may be waiting for
/// work queued behind this very callback (here, another queue held by a gate stands for
/// it), and then the wait would never end.
#[test]
fn a_device_wide_synchronize_from_a_callback_is_refused_before_any_wait() {
    let (own, other) = (WorkQueue::new("own".into()).unwrap(), WorkQueue::new("held".into()).unwrap());
    let (open, gate) = channel::<()>();
    other.run(Box::new(move || gate.recv().map_err(|_| Error::invalid_argument("the gate was dropped")))).unwrap();
    let trackers = [other.tracker(), own.tracker()];
    let (tx, rx) = channel();
    own.callback(Box::new(move || {
        let _ = tx.send(synchronize_all(&trackers));
    }))
    .unwrap();
    let answer = rx.recv_timeout(Duration::from_secs(30));
    open.send(()).unwrap();
    let answer = answer.expect("the device-wide synchronize waited for a held queue before refusing");
    assert!(matches!(answer, Err(Error::WouldDeadlock { .. })), "{answer:?}");
    own.synchronize().unwrap();
    other.synchronize().unwrap();
}
