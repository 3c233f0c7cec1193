//! A stream's progress as counters in memory: what lets a caller on the far side of a
//! boundary (a plugin's C table) tell whether the stream's work is done by reading three
//! words instead of making a call.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The counters a stream keeps, published by [`Stream::progress`](crate::Stream::progress).
///
/// The stream changes them only with sequentially consistent atomic operations, in this
/// protocol (the one `gpuport_plugin.h` gives a C plugin):
/// - `submitted` counts each operation before the call that queues it returns;
/// - `completed` counts each once it has finished and its effects are visible to the host
///   (never more than `submitted`);
/// - `publishing` is raised before counting an operation whose completion has more to
///   publish that a reader of a done stream must see (an event it records completing),
///   and lowered after publishing it; it stays 0 for a stream with no such operation.
///
/// [`StreamProgress::read`] is the reader's side.
#[derive(Clone, Copy, Debug)]
pub struct StreamProgress<'a> {
    /// Operations queued so far.
    pub submitted: &'a AtomicU64,
    /// Operations completed so far.
    pub completed: &'a AtomicU64,
    /// Nonzero while a counted operation's completion is still being published.
    pub publishing: &'a AtomicU32,
}

/// What the counters say of a stream's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressReading {
    /// Everything queued so far has completed and is published.
    Done,
    /// Some of it has not completed.
    Pending,
    /// Everything has completed, but a completion is still being published: ask the
    /// stream itself (its query waits for the publication).
    Publishing,
}

impl StreamProgress<'_> {
    /// Reads the counters in the protocol's order: `submitted`, then `completed`, then
    /// `publishing`. A count that includes an operation being published is followed (in
    /// the single order of sequentially consistent operations) by its raise, so the last
    /// load sees either the raise or the lowering made after the publication, and with it
    /// the publication itself.
    #[inline]
    pub fn read(&self) -> ProgressReading {
        read_counters(self.submitted, self.completed, Some(self.publishing))
    }
}

/// [`StreamProgress::read`] over counters held apart (a plugin's `publishing` may be
/// absent).
#[inline]
pub fn read_counters(submitted: &AtomicU64, completed: &AtomicU64, publishing: Option<&AtomicU32>) -> ProgressReading {
    let submitted = submitted.load(Ordering::SeqCst);
    if completed.load(Ordering::SeqCst) < submitted {
        return ProgressReading::Pending;
    }
    match publishing {
        Some(flag) if flag.load(Ordering::SeqCst) != 0 => ProgressReading::Publishing,
        _ => ProgressReading::Done,
    }
}
