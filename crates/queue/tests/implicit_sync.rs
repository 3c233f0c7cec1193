//! The legacy default stream follows every live blocking stream of its device, however many
//! blocking streams came and went before: the device's list forgets the gone ones as it
//! grows (at 64 and on each doubling), never a live one.

use std::sync::mpsc::channel;
use std::sync::Arc;

use gpuport_core::Error;
use gpuport_queue::{ImplicitRole, ImplicitSync, WorkQueue};

#[test]
fn the_legacy_queue_follows_a_live_blocking_queue_after_many_came_and_went() {
    let sync = Arc::new(ImplicitSync::default());
    let blocking = || WorkQueue::with_role("blocking".into(), ImplicitRole::Blocking(sync.clone())).unwrap();
    let held = blocking();
    let (open, gate) = channel::<()>();
    held.run(Box::new(move || gate.recv().map_err(|_| Error::invalid_argument("the gate was dropped")))).unwrap();
    // Enough blocking queues made and dropped that the list is pruned several times.
    for _ in 0..200 {
        drop(blocking());
    }
    let legacy = WorkQueue::with_role("legacy".into(), ImplicitRole::Legacy(sync.clone())).unwrap();
    let mut ran = false;
    // Deterministic: the legacy queue declines to run an operation at once while a blocking
    // queue it follows has work pending (with no such predecessor it would run it inline).
    let inline = legacy.run_inline_if_idle(|| ran = true);
    open.send(()).unwrap();
    assert!(inline.is_none() && !ran, "the legacy queue no longer follows a live blocking queue with work pending");
    held.synchronize().unwrap();
    legacy.synchronize().unwrap();
}
