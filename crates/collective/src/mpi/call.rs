//! [`Call`]: one collective's MPI call as its stream and its waiter share it — queued, in
//! flight, or done — so either can drive it to completion.
//!
//! MPI progresses a nonblocking call only while some thread tests it. The stream's worker
//! does, so a collective completes with nobody waiting. A caller blocked in
//! [`Work::wait`](crate::Work::wait) tests it itself instead of sleeping until the worker
//! is done and wakes it: on a machine with as many busy threads as cores that hand-back
//! costs more than a collective of a few MiB. While a waiter tests, the worker steps back
//! (it sleeps until the call is done), so the two never compete for a core; the request is
//! tested by one thread at a time, as MPI requires.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use gpuport_core::{Error, Result};
use gpuport_runtime::AnyEvent;

use super::{InFlight, Mpi, Pace};

/// Where the call is.
enum Stage {
    /// Queued behind earlier work on its stream; MPI has not seen it.
    Queued,
    /// Started: its request is live.
    Flying(InFlight),
    /// Complete, or failed.
    Done(Result<()>),
}

/// One collective's call, shared by its stream's worker and its [`Work`](crate::Work).
pub(crate) struct Call {
    mpi: Arc<Mpi>,
    /// For the watchdog's message: the collective and the rank.
    what: &'static str,
    rank: usize,
    size: usize,
    stage: Mutex<Stage>,
    /// Signalled when the stage moves on, and when a waiter stops testing.
    moved: Condvar,
    /// A waiter is testing the call: the worker leaves it to it.
    helped: AtomicBool,
    /// Threads asleep on `moved` (counted under the `stage` lock): a change wakes them
    /// only when there are some, sparing a system call per change otherwise.
    sleepers: AtomicUsize,
}

impl Call {
    /// A call not started yet.
    pub(crate) fn queued(mpi: Arc<Mpi>, what: &'static str, rank: usize, size: usize) -> Arc<Call> {
        Arc::new(Call {
            mpi,
            what,
            rank,
            size,
            stage: Mutex::new(Stage::Queued),
            moved: Condvar::new(),
            helped: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
        })
    }

    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `what` on this rank, for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} on rank {} of {}", self.what, self.rank, self.size)
    }

    /// The call is in flight (or could not start: `started` is the error).
    pub(crate) fn started(&self, started: Result<InFlight>) {
        let stage = match started {
            Ok(flight) => Stage::Flying(flight),
            Err(e) => Stage::Done(Err(e)),
        };
        self.set(stage);
    }

    fn set(&self, stage: Stage) {
        if let Stage::Done(Err(e)) = &stage {
            log::warn!("{}: {e}", self.describe());
        }
        *self.stage() = stage;
        self.wake();
    }

    /// Wakes the threads asleep on `moved`, if any.
    fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.moved.notify_all();
        }
    }

    /// Sleeps on `moved` (holding `stage`) while `asleep` says so, for up to `limit`.
    fn sleep<'a>(
        &self,
        stage: MutexGuard<'a, Stage>,
        limit: Duration,
        asleep: impl FnMut(&mut Stage) -> bool,
    ) -> (MutexGuard<'a, Stage>, bool) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let (stage, waited) = self.moved.wait_timeout_while(stage, limit, asleep).unwrap_or_else(|p| p.into_inner());
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        (stage, waited.timed_out())
    }

    /// Tests a call in flight once: `Some(result)` once it is done (also when it was
    /// already), `None` while it flies or is not started.
    fn step(&self) -> Option<Result<()>> {
        let mut stage = self.stage();
        let polled = match &mut *stage {
            Stage::Queued => return None,
            Stage::Done(result) => return Some(result.clone()),
            Stage::Flying(flight) => self.mpi.poll(flight, || self.describe()),
        };
        let done = match polled {
            Ok(false) => return None,
            Ok(true) => Ok(()),
            Err(e) => Err(e),
        };
        drop(stage);
        self.set(Stage::Done(done.clone()));
        Some(done)
    }

    /// Whether the call has not started yet (its stream has not reached it).
    pub(crate) fn is_queued(&self) -> bool {
        matches!(*self.stage(), Stage::Queued)
    }

    /// Whether the call is done (without testing it).
    pub(crate) fn is_done(&self) -> bool {
        matches!(*self.stage(), Stage::Done(_))
    }

    /// The stream worker's part: drives the started call to completion, stepping back
    /// while a waiter tests it.
    pub(crate) fn drive(&self) {
        let mut pace = Pace::new(&self.mpi);
        loop {
            if self.helped.load(Ordering::SeqCst) {
                let stage = self.stage();
                // Woken when the waiter is done with it (or gives up); a millisecond at most,
                // in case a waiter left without a word.
                let (stage, _) = self.sleep(stage, Duration::from_millis(1), |s| {
                    !matches!(s, Stage::Done(_)) && self.helped.load(Ordering::SeqCst)
                });
                if matches!(*stage, Stage::Done(_)) {
                    return;
                }
                continue;
            }
            if self.step().is_some() {
                return;
            }
            pace.pause();
        }
    }

    /// The call's end: complete, or failed.
    pub(crate) fn finished(&self, result: Result<()>) {
        self.set(Stage::Done(result));
    }

    /// The waiter's part: waits until the call is started (`passed`, recorded on the stream
    /// after it, tells a call the stream skipped), then tests it until it is done; its
    /// result.
    pub(crate) fn wait(&self, passed: &AnyEvent) -> Result<()> {
        loop {
            let stage = self.stage();
            let (stage, timed_out) = self.sleep(stage, Duration::from_millis(10), |s| matches!(s, Stage::Queued));
            match &*stage {
                Stage::Done(result) => return result.clone(),
                Stage::Flying(_) => break,
                Stage::Queued if timed_out && passed.query()? => {
                    return Err(Error::invalid_argument(format!(
                        "{}: its stream went past it without running it",
                        self.describe()
                    )))
                }
                Stage::Queued => {}
            }
        }
        self.helped.store(true, Ordering::SeqCst);
        let mut pace = Pace::new(&self.mpi);
        let result = loop {
            if let Some(result) = self.step() {
                break result;
            }
            pace.pause();
        };
        self.helped.store(false, Ordering::SeqCst);
        drop(self.stage()); // a worker between its check of `helped` and its sleep has slept
        self.wake();
        result
    }
}

/// How long a waiter yields to the stream's worker before it sleeps until the stream has
/// passed a completed collective.
const PASS_SPIN: Duration = Duration::from_millis(1);

/// An MPI collective as its [`Work`](crate::Work) follows it: its call, and the event
/// recorded on its stream after it.
pub(crate) struct Followed {
    pub(crate) event: AnyEvent,
    pub(crate) call: Arc<Call>,
}

impl crate::work::Progress for Followed {
    fn wait(&self) -> Result<()> {
        let (event, call) = (&self.event, &self.call);
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

    fn is_done(&self) -> Result<bool> {
        Ok(self.call.is_done() && self.event.query()?)
    }

    fn event(&self) -> &AnyEvent {
        &self.event
    }
}
