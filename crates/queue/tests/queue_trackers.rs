//! A queue's tracker counts as live — kept in its device's list — exactly while it still
//! matters: while the queue can run work, or while an error of its work is unreported. A
//! tracker live for ever would grow the list with every stream ever made; one dead too
//! soon would let a device-wide synchronize miss work or an error.

use std::time::{Duration, Instant};

use gpuport_core::Error;
use gpuport_queue::WorkQueue;

/// Waits (up to ten seconds) for `done`: a drainer may hold its queue a moment after the
/// queue's last handle is gone.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while !done() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

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
