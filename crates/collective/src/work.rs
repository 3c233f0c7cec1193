//! [`Work`]: a queued collective, to wait for or to order another stream after.

use std::sync::Arc;

use gpuport_core::Result;
use gpuport_runtime::AnyEvent;

use crate::call::Call;
use crate::nccl::flight::Flight;

/// How long [`Work::wait`] yields to the stream's worker before it sleeps until the stream
/// has passed a completed collective.
const PASS_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

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
    progress: Progress,
}

/// How the collective is followed to its end.
enum Progress {
    /// An MPI call, driven by the stream's worker and by a waiter; `event` is recorded on
    /// the stream after it.
    Mpi { event: AnyEvent, call: Arc<Call> },
    /// Work on the device, followed by the watchdog.
    Device(Arc<Flight>),
}

impl Work {
    pub(crate) fn new(what: &'static str, event: AnyEvent, call: Arc<Call>) -> Work {
        Work { what, progress: Progress::Mpi { event, call } }
    }

    pub(crate) fn in_flight(what: &'static str, flight: Arc<Flight>) -> Work {
        Work { what, progress: Progress::Device(flight) }
    }

    /// Blocks until the collective (and the work queued before it on its stream) is done
    /// and its stream has passed it; the engine's error if its call failed, the
    /// watchdog's if it aborted the communicator. A collective issued inside a
    /// [`group`](crate::group) that has not ended is `InvalidArgument`: it has not started.
    pub fn wait(&self) -> Result<()> {
        let (event, call) = match &self.progress {
            Progress::Mpi { event, call } => (event, call),
            Progress::Device(flight) => return flight.wait(),
        };
        if call.is_queued() {
            // Behind other work: the stream's own wait, which refuses a wait from the
            // stream's own work (it would never end), and after which the call is done.
            event.synchronize()?;
        }
        call.wait(event)?;
        // The stream's worker still has to pass the collective: the CPU is yielded to it
        // (woken as the call completed, it may need this one) before this thread sleeps.
        let since = std::time::Instant::now();
        while !event.query()? {
            if since.elapsed() > PASS_SPIN {
                return event.synchronize();
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Whether the collective is done (without waiting).
    /// Whether the collective is done (without waiting). A collective the watchdog
    /// aborted is done: [`Work::wait`] gives its error.
    pub fn is_done(&self) -> Result<bool> {
        match &self.progress {
            Progress::Mpi { event, call } => Ok(call.is_done() && event.query()?),
            Progress::Device(flight) => Ok(flight.check().is_some()),
        }
    }

    /// The event recorded on the collective's stream right after it (for a collective
    /// issued inside a [`group`](crate::group), when the group ends).
    pub fn event(&self) -> &AnyEvent {
        match &self.progress {
            Progress::Mpi { event, .. } => event,
            Progress::Device(flight) => flight.event(),
        }
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
