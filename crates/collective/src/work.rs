//! [`Work`]: a queued collective, to wait for or to order another stream after.

use std::sync::Arc;

use gpuport_core::Result;
use gpuport_runtime::AnyEvent;

/// How an engine follows one of its collectives to its end.
pub(crate) trait Progress: Send + Sync {
    /// Blocks until the collective is done; the engine's error if it failed.
    fn wait(&self) -> Result<()>;
    /// Whether it is done (without waiting).
    fn is_done(&self) -> Result<bool>;
    /// The event recorded on its stream right after it.
    fn event(&self) -> &AnyEvent;
}

/// A collective queued on a stream. On MPI: done when its MPI call has completed and the
/// stream has passed it (for an array staged through pinned memory, the copy back
/// included); [`Work::wait`] tests the call itself while it flies, rather than sleeping
/// until the stream's worker has finished it. On NCCL and RCCL: done when the collective
/// has run on the device, as the watchdog follows it; [`Work::wait`] polls it too, and
/// gives the watchdog's error for a collective it aborted. Either way `wait` gives the
/// engine's error, if its call failed; [`Work::event`] is recorded right after the
/// collective, for another stream to wait on (`stream.wait(work.event())`) without
/// blocking the host.
#[must_use = "a collective's failure is reported by Work::wait"]
pub struct Work {
    what: &'static str,
    progress: Arc<dyn Progress>,
}

impl Work {
    pub(crate) fn new(what: &'static str, progress: Arc<dyn Progress>) -> Work {
        Work { what, progress }
    }

    /// Blocks until the collective (and the work queued before it on its stream) is done
    /// and its stream has passed it; the engine's error if its call failed, the
    /// watchdog's if it aborted the communicator. A collective issued inside a
    /// [`group`](crate::group) that has not ended is `InvalidArgument`: it has not started.
    pub fn wait(&self) -> Result<()> {
        self.progress.wait()
    }

    /// Whether the collective is done (without waiting). A collective the watchdog
    /// aborted is done: [`Work::wait`] gives its error.
    pub fn is_done(&self) -> Result<bool> {
        self.progress.is_done()
    }

    /// The event recorded on the collective's stream right after it (for a collective
    /// issued inside a [`group`](crate::group), when the group ends).
    pub fn event(&self) -> &AnyEvent {
        self.progress.event()
    }

    /// The collective's name (`all_reduce`).
    pub fn what(&self) -> &'static str {
        self.what
    }
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work").field("what", &self.what).finish_non_exhaustive()
    }
}
