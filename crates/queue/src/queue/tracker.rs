//! Waiting for a queue's work and reporting its errors after its handles are gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use gpuport_core::{Error, Result};

use super::QueueCore;
use crate::wait::{current_queue, lock};

/// The first error of a queue's work. Shared with the device's [`QueueTracker`]s, so it
/// outlives the queue: an error of work on a stream that was then dropped still reaches
/// the next device-wide synchronize, however soon after the drop the worker exited.
#[derive(Default)]
pub(super) struct Failure {
    pub(super) first: Mutex<Option<Error>>,
    /// Set when the last handle of the queue is gone: from then on the device-wide
    /// synchronize is the only reporter, and it clears what it reports.
    pub(super) orphaned: AtomicBool,
}

impl Failure {
    pub(super) fn record(&self, err: Error) {
        lock(&self.first).get_or_insert(err);
    }
}

/// Synchronizes every queue, returning the first error (all are waited for). Refused at
/// once from a host callback of one of them, which could never be waited for.
pub fn synchronize_all<'a>(queues: impl IntoIterator<Item = &'a QueueTracker> + Clone) -> Result<()> {
    if queues.clone().into_iter().any(QueueTracker::is_current) {
        return Err(Error::would_deadlock("a device-wide synchronize from a host callback of one of its streams"));
    }
    let mut first = Ok(());
    for queue in queues {
        let result = queue.synchronize();
        if first.is_ok() {
            first = result;
        }
    }
    first
}

/// Waits for a queue's work and reports its errors; see [`WorkQueue::tracker`](super::WorkQueue::tracker).
#[derive(Clone)]
pub struct QueueTracker {
    pub(super) state: Weak<QueueCore>,
    pub(super) failure: Arc<Failure>,
}

impl QueueTracker {
    /// True while the tracker still matters: the queue's worker may still run work, or an
    /// error of its work has not been reported yet.
    pub fn is_live(&self) -> bool {
        self.state.strong_count() > 0 || lock(&self.failure.first).is_some()
    }

    /// True when the calling thread is this queue's worker (a host callback of it).
    pub fn is_current(&self) -> bool {
        current_queue() == self.state.as_ptr() as usize
    }

    /// Blocks until everything submitted to the queue so far has run, then reports the
    /// first failure of its work. While a handle of the queue lives the failure stays (the
    /// stream's own `synchronize` reports and clears it: errors are sticky); once every
    /// handle is gone this is the only reporter, and the failure is cleared here.
    pub fn synchronize(&self) -> Result<()> {
        if let Some(state) = self.state.upgrade() {
            state.wait_until(state.submitted.load(Ordering::SeqCst), "a device-wide synchronize")?;
        }
        let mut first = lock(&self.failure.first);
        let failure = if self.failure.orphaned.load(Ordering::SeqCst) { first.take() } else { first.clone() };
        failure.map_or(Ok(()), Err)
    }
}
