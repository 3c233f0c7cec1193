//! [`Work`]: a queued collective, to wait for or to order another stream after.

use std::sync::{Arc, Mutex};

use gpuport_core::Result;
use gpuport_runtime::AnyEvent;

/// What the engine's call said, once it has run.
pub(crate) type Outcome = Arc<Mutex<Option<Result<()>>>>;

/// A collective queued on a stream: done when the stream has passed it. [`Work::wait`]
/// blocks until then and gives the engine's error, if its call failed; [`Work::event`] is
/// recorded right after it, for another stream to wait on (`stream.wait(work.event())`).
#[must_use = "a collective's failure is reported by Work::wait"]
pub struct Work {
    what: &'static str,
    event: AnyEvent,
    outcome: Outcome,
}

impl Work {
    pub(crate) fn new(what: &'static str, event: AnyEvent, outcome: Outcome) -> Work {
        Work { what, event, outcome }
    }

    /// Blocks until the collective (and the work queued before it on its stream) is done;
    /// the engine's error if its call failed.
    pub fn wait(&self) -> Result<()> {
        self.event.synchronize()?;
        match &*self.outcome.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Err(e)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Whether the collective is done (without waiting).
    pub fn is_done(&self) -> Result<bool> {
        self.event.query()
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
