//! Events of a software device: real completion markers with generations and timestamps,
//! and the handle type ([`QueueEvent`]) with raw handles and ownership.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use gpuport_core::{DeviceId, Error, EventFlags, Ownership, Result};

use crate::handles::{HandleRegistry, OwnerGuard};
use crate::wait::{current_queue, spin_until};

#[derive(Default)]
struct Marks {
    /// Generation of the latest record (0 = never recorded).
    recorded: u64,
    /// Highest generation whose marker has run.
    completed: u64,
    /// When the marker of `completed` ran.
    at: Option<Instant>,
    /// The queue the latest record was queued on (see `wait::current_queue`).
    queue: usize,
    /// Threads blocked in `wait_for`: a completion notifies only when there are some.
    waiters: usize,
}

/// The shared state of one event: which record is the latest and whether its marker has
/// run. Records are numbered; a wait captures the number current when it is queued, so
/// re-recording later never changes what an earlier wait waits for.
pub struct EventState {
    device: DeviceId,
    flags: EventFlags,
    marks: Mutex<Marks>,
    /// `marks.completed`, readable without the lock (for the spin before sleeping).
    completed: AtomicU64,
    cv: Condvar,
    destroyed: AtomicBool,
}

impl EventState {
    /// A never-recorded event of `device`.
    pub fn new(device: DeviceId, flags: EventFlags) -> Arc<Self> {
        Arc::new(EventState {
            device,
            flags,
            marks: Mutex::new(Marks::default()),
            completed: AtomicU64::new(0),
            cv: Condvar::new(),
            destroyed: AtomicBool::new(false),
        })
    }

    fn marks(&self) -> MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a new record on queue `queue` (its identity, for deadlock checks) and
    /// returns its generation.
    pub fn begin_record(&self, queue: usize) -> Result<u64> {
        self.check_live("record")?;
        let mut m = self.marks();
        m.recorded += 1;
        m.queue = queue;
        Ok(m.recorded)
    }

    /// `InvalidHandle` once the event was destroyed (its owner is gone).
    pub fn check_live(&self, operation: &str) -> Result<()> {
        if self.is_destroyed() {
            return Err(Error::invalid_handle(format!("{operation} of a destroyed event")));
        }
        Ok(())
    }

    /// Blocks until the latest record has completed. Refused from a host callback of the
    /// stream that has still to reach that record: it would wait for itself.
    pub fn synchronize(&self) -> Result<()> {
        let (generation, queue) = {
            let m = self.marks();
            if m.completed >= m.recorded {
                return Ok(());
            }
            (m.recorded, m.queue)
        };
        if queue == current_queue() {
            return Err(Error::would_deadlock("synchronizing an event recorded behind the calling host callback"));
        }
        self.wait_for(generation);
        Ok(())
    }

    /// The generation of the latest record (0 when never recorded).
    pub fn recorded_generation(&self) -> u64 {
        self.marks().recorded
    }

    /// Called by the queue when the marker of `generation` is reached.
    pub fn complete(&self, generation: u64) {
        let mut m = self.marks();
        if generation > m.completed {
            m.completed = generation;
            self.completed.store(generation, Ordering::Release);
            if !self.flags.contains(EventFlags::DISABLE_TIMING) {
                m.at = Some(Instant::now());
            }
        }
        let waiters = m.waiters;
        drop(m);
        if waiters > 0 {
            self.cv.notify_all();
        }
    }

    /// Blocks until the marker of `generation` has run.
    pub fn wait_for(&self, generation: u64) {
        if spin_until(|| self.completed.load(Ordering::Acquire) >= generation) {
            return;
        }
        let mut m = self.marks();
        if m.completed >= generation {
            return;
        }
        m.waiters += 1;
        while m.completed < generation {
            m = self.cv.wait(m).unwrap_or_else(|p| p.into_inner());
        }
        m.waiters -= 1;
    }

    /// True when the latest record has completed.
    pub fn is_complete(&self) -> bool {
        let m = self.marks();
        m.completed >= m.recorded
    }

    /// The completion time of the latest record, when it has completed and times.
    fn completed_at(&self) -> Result<Instant> {
        if self.flags.contains(EventFlags::DISABLE_TIMING) {
            return Err(Error::invalid_argument("elapsed time of an event created with DISABLE_TIMING"));
        }
        let m = self.marks();
        if m.recorded == 0 {
            return Err(Error::invalid_argument("elapsed time of an event that was never recorded"));
        }
        if m.completed < m.recorded {
            return Err(Error::NotReady { what: "the event's recorded work has not completed".into() });
        }
        m.at.ok_or_else(|| Error::NotReady { what: "the event has no timestamp".into() })
    }

    /// Marks the event destroyed (its owner is gone).
    pub fn destroy(&self) {
        self.destroyed.store(true, Ordering::SeqCst);
    }

    /// True once destroyed.
    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::SeqCst)
    }

    /// Creation flags.
    pub fn flags(&self) -> EventFlags {
        self.flags
    }
}

static EVENTS: HandleRegistry<EventState> = HandleRegistry::new();

/// An event handle of a software device: shared state, a process-wide raw handle, and
/// ownership. A backend's `Event` implementation wraps it and forwards.
#[derive(Clone)]
pub struct QueueEvent {
    state: Arc<EventState>,
    raw: usize,
    owner: Option<Arc<OwnerGuard<EventState>>>,
}

impl QueueEvent {
    /// A new owned event of `device`.
    pub fn create(device: DeviceId, flags: EventFlags) -> Self {
        let state = EventState::new(device, flags);
        let raw = EVENTS.insert(&state);
        QueueEvent {
            owner: Some(Arc::new(OwnerGuard::new(&EVENTS, raw, state.clone(), EventState::destroy))),
            state,
            raw,
        }
    }

    /// A borrowed handle to the live event with raw handle `raw`, which must belong to
    /// `device`; a stale, unknown or foreign handle is `InvalidHandle`.
    pub fn from_raw(device: DeviceId, raw: usize) -> Result<Self> {
        let state = EVENTS
            .get(raw)
            .filter(|s| !s.is_destroyed() && s.device == device)
            .ok_or_else(|| Error::invalid_handle(format!("{raw:#x} is not a live event of {device}")))?;
        Ok(QueueEvent { state, raw, owner: None })
    }

    /// The shared state.
    pub fn state(&self) -> &Arc<EventState> {
        &self.state
    }
    /// The device it belongs to.
    pub fn device_id(&self) -> DeviceId {
        self.state.device
    }
    /// Whether this handle owns the event.
    pub fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.owner.is_some())
    }
    /// The raw handle.
    pub fn raw_handle(&self) -> usize {
        self.raw
    }
    /// Creation flags.
    pub fn flags(&self) -> EventFlags {
        self.state.flags
    }
    /// True when the latest record has completed; a destroyed event is `InvalidHandle`.
    pub fn query(&self) -> Result<bool> {
        self.state.check_live("query")?;
        Ok(self.state.is_complete())
    }
    /// Blocks until the latest record has completed (see [`EventState::synchronize`]).
    pub fn synchronize(&self) -> Result<()> {
        self.state.check_live("synchronize")?;
        self.state.synchronize()
    }
    /// Milliseconds between this event's and `end`'s completions.
    pub fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.state.check_live("elapsed time")?;
        end.state.check_live("elapsed time")?;
        let (a, b) = (self.state.completed_at()?, end.state.completed_at()?);
        let ms = if b >= a { (b - a).as_secs_f64() * 1e3 } else { -((a - b).as_secs_f64() * 1e3) };
        Ok(ms as f32)
    }
}
