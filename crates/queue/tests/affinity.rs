//! Thread placement: `GPUPORT_WORKER_CPUS`'s list, as `parse_cpu_list` reads it (single
//! CPUs, ranges one CPU wide included, and what is refused rather than half-read),
//! `pin_current_thread`, checked against the affinity the system then reports, and the
//! pool's threads running where the list places them. The variable is read once per
//! process, before the pool's first thread starts: only the last test here sets it, and no
//! other test here starts a pool thread or reads it.

use std::time::Duration;

use gpuport_queue::affinity::{parse_cpu_list, pin_current_thread, WORKER_CPUS_ENV};
use gpuport_queue::WorkQueue;

#[test]
fn cpus_and_ranges_are_read_in_order() {
    assert_eq!(parse_cpu_list("0"), Some(vec![0]));
    assert_eq!(parse_cpu_list("1,3"), Some(vec![1, 3]));
    assert_eq!(parse_cpu_list(" 2-5 , 7 "), Some(vec![2, 3, 4, 5, 7]));
    // A range one CPU wide is that CPU.
    assert_eq!(parse_cpu_list("3-3"), Some(vec![3]));
    assert_eq!(parse_cpu_list("1023"), Some(vec![1023]));
    assert_eq!(parse_cpu_list("1020-1023"), Some(vec![1020, 1021, 1022, 1023]));
}

#[test]
fn a_malformed_reversed_or_out_of_range_list_is_refused_whole() {
    for bad in ["", " , ", "x", "1,x", "5-2", "0-1024", "1024", "2-", "-3", "1-2-3"] {
        assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
    }
}

/// The CPUs the calling thread may run on, as the system reports them.
#[cfg(target_os = "linux")]
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
fn a_pinned_thread_runs_only_where_it_was_pinned() {
    // On a thread of its own: the pin outlives the call.
    std::thread::spawn(|| {
        let first = *allowed_cpus().first().expect("the thread may run somewhere");
        assert!(pin_current_thread(&[first]), "pinning to CPU {first}, which this thread may use");
        assert_eq!(allowed_cpus(), [first]);
        // CPUs past the set's size are left out rather than written past it; with nothing
        // left, the system refuses and the thread stays where it was.
        assert!(!pin_current_thread(&[libc::CPU_SETSIZE as usize]), "a CPU past the set's size");
        assert!(!pin_current_thread(&[]), "no CPU at all");
        assert_eq!(allowed_cpus(), [first]);
    })
    .join()
    .expect("the pinned thread's checks");
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
