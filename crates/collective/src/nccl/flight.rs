//! [`Flight`]: one NCCL or RCCL collective from its launch to its end on the device, and
//! the watchdog that follows every flight, as PyTorch's `ProcessGroupNCCL` does.
//!
//! A flight holds what the collective uses — its buffers and its communicator — until its
//! end event has completed, whoever dropped the arrays or the communicator meanwhile (a
//! failed one too: its waiter is told at once, and what it holds goes once the abort has
//! ended it on the device). The
//! watchdog (one thread for the process, started with the first flight) checks each flight
//! every [`PERIOD`] and a waiter checks its own as it waits: an end event completed ends
//! the flight (released); an asynchronous error of its communicator
//! (`ncclCommGetAsyncError`), a device error, or a flight older than
//! `GPUPORT_COLLECTIVE_TIMEOUT` aborts the communicator (`ncclCommAbort`, which ends its
//! work on the device) and fails the flight with a [`Error::Collective`] naming the
//! collective, the rank and the cause. The communicator's every later use is told the
//! same cause.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use gpuport_core::{Buffer, Error, Result};
use gpuport_runtime::AnyEvent;

use super::comm::NcclComm;

/// How often the watchdog looks at the flights.
const PERIOD: Duration = Duration::from_millis(10);

/// What a flight keeps alive until its end.
struct Held {
    comm: Arc<NcclComm>,
    _buffers: Vec<Buffer>,
}

enum Stage {
    /// Queued inside a group that has not ended (or launched just now, its end event not
    /// recorded yet).
    Grouped(Held),
    /// Launched on its stream at `since`.
    Launched { held: Held, since: Instant },
    /// Done, or failed. A collective the watchdog failed keeps what it holds until its
    /// end event has completed (the abort ends it on the device), or its device fails.
    Ended { result: Result<()>, held: Option<Held> },
}

/// One collective, from launch to end.
pub(crate) struct Flight {
    what: &'static str,
    engine: &'static str,
    rank: usize,
    size: usize,
    /// Recorded on the collective's stream right after it (when its group ended).
    event: AnyEvent,
    stage: Mutex<Stage>,
}

impl Flight {
    /// A collective queued on `comm`, to be ended by `event` once [`Flight::launched`] has
    /// recorded it, using `buffers`.
    pub(crate) fn new(what: &'static str, comm: &Arc<NcclComm>, event: AnyEvent, buffers: Vec<Buffer>) -> Arc<Flight> {
        let stage = Stage::Grouped(Held { comm: comm.clone(), _buffers: buffers });
        Arc::new(Flight {
            what,
            engine: comm.loaded.flavour.name(),
            rank: comm.rank,
            size: comm.size,
            event,
            stage: Mutex::new(stage),
        })
    }

    fn stage(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The end event.
    pub(crate) fn event(&self) -> &AnyEvent {
        &self.event
    }

    /// The collective is launched and its end event recorded (`Ok`) — at once, or when
    /// the group it was queued in ended — or not (the engine's error).
    pub(crate) fn launched(&self, ended: &Result<()>) {
        let mut stage = self.stage();
        let Stage::Grouped(_) = &*stage else { return };
        let Stage::Grouped(held) = std::mem::replace(&mut *stage, Stage::Ended { result: Ok(()), held: None }) else {
            return;
        };
        *stage = match ended {
            Ok(()) => Stage::Launched { held, since: Instant::now() },
            // Its end event is not recorded: it completes at once, and lets go.
            Err(e) => Stage::Ended { result: Err(e.clone()), held: Some(held) },
        };
    }

    /// `what` on this rank, for messages.
    fn describe(&self) -> String {
        format!("{} on rank {} of {} ({})", self.what, self.rank, self.size, self.engine)
    }

    /// Looks at the flight once: `Some(result)` once it has ended, `None` while it runs (or
    /// waits for its group's end).
    pub(crate) fn check(&self) -> Option<Result<()>> {
        let mut stage = self.stage();
        let (held, since) = match &mut *stage {
            Stage::Ended { result, held } => {
                // What a failed collective holds goes once the device is done with it.
                if held.is_some() && self.event.query().unwrap_or(true) {
                    *held = None;
                }
                return Some(result.clone());
            }
            Stage::Grouped(_) => return None,
            Stage::Launched { held, since } => (held, *since),
        };
        let comm = held.comm.clone();
        let fail = |cause: String| {
            comm.abort(&format!("{} failed: {cause}", self.describe()));
            Err(Error::Collective {
                engine: self.engine,
                call: "ncclCommAbort",
                code: 0,
                message: format!("{}: {cause}; the communicator was aborted", self.describe()),
            })
        };
        let (result, device_done) = match self.event.query() {
            Ok(done) => match comm.fault() {
                Some(e) => (fail(format!("the communicator met an error: {e}")), done),
                None if done => (Ok(()), true),
                None if since.elapsed() > crate::timeout::limit() => (
                    fail(format!(
                        "it did not complete within {} s ({}): a rank did not arrive, or issued another collective",
                        crate::timeout::limit().as_secs_f64(),
                        crate::timeout::TIMEOUT_ENV
                    )),
                    false,
                ),
                None => return None,
            },
            Err(e) => (fail(format!("its device failed: {e}")), true),
        };
        if let Err(e) = &result {
            log::warn!("{e}");
        }
        let Stage::Launched { held, .. } = std::mem::replace(&mut *stage, Stage::Ended { result: Ok(()), held: None })
        else {
            return Some(result);
        };
        // Done on the device: the buffers and the communicator are let go here; else once
        // the abort has ended the collective there.
        *stage = Stage::Ended { result: result.clone(), held: (!device_done).then_some(held) };
        Some(result)
    }

    /// Whether it has ended and let go of what it held.
    fn released(&self) -> bool {
        matches!(*self.stage(), Stage::Ended { held: None, .. })
    }

    /// Whether it waits for its group's end.
    pub(crate) fn is_grouped(&self) -> bool {
        matches!(*self.stage(), Stage::Grouped(_))
    }

    /// Blocks until the flight ends: its result.
    pub(crate) fn wait(&self) -> Result<()> {
        if self.is_grouped() {
            return Err(Error::invalid_argument(format!(
                "{}: it is launched when its group ends; wait for it after `group` has returned",
                self.describe()
            )));
        }
        let mut pause = Duration::from_micros(20);
        loop {
            if let Some(result) = self.check() {
                return result;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

impl crate::work::Progress for Flight {
    fn wait(&self) -> Result<()> {
        Flight::wait(self)
    }

    fn is_done(&self) -> Result<bool> {
        Ok(self.check().is_some())
    }

    fn event(&self) -> &AnyEvent {
        Flight::event(self)
    }
}

/// The flights the watchdog follows.
struct Watch {
    flights: Mutex<Vec<Arc<Flight>>>,
    more: Condvar,
}

fn watch() -> &'static Watch {
    static WATCH: OnceLock<Watch> = OnceLock::new();
    WATCH.get_or_init(|| Watch { flights: Mutex::new(Vec::new()), more: Condvar::new() })
}

/// Hands `flight` to the watchdog (started with the first flight).
pub(crate) fn follow(flight: Arc<Flight>) {
    static STARTED: OnceLock<bool> = OnceLock::new();
    let started = *STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new().name("gpuport-collective-watchdog".into()).spawn(watchdog);
        if let Err(e) = &spawned {
            log::error!(
                "no collectives watchdog (its thread did not start: {e}): a hung collective is seen by its waiter only"
            );
        }
        spawned.is_ok()
    });
    if !started {
        return;
    }
    let w = watch();
    w.flights.lock().unwrap_or_else(|p| p.into_inner()).push(flight);
    w.more.notify_one();
}

/// The watchdog's loop: every [`PERIOD`], each flight checked; the ended ones let go.
fn watchdog() {
    let w = watch();
    loop {
        let flights: Vec<Arc<Flight>> = {
            let guard = w.flights.lock().unwrap_or_else(|p| p.into_inner());
            let guard = w.more.wait_while(guard, |f| f.is_empty()).unwrap_or_else(|p| p.into_inner());
            guard.clone()
        };
        let ended: Vec<bool> = flights.iter().map(|f| f.check().is_some() && f.released()).collect();
        w.flights
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|f| !flights.iter().zip(&ended).any(|(g, &done)| done && Arc::ptr_eq(f, g)));
        drop(flights);
        std::thread::sleep(PERIOD);
    }
}
