//! `GPUPORT_WORKER_CPUS` places the pool's threads: work runs on the CPUs the list names,
//! not where the thread that queued it happens to run. One test: the variable is read once
//! per process, before the pool's first thread starts.

use std::time::Duration;

use gpuport_queue::affinity::{pin_current_thread, WORKER_CPUS_ENV};
use gpuport_queue::WorkQueue;

/// The CPUs the calling thread may run on, as the system reports them.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a valid set of its size.
    let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0;
    assert!(ok, "sched_getaffinity");
    // SAFETY: every index below CPU_SETSIZE is within the set.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

#[cfg(target_os = "linux")]
#[test]
fn the_pools_threads_run_on_the_cpus_the_list_names() {
    let all = allowed_cpus();
    // The list names every CPU this process may use; the thread that queues the work is
    // confined to the first, and the pool's threads it starts would inherit that. With
    // one CPU the two are the same and only the pin itself is seen.
    let list = all.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    // Set before the pool's first thread reads it; no other thread runs in this process.
    std::env::set_var(WORKER_CPUS_ENV, &list);
    assert!(pin_current_thread(&all[..1]));
    let q = WorkQueue::new("placed".into()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    q.callback(Box::new(move || {
        let _ = tx.send(allowed_cpus());
    }))
    .unwrap();
    let seen = rx.recv_timeout(Duration::from_secs(30)).expect("the work ran");
    q.synchronize().unwrap();
    assert_eq!(seen, all, "the worker runs where {WORKER_CPUS_ENV}={list} says, not where its creator ran");
}
