//! The inline path's claim, observed in the windows no public handle can hold: between an
//! inline operation's release of its claim and its look for work queued meanwhile (the
//! queue has work pending and nobody scheduled to drain it), and between a drainer's last
//! operation and its giving the queue up (all the work is done, and the queue is still
//! held). Hooks hold a thread there: one run on the releasing thread, one run by the
//! drainer of a given queue.

use std::cell::RefCell;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use super::{QueueCore, WorkQueue};

thread_local! {
    /// Run once on this thread when its inline operation has released its claim.
    static ON_RELEASE: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
}

/// Called by `WorkQueue::run_inline_if_idle` right after it releases its claim.
pub(super) fn claim_released() {
    if let Some(hook) = ON_RELEASE.with(|h| h.borrow_mut().take()) {
        hook();
    }
}

/// Hooks run once by a drainer of the queue with that id, just before it gives the queue
/// up (keyed by queue: the pool's threads serve every test's queues).
static BEFORE_RELEASE: Mutex<Vec<(usize, Hook)>> = Mutex::new(Vec::new());

type Hook = Box<dyn FnOnce() + Send>;

/// Called by a drainer right before it gives `state` up.
pub(super) fn before_release(state: &QueueCore) {
    let hook = {
        let mut hooks = BEFORE_RELEASE.lock().unwrap_or_else(|p| p.into_inner());
        hooks.iter().position(|(id, _)| *id == state.id()).map(|i| hooks.swap_remove(i).1)
    };
    if let Some(hook) = hook {
        hook();
    }
}

/// A queue nothing was ever queued on is idle. (Not one just synchronized: its drainer may
/// still be keeping it a moment for the next operation, and then the queue is not idle.)
#[test]
fn a_new_queue_runs_the_operation_on_the_calling_thread() {
    let q = WorkQueue::new("inline".into()).unwrap();
    let me = std::thread::current().id();
    assert_eq!(q.run_inline_if_idle(|| std::thread::current().id()), Some(me));
    assert_eq!(q.run_inline_if_idle(|| 7), Some(7), "the first operation left its claim behind");
}

#[test]
fn a_closed_queue_runs_nothing_inline() {
    let q = WorkQueue::new("closed".into()).unwrap();
    q.close();
    let mut ran = false;
    assert_eq!(q.run_inline_if_idle(|| ran = true), None);
    assert!(!ran, "ran on a closed queue");
}

#[test]
fn work_pending_keeps_the_operation_off_the_calling_thread() {
    let q = WorkQueue::new("held".into()).unwrap();
    let (open, gate) = channel::<()>();
    q.run(Box::new(move || gate.recv().map_err(|_| gpuport_core::Error::invalid_argument("the gate was dropped"))))
        .unwrap();
    let mut ran = false;
    assert_eq!(q.run_inline_if_idle(|| ran = true), None);
    assert!(!ran, "ran while queued work was held");
    open.send(()).unwrap();
    q.synchronize().unwrap();
}

/// Work queued while another thread's inline operation holds the claim runs before any
/// later inline operation — also one that arrives while the first is releasing its
/// claim, when the queue has pending work and is scheduled nowhere.
#[test]
fn work_queued_under_a_claim_is_not_overtaken_while_the_claim_is_released() {
    let q = WorkQueue::new("released".into()).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|scope| {
        // Made here, so that a failing check drops this side and the other thread, woken
        // with an error, ends instead of holding the scope open.
        let (claimed_tx, claimed) = channel::<()>();
        let (queued_tx, queued) = channel::<()>();
        let (released_tx, released) = channel::<()>();
        let (resume_tx, resume) = channel::<()>();
        let q = &q;
        let first = scope.spawn(move || {
            ON_RELEASE.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    released_tx.send(()).unwrap();
                    resume.recv().unwrap();
                }))
            });
            // Owning the senders, so that an operation not run drops them: the main thread
            // then fails instead of waiting.
            q.run_inline_if_idle(move || {
                claimed_tx.send(()).unwrap();
                queued.recv().unwrap();
            })
        });
        claimed.recv().expect("the first operation did not run inline on a new queue");
        let l = log.clone();
        q.run(Box::new(move || {
            l.lock().unwrap().push("queued");
            Ok(())
        }))
        .unwrap();
        queued_tx.send(()).unwrap();
        // The first operation has released its claim and not yet looked for work.
        released.recv().expect("the first operation never released its claim");
        let inline = q.run_inline_if_idle(|| log.lock().unwrap().push("inline"));
        resume_tx.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Some(()), "the first operation ran inline");
        assert_eq!(inline, None, "an inline operation overtook work queued before it");
    });
    q.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), ["queued"]);
}

/// Queues one operation on `q` and returns once its drainer, the work done, holds at its
/// release; the drainer goes on when the returned sender sends (or is dropped).
fn run_and_hold_at_release(q: &WorkQueue) -> std::sync::mpsc::Sender<()> {
    let (at_release_tx, at_release) = channel::<()>();
    let (go_tx, go) = channel::<()>();
    BEFORE_RELEASE.lock().unwrap().push((
        q.state.id(),
        Box::new(move || {
            at_release_tx.send(()).unwrap();
            // An error (the test failed and dropped its sender) lets the drainer go too.
            let _ = go.recv();
        }),
    ));
    q.run(Box::new(|| Ok(()))).unwrap();
    at_release.recv().expect("the drainer never reached its release");
    go_tx
}

/// A queue its drainer still holds is not idle, even with all its work done: an inline
/// operation run then would run beside the drainer, which gives the queue up afterwards —
/// and the next operation queued would start a second drainer beside the inline one.
#[test]
fn a_queue_its_drainer_still_holds_runs_nothing_inline() {
    let q = WorkQueue::new("held by its drainer".into()).unwrap();
    let go_tx = run_and_hold_at_release(&q);
    let mut ran = false;
    let inline = q.run_inline_if_idle(|| ran = true);
    go_tx.send(()).unwrap();
    assert_eq!(inline, None, "ran inline while the drainer still held the queue");
    assert!(!ran);
    q.synchronize().unwrap();
}

/// Work queued while the drainer is giving its queue up is seen when it looks again: the
/// drainer takes the queue back for it, runs it, and lets the queue go once it is done.
#[test]
fn work_queued_as_the_drainer_lets_go_runs_and_the_queue_is_let_go_after() {
    let q = WorkQueue::new("let go".into()).unwrap();
    let go_tx = run_and_hold_at_release(&q);
    // Queued while the drainer still holds the queue: no new drainer is scheduled for it.
    let (ran_tx, ran) = channel::<()>();
    q.run(Box::new(move || {
        let _ = ran_tx.send(());
        Ok(())
    }))
    .unwrap();
    go_tx.send(()).unwrap();
    ran.recv_timeout(std::time::Duration::from_secs(30)).expect("work queued as the drainer let go never ran");
    q.synchronize().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while q.run_inline_if_idle(|| ()).is_none() {
        assert!(std::time::Instant::now() < until, "the drainer never let the queue go");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
