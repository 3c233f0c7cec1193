//! The ordered asynchronous work queue behind every software stream. A queue is a
//! channel of operations run in submission order by one thread at a time, taken from a
//! process-wide elastic pool ([`crate::pool`]): creating a stream starts no thread, and a
//! queue with work holds a pool thread only while it drains. A queue blocked in a wait or
//! a host callback keeps its thread, and the pool starts another for the next queue with
//! work, so no queue ever waits for a thread — the ordering and cross-stream semantics of
//! one thread per stream, without its cost. Pool threads are restricted threads
//! (`gpuport_core::release`): the last clone of a buffer or handle that queued work held is
//! released on the release thread, never there.
//!
//! Hot path: an enqueue is one atomic increment, one channel send (the channel allocates
//! per block of messages, not per message) and one load of the queue's scheduled flag;
//! completion is one atomic increment, and the lock and condition variable are touched only
//! when a waiter's target is reached. The two counters live on separate cache lines.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use gpuport_core::{Buffer, Error, HostCallback, Result};

use crate::event::EventState;

/// A raw host pointer that may cross to the worker thread. The enqueuing code guarantees
/// the memory outlives the operation (a buffer clone travels with it, or the caller blocks
/// until the operation has run).
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut u8);
// SAFETY: the pointer is only dereferenced by the worker while the memory is kept alive as
// described above; the queue orders the accesses.
unsafe impl Send for SendPtr {}

/// Work run on the queue's thread; an `Err` becomes the queue's sticky error.
pub type Work = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

/// A copy's operands (boxed in [`Op`]: see there).
struct CopyOp {
    src: SendPtr,
    dst: SendPtr,
    len: usize,
    _keep: [Option<Buffer>; 2],
}

/// A fill's operands.
struct FillOp {
    dst: SendPtr,
    len: usize,
    value: u8,
    _keep: Option<Buffer>,
}

/// One queued operation. Kept to two words plus a tag — the channel moves and stores every
/// message, so its size is paid on every enqueue — by boxing the two large ones (measured,
/// one core: 100k enqueues 6.8–7.1 ms boxed against 8.7–9.7 ms inline; an 8-byte copy's
/// round trip the same either way).
enum Op {
    Copy(Box<CopyOp>),
    Fill(Box<FillOp>),
    Record(Arc<EventState>, u64),
    Wait(Arc<EventState>, u64),
    Run(Work),
    /// A host callback, run as given (no second box around it).
    Callback(HostCallback),
    Signal(Arc<Signal>),
}

/// A one-shot completion flag for callers that block until their own operation has run.
#[derive(Default)]
struct Signal {
    done: Mutex<bool>,
    /// `done`, readable without the lock (for the spin before sleeping).
    flag: AtomicBool,
    cv: Condvar,
}

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

impl Signal {
    fn set(&self) {
        let mut done = lock(&self.done);
        *done = true;
        self.flag.store(true, Ordering::Release);
        drop(done);
        self.cv.notify_all();
    }
    fn wait(&self) {
        if spin_until(|| self.flag.load(Ordering::Acquire)) {
            return;
        }
        let mut done = lock(&self.done);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The first error of a queue's work. Shared with the device's [`QueueTracker`]s, so it
/// outlives the queue: an error of work on a stream that was then dropped still reaches
/// the next device-wide synchronize, however soon after the drop the worker exited.
#[derive(Default)]
struct Failure {
    first: Mutex<Option<Error>>,
    /// Set when the last handle of the queue is gone: from then on the device-wide
    /// synchronize is the only reporter, and it clears what it reports.
    orphaned: AtomicBool,
}

impl Failure {
    fn record(&self, err: Error) {
        lock(&self.first).get_or_insert(err);
    }
}

/// A value alone on its cache line(s): the enqueuing thread writes `submitted`, the
/// draining thread `completed`; sharing a line would bounce it between them on every op.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// What a queue's handles, its pool job and its drainer share: the operations, the
/// submitted and completed counts waiters watch, and the first failure.
pub(crate) struct QueueCore {
    name: String,
    submitted: Padded<AtomicU64>,
    completed: Padded<AtomicU64>,
    /// The smallest `completed` count a waiter waits for (`u64::MAX`: nobody waits). A
    /// completion takes the lock and notifies only when it reaches this.
    wake_at: AtomicU64,
    /// Orders a completion's notify after a waiter's check-then-wait.
    lock: Mutex<()>,
    cv: Condvar,
    failure: Arc<Failure>,
    closed: AtomicBool,
    /// The operations; taken by the one thread draining the queue. On lines of its own:
    /// the drainer writes its count on every operation, and enqueuers read the flags
    /// beside it (`closed`, `scheduled`) on every enqueue.
    inbox: Padded<Mutex<Inbox>>,
    /// True while the queue is in the pool's job list, being drained, or claimed for an
    /// inline operation ([`WorkQueue::run_inline_if_idle`]).
    scheduled: AtomicBool,
}

/// The receiving end, with how many operations drainers took out of it (a plain count:
/// only the drainer, under the lock, touches it — no cache line shared with enqueuers).
struct Inbox {
    rx: Receiver<Op>,
    received: u64,
}

thread_local! {
    /// The queue whose worker this thread is (its `QueueCore`'s address), 0 elsewhere.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

/// The identity of the queue whose worker runs the calling thread (0 on other threads).
pub(crate) fn current_queue() -> usize {
    WORKER_OF.with(Cell::get)
}

impl QueueCore {
    fn id(&self) -> usize {
        self as *const QueueCore as usize
    }

    /// Wakes the waiters once `done` reaches the smallest target among them. Every waiter
    /// woken re-registers its own target if it still has to wait.
    fn wake_if_due(&self, done: u64) {
        if done >= self.wake_at.load(Ordering::SeqCst) {
            let _guard = lock(&self.lock);
            self.wake_at.store(u64::MAX, Ordering::SeqCst);
            self.cv.notify_all();
        }
    }

    fn complete_one(&self) {
        let done = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake_if_due(done);
    }

    /// Counts a marker complete and announces it, atomically for `query` and waiters.
    fn complete_with(&self, announce: impl FnOnce()) {
        let _guard = lock(&self.lock);
        let done = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        announce();
        if done >= self.wake_at.load(Ordering::SeqCst) {
            self.wake_at.store(u64::MAX, Ordering::SeqCst);
            self.cv.notify_all();
        }
    }

    /// Blocks until `completed >= target`. Refused from the queue's own worker (a host
    /// callback waiting for itself would never return).
    fn wait_until(&self, target: u64, what: &str) -> Result<()> {
        if current_queue() == self.id() {
            return Err(Error::would_deadlock(format!("{what} of {}", self.name)));
        }
        if spin_until(|| self.completed.load(Ordering::SeqCst) >= target) {
            return Ok(());
        }
        let mut guard = lock(&self.lock);
        loop {
            // Registered before the check (both SeqCst): a completion either sees the
            // target and notifies under the lock, or this check sees its count.
            self.wake_at.fetch_min(target, Ordering::SeqCst);
            if self.completed.load(Ordering::SeqCst) >= target {
                return Ok(());
            }
            guard = self.cv.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn fail(&self, message: String) {
        self.failure.record(Error::StreamWork { stream: self.name.clone(), message });
    }
}

/// An ordered asynchronous queue, drained by a pool thread while it has work. Dropping
/// the last handle lets what was queued finish.
pub struct WorkQueue {
    tx: Sender<Op>,
    state: Arc<QueueCore>,
}

/// Copies `len` bytes, splitting large copies across threads: one thread does not reach
/// memory bandwidth on most machines.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes; if they overlap they must be the same
/// allocation (memmove semantics apply, and the copy is then done on one thread).
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    const PARALLEL_MIN: usize = 16 << 20;
    let overlap =
        (src as usize) < (dst as usize).wrapping_add(len) && (dst as usize) < (src as usize).wrapping_add(len);
    if len < PARALLEL_MIN || overlap {
        // SAFETY: the caller guarantees both ranges are valid; `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    let threads = cpus().min(8);
    if threads < 2 {
        // SAFETY: the caller guarantees both ranges are valid; `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    let chunk = len.div_ceil(threads);
    let (src, dst) = (src as usize, dst as usize);
    std::thread::scope(|s| {
        for start in (0..len).step_by(chunk) {
            let n = chunk.min(len - start);
            s.spawn(move || {
                // SAFETY: disjoint sub-ranges of valid, non-overlapping ranges.
                unsafe { std::ptr::copy_nonoverlapping((src + start) as *const u8, (dst + start) as *mut u8, n) };
            });
        }
    });
}

/// Runs one operation and counts it complete. A marker (an event record, a flush's
/// signal) is counted and announced in one step under the queue's lock, which `query`
/// and `synchronize` also take: whoever sees the event complete sees the stream's work up
/// to it counted, and whoever sees the count sees the event complete.
fn run(op: Op, state: &QueueCore) {
    let announce = match op {
        Op::Copy(op) => {
            let CopyOp { src, dst, len, _keep } = *op;
            // SAFETY: the enqueuer checked both ranges and keeps the memory alive (see
            // SendPtr).
            unsafe { copy_bytes(src.0, dst.0, len) };
            // Released before the op counts as complete: after a synchronize, no clone
            // of the op's buffers is left on the worker (`Buffer::free` can succeed).
            drop(_keep);
            None
        }
        Op::Fill(op) => {
            let FillOp { dst, len, value, _keep } = *op;
            // SAFETY: as above, for one range.
            unsafe { std::ptr::write_bytes(dst.0, value, len) };
            drop(_keep);
            None
        }
        Op::Wait(event, generation) => {
            event.wait_for(generation);
            None
        }
        Op::Run(work) => {
            match catch_unwind(AssertUnwindSafe(work)) {
                Ok(Ok(())) => {}
                Ok(Err(err)) => state.fail(err.to_string()),
                Err(unwound) => state.fail(gpuport_core::unwound_work_message(&*unwound)),
            }
            None
        }
        Op::Callback(f) => {
            if let Err(unwound) = catch_unwind(AssertUnwindSafe(f)) {
                state.fail(gpuport_core::unwound_work_message(&*unwound));
            }
            None
        }
        marker @ (Op::Record(..) | Op::Signal(_)) => Some(marker),
    };
    match announce {
        Some(Op::Record(event, generation)) => state.complete_with(|| event.complete(generation)),
        Some(Op::Signal(signal)) => state.complete_with(|| signal.set()),
        _ => state.complete_one(),
    }
}

/// Drains `state`'s operations on the calling pool thread until none is left, then gives
/// the queue up — unless an operation arrived meanwhile and nobody else took the queue.
pub(crate) fn drain(state: &QueueCore) {
    WORKER_OF.with(|w| w.set(state.id()));
    let mut inbox = lock(&state.inbox);
    loop {
        while let Ok(op) = inbox.rx.try_recv() {
            inbox.received += 1;
            run(op, state);
        }
        // A stream in use gets its next operation soon (a copy after the synchronize that
        // waited for the last one): keep the queue briefly rather than hand it back and have
        // the next enqueue go through the pool.
        let received = inbox.received;
        if crate::pool::linger_while(|| state.submitted.load(Ordering::SeqCst) != received) {
            continue;
        }
        state.scheduled.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // An enqueuer counts `submitted` before sending and then reads `scheduled`: either
        // it sees `false` and schedules the queue again, or this sees its count.
        if state.submitted.load(Ordering::SeqCst) == inbox.received || state.scheduled.swap(true, Ordering::SeqCst) {
            break;
        }
        // Ours again: the operation is counted and on its way (the send follows the count).
        if let Ok(op) = inbox.rx.recv() {
            inbox.received += 1;
            run(op, state);
        }
    }
    WORKER_OF.with(|w| w.set(0));
}

impl WorkQueue {
    /// A new, empty queue; `name` appears in errors. No thread is started: the pool lends
    /// one while the queue has work.
    pub fn new(name: String) -> Result<Self> {
        let (tx, rx) = channel::<Op>();
        let state = Arc::new(QueueCore {
            name,
            submitted: Padded(AtomicU64::new(0)),
            completed: Padded(AtomicU64::new(0)),
            wake_at: AtomicU64::new(u64::MAX),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            failure: Arc::default(),
            closed: AtomicBool::new(false),
            inbox: Padded(Mutex::new(Inbox { rx, received: 0 })),
            scheduled: AtomicBool::new(false),
        });
        Ok(WorkQueue { tx, state })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Marks the queue destroyed: later enqueues through any handle fail with
    /// `InvalidHandle`. Work already queued still runs.
    pub fn close(&self) {
        self.state.closed.store(true, Ordering::SeqCst);
    }

    /// True once [`WorkQueue::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.state.closed.load(Ordering::SeqCst)
    }

    fn push(&self, op: Op) -> Result<()> {
        if self.is_closed() {
            return Err(Error::invalid_handle(format!("{} was destroyed", self.state.name)));
        }
        self.push_unchecked(op)
    }

    fn push_unchecked(&self, op: Op) -> Result<()> {
        self.state.submitted.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(op).is_err() {
            // The receiver lives in the state this handle holds: unreachable, kept for safety.
            self.state.completed.fetch_add(1, Ordering::SeqCst);
            return Err(Error::invalid_handle(format!("{} has no inbox", self.state.name)));
        }
        // No fence needed before the load: the count above and the load below are both
        // SeqCst, as are the drainer's release of `scheduled` and its re-read of the count
        // (see `drain`), so either this load sees the release or the drainer sees the count
        // — and a drainer that sees the count waits in `recv` for the send.
        // Already scheduled (the common case while work flows): nothing more to do.
        if !self.state.scheduled.load(Ordering::SeqCst) && !self.state.scheduled.swap(true, Ordering::SeqCst) {
            crate::pool::submit(self.state.clone());
        }
        Ok(())
    }

    /// Queues a copy of `len` bytes.
    ///
    /// # Safety
    /// Both ranges must be valid for `len` bytes until the copy has run: `keep` must own
    /// them, or the caller must wait for the copy (e.g. with [`WorkQueue::synchronize`])
    /// before the memory goes away. Overlapping ranges must be in one allocation.
    pub unsafe fn copy(&self, src: *const u8, dst: *mut u8, len: usize, keep: [Option<Buffer>; 2]) -> Result<()> {
        self.push(Op::Copy(Box::new(CopyOp { src: SendPtr(src as *mut u8), dst: SendPtr(dst), len, _keep: keep })))
    }

    /// Queues a fill of `len` bytes with `value`.
    ///
    /// # Safety
    /// As for [`WorkQueue::copy`], for one range.
    pub unsafe fn fill(&self, dst: *mut u8, len: usize, value: u8, keep: Option<Buffer>) -> Result<()> {
        self.push(Op::Fill(Box::new(FillOp { dst: SendPtr(dst), len, value, _keep: keep })))
    }

    /// Queues arbitrary work; an error or panic becomes the error of the next
    /// [`WorkQueue::synchronize`].
    pub fn run(&self, work: Work) -> Result<()> {
        self.push(Op::Run(work))
    }

    /// Runs `f` on the calling thread when the queue has nothing pending and nobody drains
    /// it — the same as queuing it and waiting, without waking a thread — and returns its
    /// result; `None` (nothing run) otherwise, or on the queue's own worker, or once closed.
    /// For blocking host reads and writes.
    pub fn run_inline_if_idle<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let state = &self.state;
        if self.is_closed() || current_queue() == state.id() || state.scheduled.load(Ordering::SeqCst) {
            return None;
        }
        if state.scheduled.swap(true, Ordering::SeqCst) {
            return None;
        }
        // Claimed: no drainer runs until it is released. Anything submitted and not
        // completed is waiting for a drainer: then the operation must queue behind it.
        let idle = state.completed.load(Ordering::SeqCst) == state.submitted.load(Ordering::SeqCst);
        let result = idle.then(f);
        state.scheduled.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // Work queued meanwhile saw the claim and did not schedule the queue: do it here.
        if state.submitted.load(Ordering::SeqCst) != state.completed.load(Ordering::SeqCst)
            && !state.scheduled.swap(true, Ordering::SeqCst)
        {
            crate::pool::submit(state.clone());
        }
        result
    }

    /// Queues a host callback; a panic becomes the error of the next
    /// [`WorkQueue::synchronize`].
    pub fn callback(&self, f: HostCallback) -> Result<()> {
        self.push(Op::Callback(f))
    }

    /// Records `event` at the end of the queue.
    pub fn record(&self, event: &Arc<EventState>) -> Result<()> {
        let generation = event.begin_record(self.state.id())?;
        self.push(Op::Record(event.clone(), generation))
    }

    /// Makes later work wait for the event's most recent record.
    pub fn wait(&self, event: &Arc<EventState>) -> Result<()> {
        let generation = event.recorded_generation();
        if generation == 0 {
            return Ok(()); // never recorded: nothing to wait for, as in CUDA
        }
        self.push(Op::Wait(event.clone(), generation))
    }

    /// Queues a no-op and blocks until the worker reaches it, i.e. until everything queued
    /// before it by this thread has run.
    pub fn flush(&self) -> Result<()> {
        if current_queue() == self.state.id() {
            return Err(Error::would_deadlock(format!("a blocking read or write of {}", self.state.name)));
        }
        let signal = Arc::new(Signal::default());
        // Not refused on a closed queue: callers flush to make sure work they queued with
        // borrowed pointers has run before they return.
        self.push_unchecked(Op::Signal(signal.clone()))?;
        signal.wait();
        Ok(())
    }

    /// True when everything submitted has run.
    #[inline]
    pub fn query(&self) -> bool {
        // Under the lock a marker is counted and announced in: see `run`.
        let _guard = lock(&self.state.lock);
        self.state.completed.load(Ordering::SeqCst) >= self.state.submitted.load(Ordering::SeqCst)
    }

    /// Blocks until everything submitted before the call has run, then returns (and clears)
    /// the first error of queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.state.wait_until(self.state.submitted.load(Ordering::SeqCst), "synchronize")?;
        match lock(&self.state.failure.first).take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// A handle that can wait for this queue's work without keeping the queue open: it
    /// waits while the worker still has work, even after every stream handle is gone (a
    /// device-wide synchronize must wait for destroyed streams' pending work too), and it
    /// keeps the first error of that work until a device-wide synchronize reports it.
    pub fn tracker(&self) -> QueueTracker {
        QueueTracker { state: Arc::downgrade(&self.state), failure: self.state.failure.clone() }
    }
}

impl Drop for WorkQueue {
    fn drop(&mut self) {
        // No handle can synchronize this queue any more: its error now belongs to the
        // device's trackers alone.
        self.state.failure.orphaned.store(true, Ordering::SeqCst);
    }
}

/// Synchronizes every queue, returning the first error (all are waited for). Refused at
/// once from a host callback of one of them, which could never be waited for.
pub fn synchronize_all<'a>(queues: impl IntoIterator<Item = &'a QueueTracker> + Clone) -> Result<()> {
    if queues.clone().into_iter().any(QueueTracker::is_current) {
        return Err(Error::would_deadlock("a device-wide synchronize from a host callback of one of its streams"));
    }
    let mut first = Ok(());
    for queue in queues {
        let result = queue.synchronize();
        if first.is_ok() {
            first = result;
        }
    }
    first
}

/// Waits for a queue's work and reports its errors; see [`WorkQueue::tracker`].
#[derive(Clone)]
pub struct QueueTracker {
    state: Weak<QueueCore>,
    failure: Arc<Failure>,
}

impl QueueTracker {
    /// True while the tracker still matters: the queue's worker may still run work, or an
    /// error of its work has not been reported yet.
    pub fn is_live(&self) -> bool {
        self.state.strong_count() > 0 || lock(&self.failure.first).is_some()
    }

    /// True when the calling thread is this queue's worker (a host callback of it).
    pub fn is_current(&self) -> bool {
        current_queue() == self.state.as_ptr() as usize
    }

    /// Blocks until everything submitted to the queue so far has run, then reports the
    /// first failure of its work. While a handle of the queue lives the failure stays (the
    /// stream's own `synchronize` reports and clears it: errors are sticky); once every
    /// handle is gone this is the only reporter, and the failure is cleared here.
    pub fn synchronize(&self) -> Result<()> {
        if let Some(state) = self.state.upgrade() {
            state.wait_until(state.submitted.load(Ordering::SeqCst), "a device-wide synchronize")?;
        }
        let mut first = lock(&self.failure.first);
        let failure = if self.failure.orphaned.load(Ordering::SeqCst) { first.take() } else { first.clone() };
        failure.map_or(Ok(()), Err)
    }
}
