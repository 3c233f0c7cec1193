//! The elastic pool of threads that drain software queues (see [`crate::queue`]).
//!
//! A queue with work is a job; a job is taken by an idle thread, or — when every thread is
//! busy (draining, blocked in a wait or in a host callback) — by a new one. So there are
//! never fewer threads than queues with work: the one-thread-per-stream guarantee that no
//! stream waits for another's progress to start, while a created stream costs no thread.
//! Idle threads wait for jobs and exit after a while without one.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::queue::{drain, lock, State};

/// How long an idle thread waits for a job before exiting.
const IDLE_KEEP: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Jobs {
    queue: VecDeque<Arc<State>>,
    /// Threads waiting for a job.
    idle: usize,
    /// Threads started that have not yet looked for a job.
    starting: usize,
}

#[derive(Default)]
struct Pool {
    jobs: Mutex<Jobs>,
    cv: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// Hands a queue with work to the pool (the caller just set its scheduled flag).
pub(crate) fn submit(job: Arc<State>) {
    let pool = pool();
    let mut jobs = lock(&pool.jobs);
    jobs.queue.push_back(job);
    if jobs.queue.len() <= jobs.idle + jobs.starting {
        drop(jobs);
        pool.cv.notify_one();
        return;
    }
    jobs.starting += 1;
    drop(jobs);
    let started = std::thread::Builder::new().name("gpuport worker".into()).spawn(worker);
    if started.is_err() {
        // No thread for now: the job stays queued for the next thread that frees up (or
        // starts with a later job); its queue's work waits rather than being lost.
        lock(&pool.jobs).starting -= 1;
    }
}

fn worker() {
    gpuport_core::release::mark_restricted_thread();
    let pool = pool();
    let mut jobs = lock(&pool.jobs);
    jobs.starting -= 1;
    loop {
        if let Some(job) = jobs.queue.pop_front() {
            drop(jobs);
            drain(&job);
            drop(job);
            jobs = lock(&pool.jobs);
            continue;
        }
        jobs.idle += 1;
        let (guard, waited) = pool.cv.wait_timeout(jobs, IDLE_KEEP).unwrap_or_else(|p| p.into_inner());
        jobs = guard;
        jobs.idle -= 1;
        if waited.timed_out() && jobs.queue.is_empty() {
            return;
        }
    }
}
