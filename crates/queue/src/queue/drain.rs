//! The drainer: a pool thread running a queue's operations until none is left.

use std::sync::atomic::{fence, Ordering};

use super::ops::run;
use super::QueueCore;
use crate::pool::{linger_while, Job};
use crate::wait::{lock, set_current_queue};

impl Job for QueueCore {
    fn drain(&self) {
        drain(self);
    }
}

/// Drains `state`'s operations on the calling pool thread until none is left, then gives
/// the queue up — unless an operation arrived meanwhile and nobody else took the queue.
fn drain(state: &QueueCore) {
    set_current_queue(state.id());
    let mut inbox = lock(&state.inbox);
    loop {
        while let Ok(op) = inbox.rx.try_recv() {
            inbox.received += 1;
            run(op, state);
        }
        // A stream in use gets its next operation soon (a copy after the synchronize that
        // waited for the last one): keep the queue briefly rather than hand it back and have
        // the next enqueue go through the pool.
        let received = inbox.received;
        if linger_while(|| state.submitted.load(Ordering::SeqCst) != received) {
            continue;
        }
        #[cfg(test)]
        super::tests::before_release(state);
        state.scheduled.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // An enqueuer counts `submitted` before sending and then reads `scheduled`: either
        // it sees `false` and schedules the queue again, or this sees its count.
        if state.submitted.load(Ordering::SeqCst) == inbox.received || state.scheduled.swap(true, Ordering::SeqCst) {
            break;
        }
        // Ours again: the operation is counted and on its way (the send follows the count).
        if let Ok(op) = inbox.rx.recv() {
            inbox.received += 1;
            run(op, state);
        }
    }
    set_current_queue(0);
}
