//! What the kit's waiters share: locks that survive a panic elsewhere, the short spin
//! before sleeping, a one-shot completion signal, and which queue the calling thread
//! drains — a wait for one's own queue (from a host callback) would never return, so the
//! waits check it and refuse.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave their data inconsistent (plain
    // counters and flags), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The number of CPUs this process may use, asked once (available_parallelism reads
/// cgroup files: tens of microseconds).
pub(crate) fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Spins for a short while until `ready()`; true if it became so. Waking a sleeping thread
/// costs tens of microseconds on virtual machines — more than most queued operations — so
/// a waiter polls briefly before it sleeps. Never on a thread confined to one CPU, where
/// the awaited thread may need that CPU.
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    const SPIN: Duration = Duration::from_micros(50);
    const QUICK_POLLS: usize = 128;
    if ready() {
        return true;
    }
    if !crate::affinity::thread_may_spin() {
        return false;
    }
    // Most hand-offs land within a microsecond: poll that long before counting as a
    // spinner, since the count is a line every waiting thread writes (two writes per wait
    // would move it between CPUs on every round trip).
    if (0..QUICK_POLLS).any(|_| {
        std::hint::spin_loop();
        ready()
    }) {
        return true;
    }
    // No more spinners than CPUs: beyond that, spinning only takes CPU time from the
    // threads doing the work being waited for.
    static SPINNERS: AtomicUsize = AtomicUsize::new(0);
    if SPINNERS.fetch_add(1, Ordering::SeqCst) >= cpus() {
        SPINNERS.fetch_sub(1, Ordering::SeqCst);
        return false;
    }
    let start = Instant::now();
    let ready = loop {
        if (0..64).any(|_| {
            std::hint::spin_loop();
            ready()
        }) {
            break true;
        }
        if start.elapsed() > SPIN {
            break false;
        }
    };
    SPINNERS.fetch_sub(1, Ordering::SeqCst);
    ready
}

/// A one-shot completion flag for callers that block until their own operation has run.
#[derive(Default)]
pub(crate) struct Signal {
    done: Mutex<bool>,
    /// `done`, readable without the lock (for the spin before sleeping).
    flag: AtomicBool,
    cv: Condvar,
}

impl Signal {
    pub(crate) fn set(&self) {
        let mut done = lock(&self.done);
        *done = true;
        self.flag.store(true, Ordering::Release);
        drop(done);
        self.cv.notify_all();
    }
    pub(crate) fn wait(&self) {
        if spin_until(|| self.flag.load(Ordering::Acquire)) {
            return;
        }
        let mut done = lock(&self.done);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }
}

thread_local! {
    /// The queue whose worker this thread is (its `QueueCore`'s address), 0 elsewhere.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

/// The identity of the queue whose worker runs the calling thread (0 on other threads).
pub(crate) fn current_queue() -> usize {
    WORKER_OF.with(Cell::get)
}

/// Marks the calling thread as the drainer of queue `id` (0: of none).
pub(crate) fn set_current_queue(id: usize) {
    WORKER_OF.with(|w| w.set(id));
}
