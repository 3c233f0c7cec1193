//! The one release path for drops that may call a driver or foreign code.
//!
//! CUDA and HIP forbid API calls inside host callbacks, and a stream worker thread must not
//! run a foreign owner's release (a Python deleter needs the GIL, which the thread waiting
//! in `synchronize()` may hold). Such threads are marked *restricted*: a stream worker for
//! its whole life ([`mark_restricted_thread`]), a driver callback thread while gpuport's
//! trampoline runs ([`restricted`]). A handle whose drop may call a driver or foreign code
//! checks [`on_restricted_thread`] and, when it is set, hands the drop to one process-wide
//! release thread ([`defer`], or the [`Deferred`] wrapper) instead of running it there.
//! Everywhere else drops run in place, so the common path costs one thread-local read.
//!
//! [`flush`] waits until every drop deferred before the call has run (tests use it to
//! observe a release; never call it while holding a lock a deferred drop may need).

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

thread_local! {
    /// Depth of restricted scopes on this thread (a worker is restricted for good).
    static RESTRICTED: Cell<u32> = const { Cell::new(0) };
    /// True on the release thread itself.
    static IS_RELEASE_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// A deferred drop.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// True when this thread must not run drops that may call a driver or foreign code.
#[inline]
pub fn on_restricted_thread() -> bool {
    RESTRICTED.with(|r| r.get() > 0)
}

/// Marks the calling thread restricted for the rest of its life: for stream worker threads.
#[inline]
pub fn mark_restricted_thread() {
    RESTRICTED.with(|r| r.set(r.get().saturating_add(1)));
}

/// Runs `f` with the calling thread marked restricted: for driver callback trampolines.
/// The mark is removed afterwards, also when `f` unwinds. Inlined: every host callback of
/// a driver passes here, and `f` is then called in place rather than moved into a frame.
#[inline]
pub fn restricted<R>(f: impl FnOnce() -> R) -> R {
    struct Unmark;
    impl Drop for Unmark {
        #[inline]
        fn drop(&mut self) {
            RESTRICTED.with(|r| r.set(r.get().wrapping_sub(1)));
        }
    }
    // The scope's mark and unmark are exact inverses, so the count is back to what it was
    // however the scope ends; nothing to saturate (scopes nest as deep as calls do, and a
    // thread is marked for good at most once).
    RESTRICTED.with(|r| r.set(r.get().wrapping_add(1)));
    let _unmark = Unmark;
    f()
}

fn release_thread() -> Option<&'static Sender<Job>> {
    static SENDER: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    SENDER
        .get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new().name("gpuport release".into()).spawn(move || {
                IS_RELEASE_THREAD.with(|t| t.set(true));
                for job in rx {
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        log::error!("a deferred release panicked; the release thread goes on");
                    }
                }
            });
            match spawned {
                Ok(_) => Some(tx),
                Err(e) => {
                    log::error!("cannot start the release thread ({e}); releases run where they are dropped");
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `job` on the release thread (in place when that thread cannot be started, which
/// is logged once). Jobs run in the order they were deferred.
pub fn defer(job: Job) {
    let Some(sender) = release_thread() else { return job() };
    if let Err(unsent) = sender.send(job) {
        (unsent.0)();
    }
}

/// Drops `value` here, or on the release thread when this thread is restricted.
pub fn drop_or_defer<T: Send + 'static>(value: T) {
    if on_restricted_thread() {
        defer(Box::new(move || drop(value)));
    } else {
        drop(value);
    }
}

/// Blocks until every drop deferred before the call has run. Returns at once on the
/// release thread itself and on a restricted thread (waiting there could deadlock).
pub fn flush() {
    if IS_RELEASE_THREAD.with(Cell::get) || on_restricted_thread() {
        return;
    }
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let signal = done.clone();
    defer(Box::new(move || {
        *signal.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        signal.1.notify_all();
    }));
    let mut finished = done.0.lock().unwrap_or_else(|p| p.into_inner());
    while !*finished {
        finished = done.1.wait(finished).unwrap_or_else(|p| p.into_inner());
    }
}

/// A value whose drop never runs on a restricted thread: dropped there, it is moved to the
/// release thread and dropped there. Wrap the shared inner state of a handle whose `Drop`
/// calls the driver (a stream, an event, a module, a retained context).
pub struct Deferred<T: Send + 'static>(ManuallyDrop<T>);

impl<T: Send + 'static> Deferred<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Self {
        Deferred(ManuallyDrop::new(value))
    }
}

impl<T: Send + 'static> Deref for Deferred<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + 'static> Drop for Deferred<T> {
    fn drop(&mut self) {
        // SAFETY: the value is taken exactly once, here, and never used again.
        let value = unsafe { ManuallyDrop::take(&mut self.0) };
        drop_or_defer(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread::ThreadId;

    struct Probe(Arc<Mutex<Option<ThreadId>>>);
    impl Drop for Probe {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(std::thread::current().id());
        }
    }

    #[test]
    fn drops_run_in_place_unless_restricted() {
        let here = std::thread::current().id();
        let seen = Arc::new(Mutex::new(None));
        drop(Deferred::new(Probe(seen.clone())));
        assert_eq!(*seen.lock().unwrap(), Some(here), "an ordinary thread drops in place");

        let seen = Arc::new(Mutex::new(None));
        let value = Deferred::new(Probe(seen.clone()));
        restricted(|| drop(value));
        assert!(!on_restricted_thread(), "the mark ends with the scope");
        flush();
        let dropped_on = seen.lock().unwrap().expect("dropped after flush");
        assert_ne!(dropped_on, here, "a restricted thread hands the drop over");
    }

    #[test]
    fn a_blocking_release_does_not_block_the_restricted_thread() {
        // The release blocks until the test says so; the restricted thread must go on.
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let released = Arc::new(AtomicBool::new(false));
        let (g, r) = (gate.clone(), released.clone());
        let worker = std::thread::spawn(move || {
            mark_restricted_thread();
            drop_or_defer(Guard(g, r));
        });
        worker.join().unwrap();
        assert!(!released.load(Ordering::SeqCst));
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        flush();
        assert!(released.load(Ordering::SeqCst));

        struct Guard(Arc<(Mutex<bool>, Condvar)>, Arc<AtomicBool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                let mut open = self.0 .0.lock().unwrap();
                while !*open {
                    open = self.0 .1.wait(open).unwrap();
                }
                self.1.store(true, Ordering::SeqCst);
            }
        }
    }
}
