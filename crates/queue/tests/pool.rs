//! The queues' thread pool: queues blocked
//! in host callbacks never keep another queue's work from running.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use gpuport_queue::WorkQueue;

#[test]
fn every_blocked_queue_gets_its_own_thread() {
    // 48 queues whose callbacks all wait for one another: they can only finish if each
    // runs on its own thread at the same time. (8 under Miri, whose threads run
    // interleaved on one: the rule is the same at any count.)
    const N: usize = if cfg!(miri) { 8 } else { 48 };
    let barrier = Arc::new(Barrier::new(N));
    let queues: Vec<_> = (0..N).map(|i| WorkQueue::new(format!("blocked {i}")).unwrap()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    for q in &queues {
        let (barrier, tx) = (barrier.clone(), tx.clone());
        q.callback(Box::new(move || {
            barrier.wait();
            let _ = tx.send(());
        }))
        .unwrap();
    }
    for _ in 0..N {
        rx.recv_timeout(Duration::from_secs(30)).expect("a queue's work never ran: the pool starved it");
    }
    for q in &queues {
        q.synchronize().unwrap();
    }
}

#[test]
fn order_holds_across_many_quick_enqueues() {
    let q = WorkQueue::new("order".into()).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    // Fewer under Miri, still across several idle-and-rescheduled cycles.
    let n = if cfg!(miri) { 2_500 } else { 10_000 };
    for i in 0..n {
        let seen = seen.clone();
        q.callback(Box::new(move || seen.lock().unwrap().push(i))).unwrap();
        if i % 997 == 0 {
            q.synchronize().unwrap(); // let the queue go idle and be scheduled again
        }
    }
    q.synchronize().unwrap();
    assert_eq!(*seen.lock().unwrap(), (0..n).collect::<Vec<_>>());
}
