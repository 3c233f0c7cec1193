//! A stream and the events recorded on it never disagree about what has run: once a
//! stream's synchronize returns or its query says done, every event recorded on it is
//! complete; once an event is complete, the stream's work up to it is counted done.
//!
//! The window these rounds look for is a few instructions wide (a marker counted, its
//! event not yet told), so each test runs many rounds, waiting in the ways a caller can.

use std::sync::Arc;

use gpuport_core::{DeviceId, EventFlags};
use gpuport_queue::{EventState, WorkQueue};

/// Under Miri, which is thousands of times slower but explores weak-memory outcomes and
/// thread interleavings on its own, a few dozen.
const ROUNDS: usize = if cfg!(miri) { 40 } else { 100_000 };

/// Each round queues a host callback and an event record on a fresh queue's stream, then
/// hands both, with the round's number, to `wait_and_check`.
fn each_round(name: &str, mut wait_and_check: impl FnMut(&WorkQueue, &Arc<EventState>, usize)) {
    let q = WorkQueue::new(name.into()).unwrap();
    let ev = EventState::new(DeviceId::HOST, EventFlags::DISABLE_TIMING);
    for round in 0..ROUNDS {
        q.callback(Box::new(|| {})).unwrap();
        q.record(&ev).unwrap();
        wait_and_check(&q, &ev, round);
    }
}

#[test]
fn after_a_stream_synchronize_its_events_are_complete() {
    each_round("synchronize, then the event", |q, ev, round| {
        q.synchronize().unwrap();
        assert!(ev.is_complete(), "round {round}: the stream synchronized, its event incomplete");
    });
}

#[test]
fn once_a_stream_says_done_its_events_are_complete() {
    each_round("query, then the event", |q, ev, round| {
        while !q.query() {
            std::hint::spin_loop();
        }
        assert!(ev.is_complete(), "round {round}: the stream says done, its event incomplete");
    });
}

#[test]
fn once_an_event_is_complete_the_stream_has_run_up_to_it() {
    each_round("the event, then query", |q, ev, round| {
        if round % 2 == 0 {
            ev.synchronize().unwrap();
        } else {
            while !ev.is_complete() {
                std::hint::spin_loop();
            }
        }
        assert!(q.query(), "round {round}: the event is complete, the stream says pending");
    });
}
