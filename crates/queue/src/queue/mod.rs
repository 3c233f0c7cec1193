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
//! when a waiter's target is reached; a query is three loads, no lock (unless it meets an
//! event record being announced). The two counters live on separate cache lines.

mod drain;
mod implicit;
mod ops;
#[cfg(test)]
mod tests;
mod tracker;

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};

use gpuport_core::{Buffer, Error, HostCallback, HostFunction, ProgressReading, Result, StreamProgress, UserPointer};

use crate::event::EventState;
use crate::wait::{current_queue, lock, spin_until, Signal};
pub use implicit::{ImplicitRole, ImplicitSync};
pub use ops::Rows;
pub use ops::{copy_bytes, SendPtr, Work};
use ops::{CopyOp, FillOp, Op};
use tracker::Failure;
pub use tracker::{synchronize_all, QueueTracker};

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
    /// 1 while a marker is counted in `completed` and not yet announced (its event told,
    /// its signal set), else 0: see [`QueueCore::reached`]. A word rather than a flag: it
    /// is the `publishing` counter of the queue's published progress.
    announcing: AtomicU32,
    /// Orders a completion's notify after a waiter's check-then-wait; held while a marker
    /// is counted and announced.
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

    /// Counts a marker complete and announces it, atomically for `query` and waiters (see
    /// [`QueueCore::reached`]). Counted first: whoever sees the event complete sees the
    /// stream's work up to it counted.
    fn complete_with(&self, announce: impl FnOnce()) {
        let _guard = lock(&self.lock);
        self.announcing.store(1, Ordering::SeqCst);
        let done = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        announce();
        self.announcing.store(0, Ordering::SeqCst);
        if done >= self.wake_at.load(Ordering::SeqCst) {
            self.wake_at.store(u64::MAX, Ordering::SeqCst);
            self.cv.notify_all();
        }
    }

    /// Whether `completed` has reached `target` with every marker counted in it announced:
    /// whoever sees the stream done sees its events complete. Without a lock on the common
    /// path: the flag is raised before a marker's count and lowered after its announcement
    /// (all SeqCst), so a count read here that includes a marker is followed by a flag read
    /// that sees the raise — then the lock, held through the announcement, is waited for —
    /// or a lowering made after that announcement, which it therefore sees.
    #[inline]
    fn reached(&self, target: u64) -> bool {
        if self.completed.load(Ordering::SeqCst) < target {
            return false;
        }
        if self.announcing.load(Ordering::SeqCst) != 0 {
            self.await_announcement();
        }
        true
    }

    /// Waits for the marker being announced: its drainer holds the lock until it is.
    #[cold]
    #[inline(never)]
    fn await_announcement(&self) {
        drop(lock(&self.lock));
    }

    /// Blocks until `completed >= target`, every marker up to it announced. Refused from
    /// the queue's own worker (a host callback waiting for itself would never return).
    fn wait_until(&self, target: u64, what: &str) -> Result<()> {
        if current_queue() == self.id() {
            return Err(Error::would_deadlock(format!("{what} of {}", self.name)));
        }
        if spin_until(|| self.reached(target)) {
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
    role: ImplicitRole,
}

impl WorkQueue {
    /// A new, empty queue; `name` appears in errors. No thread is started: the pool lends
    /// one while the queue has work.
    pub fn new(name: String) -> Result<Self> {
        Self::with_role(name, ImplicitRole::Independent)
    }

    /// A new, empty queue taking `role` in its device's implicit synchronisation with the
    /// legacy default stream.
    pub fn with_role(name: String, role: ImplicitRole) -> Result<Self> {
        let (tx, rx) = channel::<Op>();
        let state = Arc::new(QueueCore {
            name,
            submitted: Padded(AtomicU64::new(0)),
            completed: Padded(AtomicU64::new(0)),
            wake_at: AtomicU64::new(u64::MAX),
            announcing: AtomicU32::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            failure: Arc::default(),
            closed: AtomicBool::new(false),
            inbox: Padded(Mutex::new(Inbox { rx, received: 0 })),
            scheduled: AtomicBool::new(false),
        });
        role.join(&state);
        Ok(WorkQueue { tx, state, role })
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

    /// Queues `op` behind the implicit predecessors' pending work.
    fn push_unchecked(&self, op: Op) -> Result<()> {
        let mut followed = Ok(());
        self.role.predecessors(|queue, target| {
            if followed.is_ok() {
                followed = self.send(Op::Follow(queue.clone(), target));
            }
        });
        followed?;
        self.send(op)
    }

    fn send(&self, op: Op) -> Result<()> {
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
        // SAFETY: forwarded.
        unsafe { self.copy_rows(src, dst, len, Rows::ONE, keep) }
    }

    /// Queues a copy of `rows.count` rows of `len` bytes, each side's rows its pitch
    /// apart, as one operation.
    ///
    /// # Safety
    /// As for [`WorkQueue::copy`], for every row; rows of one side do not overlap each
    /// other, nor the other side's unless they are the same bytes.
    pub unsafe fn copy_rows(
        &self,
        src: *const u8,
        dst: *mut u8,
        len: usize,
        rows: Rows,
        keep: [Option<Buffer>; 2],
    ) -> Result<()> {
        // The deliberate bug behind `deliberate-early-free`: the buffers are let go at once.
        #[cfg(feature = "deliberate-early-free")]
        let keep: [Option<Buffer>; 2] = {
            drop(keep);
            [None, None]
        };
        self.push(Op::Copy(Box::new(CopyOp {
            src: SendPtr(src as *mut u8),
            dst: SendPtr(dst),
            len,
            rows,
            _keep: keep,
        })))
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
        // completed is waiting for a drainer, and an implicit predecessor's pending work
        // must run first: then the operation must queue behind them.
        let idle = state.completed.load(Ordering::SeqCst) == state.submitted.load(Ordering::SeqCst)
            && !self.role.has_pending_predecessor();
        let result = idle.then(f);
        state.scheduled.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        #[cfg(test)]
        tests::claim_released();
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

    /// Queues a C host function with its pointer, as they are.
    ///
    /// # Safety
    /// `Stream::host_function`'s: `func(user)` may run once on the worker, and does not
    /// unwind.
    pub unsafe fn host_function(&self, func: HostFunction, user: UserPointer) -> Result<()> {
        self.push(Op::HostFunction(func, user))
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
        match self.progress().read() {
            ProgressReading::Done => true,
            ProgressReading::Pending => false,
            ProgressReading::Publishing => {
                self.state.await_announcement();
                true
            }
        }
    }

    /// The queue's counters ([`StreamProgress`]): `submitted` and `completed` are the
    /// ones its waiters watch, and `publishing` is raised while a marker is counted and
    /// not yet announced — the protocol `query` reads them in.
    #[inline]
    pub fn progress(&self) -> StreamProgress<'_> {
        StreamProgress {
            submitted: &self.state.submitted,
            completed: &self.state.completed,
            publishing: &self.state.announcing,
        }
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
