//! The elastic pool of threads that drain software queues (see [`crate::queue`]).
//!
//! A queue with work is a job (anything that can [`Job::drain`]); a job is taken by an idle thread, or — when every thread is
//! busy (draining, blocked in a wait or in a host callback) — by a new one. So there are
//! never fewer threads than queues with work: the one-thread-per-stream guarantee that no
//! stream waits for another's progress to start, while a created stream costs no thread.
//! Idle threads wait for jobs and exit after a while without one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::wait::{lock, spin_until};

/// Work the pool runs: a queue with work, drained until it gives itself up.
pub(crate) trait Job: Send + Sync {
    /// Runs the job's work on the calling pool thread until none is left.
    fn drain(&self);
}

/// How long an idle thread waits for a job before exiting.
const IDLE_KEEP: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Jobs {
    queue: VecDeque<Arc<dyn Job>>,
    /// Threads waiting for a job (polling or asleep).
    idle: usize,
    /// Of those, the ones asleep on the condition variable (only they need a notify).
    sleeping: usize,
    /// Threads started that have not yet looked for a job.
    starting: usize,
}

#[derive(Default)]
struct Pool {
    jobs: Mutex<Jobs>,
    /// `jobs.queue.len()`, readable without the lock: idle threads poll it briefly before
    /// they sleep, so a job that comes soon after needs no wake-up.
    pending: AtomicUsize,
    /// Drainers polling their own emptied queue for a moment (see [`linger_while`]):
    /// available to a new job, which they take as soon as they see it.
    lingering: AtomicUsize,
    cv: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// Hands a queue with work to the pool (the caller just set its scheduled flag).
pub(crate) fn submit(job: Arc<dyn Job>) {
    let pool = pool();
    let mut jobs = lock(&pool.jobs);
    jobs.queue.push_back(job);
    pool.pending.store(jobs.queue.len(), Ordering::SeqCst);
    if jobs.queue.len() <= jobs.idle + jobs.starting + pool.lingering.load(Ordering::SeqCst) {
        // A polling thread takes the job unprompted; only a sleeping one needs waking (a
        // notify is a system call even when nobody waits).
        let wake = jobs.sleeping > 0;
        drop(jobs);
        if wake {
            pool.cv.notify_one();
        }
        return;
    }
    start_thread(pool, jobs);
}

/// Starts a thread for the queued jobs (the lock held is released first).
fn start_thread(pool: &Pool, mut jobs: std::sync::MutexGuard<'_, Jobs>) {
    jobs.starting += 1;
    drop(jobs);
    let started = std::thread::Builder::new().name("gpuport worker".into()).spawn(worker);
    if started.is_err() {
        // No thread for now: the job stays queued for the next thread that frees up (or
        // starts with a later job); its queue's work waits rather than being lost.
        lock(&pool.jobs).starting -= 1;
    }
}

/// Called by a drainer whose queue just ran empty: polls briefly for more of its own work
/// (`own_work()`), counted as available to the pool meanwhile, and gives up as soon as a
/// job is waiting. Returns whether its own work came. A drainer that keeps its queue
/// while a job waits makes sure a thread is there for the job: no job is ever left
/// counting on a drainer that went back to its own queue.
pub(crate) fn linger_while(mut own_work: impl FnMut() -> bool) -> bool {
    let pool = pool();
    pool.lingering.fetch_add(1, Ordering::SeqCst);
    let came = spin_until(|| own_work() || pool.pending.load(Ordering::SeqCst) > 0);
    pool.lingering.fetch_sub(1, Ordering::SeqCst);
    let own = came && own_work();
    // Counted out (SeqCst) before this check: a submit that still counted this thread
    // pushed its job before, so it is seen here.
    if own && pool.pending.load(Ordering::SeqCst) > 0 {
        let jobs = lock(&pool.jobs);
        if jobs.queue.len() > jobs.idle + jobs.starting + pool.lingering.load(Ordering::SeqCst) {
            start_thread(pool, jobs);
        } else if jobs.sleeping > 0 {
            drop(jobs);
            pool.cv.notify_one();
        }
    }
    own
}

fn worker() {
    gpuport_core::release::mark_restricted_thread();
    if let Some(cpus) = crate::affinity::worker_cpus() {
        crate::affinity::pin_current_thread(cpus);
    }
    let pool = pool();
    let mut jobs = lock(&pool.jobs);
    jobs.starting -= 1;
    loop {
        if let Some(job) = jobs.queue.pop_front() {
            pool.pending.store(jobs.queue.len(), Ordering::SeqCst);
            drop(jobs);
            job.drain();
            drop(job);
            jobs = lock(&pool.jobs);
            continue;
        }
        // Idle (counted, so a new job is left to this thread rather than a new one): poll
        // briefly, then sleep.
        jobs.idle += 1;
        drop(jobs);
        let soon = spin_until(|| pool.pending.load(Ordering::SeqCst) > 0);
        jobs = lock(&pool.jobs);
        if !soon && jobs.queue.is_empty() {
            jobs.sleeping += 1;
            let (guard, waited) = pool.cv.wait_timeout(jobs, IDLE_KEEP).unwrap_or_else(|p| p.into_inner());
            jobs = guard;
            jobs.sleeping -= 1;
            if waited.timed_out() && jobs.queue.is_empty() {
                jobs.idle -= 1;
                return;
            }
        }
        jobs.idle -= 1;
    }
}
