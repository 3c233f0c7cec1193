//! A stream costs no thread until it has work. (Its own test binary: other tests' pool
//! threads would change the count.)

use gpuport_queue::WorkQueue;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

#[test]
fn queues_without_work_start_no_thread() {
    let before = threads();
    let queues: Vec<_> = (0..200).map(|i| WorkQueue::new(format!("idle {i}")).unwrap()).collect();
    assert_eq!(threads(), before, "creating queues started threads");
    drop(queues);
}
