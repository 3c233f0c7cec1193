//! The pool's threads exit after ten seconds without work (`IDLE_KEEP`), and work queued
//! after that still runs: the pool counts the threads that left, so a later job gets a
//! thread of its own rather than waiting for one that is gone. (Its own test binary: the
//! threads of other tests would keep the pool busy.)

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpuport_queue::WorkQueue;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

/// Runs one operation on `queue`, waited for on another thread: whether it ran within
/// `limit` (a job no thread takes never runs).
fn runs_within(queue: &WorkQueue, limit: Duration) -> bool {
    let (tx, rx) = mpsc::channel();
    queue.run(Box::new(move || tx.send(()).map_err(|_| gpuport_core::Error::invalid_argument("no receiver")))).unwrap();
    rx.recv_timeout(limit).is_ok()
}

#[test]
#[cfg_attr(miri, ignore = "counts the process's threads, which Miri's interpreted threads are not")]
fn work_after_every_pool_thread_has_left_still_runs() {
    let before = threads();
    let queues: Vec<WorkQueue> = (0..3).map(|i| WorkQueue::new(format!("q{i}")).unwrap()).collect();
    for q in &queues {
        assert!(runs_within(q, Duration::from_secs(30)), "{} never ran its first operation", q.name());
        q.synchronize().unwrap();
    }
    assert!(threads() > before, "the work started no pool thread");
    // Idle threads leave after ten seconds without work: wait until all have.
    let deadline = Instant::now() + Duration::from_secs(40);
    while threads() > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(threads(), before, "the pool's idle threads did not leave within 40 s");
    // No thread left: each queue's next operation must start one.
    for q in &queues {
        assert!(runs_within(q, Duration::from_secs(30)), "{}: work queued after the pool emptied never ran", q.name());
        q.synchronize().unwrap();
    }
}
