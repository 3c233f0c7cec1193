//! [`Work`]: a queued collective, to wait for or to order another stream after.

use std::sync::Arc;

use gpuport_core::Result;
use gpuport_runtime::AnyEvent;

use crate::call::Call;

/// How long [`Work::wait`] yields to the stream's worker before it sleeps until the stream
/// has passed a completed collective.
const PASS_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// A collective queued on a stream: done when its MPI call has completed and the stream
/// has passed it (for an array staged through pinned memory, the copy back included).
/// [`Work::wait`] blocks until then — testing the call itself while it flies, rather than
/// sleeping until the stream's worker has finished it — and gives the engine's error, if
/// its call failed; [`Work::event`] is recorded right after it, for another stream to wait
/// on (`stream.wait(work.event())`).
#[must_use = "a collective's failure is reported by Work::wait"]
pub struct Work {
    what: &'static str,
    event: AnyEvent,
    call: Arc<Call>,
}

impl Work {
    pub(crate) fn new(what: &'static str, event: AnyEvent, call: Arc<Call>) -> Work {
        Work { what, event, call }
    }

    /// Blocks until the collective (and the work queued before it on its stream) is done
    /// and its stream has passed it; the engine's error if its call failed.
    pub fn wait(&self) -> Result<()> {
        if self.call.is_queued() {
            // Behind other work: the stream's own wait, which refuses a wait from the
            // stream's own work (it would never end), and after which the call is done.
            self.event.synchronize()?;
        }
        self.call.wait(&self.event)?;
        // The stream's worker still has to pass the collective: the CPU is yielded to it
        // (woken as the call completed, it may need this one) before this thread sleeps.
        let since = std::time::Instant::now();
        while !self.event.query()? {
            if since.elapsed() > PASS_SPIN {
                return self.event.synchronize();
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Whether the collective is done (without waiting).
    pub fn is_done(&self) -> Result<bool> {
        Ok(self.call.is_done() && self.event.query()?)
    }

    /// The event recorded on the collective's stream right after it.
    pub fn event(&self) -> &AnyEvent {
        &self.event
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
