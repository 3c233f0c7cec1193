//! Streams: an in-order queue of operations run by one thread per stream. An operation may
//! first wait for other streams to reach given points (event waits, the legacy stream's
//! implicit synchronisation); then it runs, and the stream's completion count advances.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::clock::VClock;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The state a context's streams share: its poison (sticky error) and whether its device
/// was lost.
#[derive(Default)]
pub(crate) struct CtxShared {
    /// The vendor status every later call returns, once work failed on the context.
    pub(crate) poison: Mutex<Option<u32>>,
}

impl CtxShared {
    pub(crate) fn poisoned(&self) -> Option<u32> {
        *lock(&self.poison)
    }
    pub(crate) fn poison(&self, status: u32) {
        lock(&self.poison).get_or_insert(status);
    }
}

/// A record of an event: where in which stream, the recording stream's clock there, and
/// when it completed.
pub(crate) struct RecordSlot {
    pub(crate) stream: Arc<StreamCore>,
    pub(crate) seq: u64,
    pub(crate) clock: VClock,
    pub(crate) done_at: Mutex<Option<Instant>>,
}

impl RecordSlot {
    pub(crate) fn is_done(&self) -> bool {
        self.stream.completed() >= self.seq
    }
}

/// A host function queued on a stream.
#[derive(Clone, Copy)]
pub enum HostFn {
    /// `cuLaunchHostFunc` / `hipLaunchHostFunc`: `f(user)`; not called once the context
    /// failed (as CUDA documents).
    Plain(unsafe extern "C" fn(*mut c_void)),
    /// `hipStreamAddCallback`: `f(stream, status, user)`; called with the context's error.
    WithStatus(unsafe extern "C" fn(*mut c_void, u32, *mut c_void), *mut c_void),
}

/// What an operation does when it runs. Pointers are the double's own view of the
/// memory: shadow addresses for device memory, host addresses otherwise.
pub(crate) enum Work {
    Copy {
        dst: *mut u8,
        src: *const u8,
        len: usize,
    },
    /// `height` rows of `width` bytes, each side's rows its pitch apart.
    Copy2d {
        dst: *mut u8,
        src: *const u8,
        width: usize,
        height: usize,
        dst_pitch: usize,
        src_pitch: usize,
    },
    Fill {
        dst: *mut u8,
        value: u8,
        len: usize,
    },
    FillU32 {
        dst: *mut u32,
        count: usize,
        value: u32,
    },
    /// A copy kernel: every element of `launch`'s view, from `src` to `dst` (each side's
    /// element 0).
    StridedCopy {
        src: *const u8,
        dst: *mut u8,
        launch: crate::kernels::StridedCopyLaunch,
    },
    Host {
        f: HostFn,
        user: *mut c_void,
    },
    Record(Arc<RecordSlot>),
    /// Waits only (an event wait, a marker for synchronisation).
    Nothing,
    /// A stream-ordered free: the allocation with this id is released when it runs.
    Free(u64),
    /// A fault injected on the call that queued this: poisons the context when it runs.
    Poison(u32),
    /// A rank's part of a collective: its stream waits here for the other ranks' parts;
    /// a failure goes to the communicator's asynchronous error.
    Collective {
        clique: Arc<crate::collective::Clique>,
        seq: u64,
        rank: usize,
        part: crate::collective::Part,
        error: Arc<Mutex<Option<String>>>,
        /// A fault injected into this rank's part (the collective fails on every rank).
        injected: Option<String>,
    },
    /// A rank's point-to-point messages, issued together: its stream waits here until each
    /// has met its other side.
    Exchange {
        clique: Arc<crate::collective::Clique>,
        rank: usize,
        sends: Vec<crate::collective::Side>,
        recvs: Vec<crate::collective::Side>,
        error: Arc<Mutex<Option<String>>>,
    },
}

/// One queued operation.
pub(crate) struct Op {
    pub(crate) waits: Vec<(Arc<StreamCore>, u64)>,
    pub(crate) work: Work,
    /// Allocation ids the work touches (their pending-work counts drop when it completes).
    pub(crate) touches: Vec<u64>,
}

// SAFETY: the raw pointers are addresses of memory the machine keeps alive until the
// operation has completed (pending-work counts), and user pointers handed to host
// functions, which the caller gave the driver to pass to that function on another thread.
unsafe impl Send for Op {}

#[derive(Default)]
struct Queue {
    ops: VecDeque<Op>,
    enqueued: u64,
    completed: u64,
    closing: bool,
}

/// Which kind of stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Created by the program; `blocking` unless created non-blocking.
    Created {
        /// Synchronises with the legacy default stream.
        blocking: bool,
    },
    /// The legacy default stream of a context (CUDA's `CU_STREAM_LEGACY` and null stream,
    /// HIP's null stream).
    Legacy,
    /// A thread's per-thread default stream (blocking with respect to the legacy one).
    PerThread,
}

impl StreamKind {
    /// Whether the legacy stream synchronises with this one.
    pub fn is_blocking(self) -> bool {
        matches!(self, StreamKind::Created { blocking: true } | StreamKind::PerThread)
    }
}

/// A stream.
pub(crate) struct StreamCore {
    pub(crate) id: u64,
    pub(crate) ctx: u64,
    pub(crate) device: usize,
    pub(crate) kind: StreamKind,
    pub(crate) shared: Arc<CtxShared>,
    queue: Mutex<Queue>,
    cv: Condvar,
}

impl StreamCore {
    pub(crate) fn new(id: u64, ctx: u64, device: usize, kind: StreamKind, shared: Arc<CtxShared>) -> Arc<Self> {
        Arc::new(StreamCore { id, ctx, device, kind, shared, queue: Mutex::default(), cv: Condvar::new() })
    }

    /// Operations completed.
    pub(crate) fn completed(&self) -> u64 {
        lock(&self.queue).completed
    }

    /// Operations queued so far (the sequence number of the last one).
    pub(crate) fn enqueued(&self) -> u64 {
        lock(&self.queue).enqueued
    }

    /// Queues `op`; returns its sequence number.
    pub(crate) fn push(&self, op: Op) -> u64 {
        let mut q = lock(&self.queue);
        q.enqueued += 1;
        q.ops.push_back(op);
        self.cv.notify_all();
        q.enqueued
    }

    /// Blocks until the stream has completed `seq` operations.
    pub(crate) fn wait_for(&self, seq: u64) {
        let mut q = lock(&self.queue);
        while q.completed < seq {
            q = self.cv.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Lets the thread end once the queue is drained.
    pub(crate) fn close(&self) {
        lock(&self.queue).closing = true;
        self.cv.notify_all();
    }

    /// The next operation (the oldest, or with `newest_first` the newest), or `None` once
    /// closed and drained.
    fn next(&self, newest_first: bool) -> Option<Op> {
        let mut q = lock(&self.queue);
        loop {
            let op = if newest_first { q.ops.pop_back() } else { q.ops.pop_front() };
            if let Some(op) = op {
                return Some(op);
            }
            if q.closing {
                return None;
            }
            q = self.cv.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn complete_one(&self) {
        let mut q = lock(&self.queue);
        q.completed += 1;
        self.cv.notify_all();
    }
}

thread_local! {
    static IN_HOST_FN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while a host function runs on this thread (a driver call from there is a
/// violation: CUDA forbids it).
pub fn in_host_function() -> bool {
    IN_HOST_FN.with(|c| c.get())
}

/// What the machine does when an operation completes.
pub(crate) trait Completion: Sync {
    fn done(&self, op: &Op);
    fn delay(&self) -> std::time::Duration;
    /// Whether streams run their queued work newest first (a driver mutant: out of order).
    fn newest_first(&self) -> bool;
}

/// Runs one operation.
fn run(core: &StreamCore, op: &Op) {
    let poisoned = core.shared.poisoned();
    match (&op.work, poisoned) {
        (Work::Record(slot), _) => *lock(&slot.done_at) = Some(Instant::now()),
        (Work::Poison(status), _) => core.shared.poison(*status),
        (Work::Host { f: HostFn::WithStatus(f, stream), user }, status) => {
            IN_HOST_FN.with(|c| c.set(true));
            // SAFETY: the program queued this callback with this user pointer, to be called
            // once when the stream reaches it.
            unsafe { f(*stream, status.unwrap_or(0), *user) };
            IN_HOST_FN.with(|c| c.set(false));
        }
        // A failed context runs nothing more.
        (_, Some(_)) => {}
        (Work::Copy { dst, src, len }, None) => {
            // SAFETY: both ranges were checked against live allocations (or are host memory
            // the program vouched for) when the copy was queued, and stay alive until it
            // completes; they may overlap.
            unsafe { std::ptr::copy(*src, *dst, *len) }
        }
        (Work::Copy2d { dst, src, width, height, dst_pitch, src_pitch }, None) => {
            for row in 0..*height {
                // SAFETY: both spans (first row's start to last row's end) were checked
                // against live allocations (or are host memory the program vouched for)
                // when the copy was queued, and stay alive until it completes.
                unsafe { std::ptr::copy(src.add(row * src_pitch), dst.add(row * dst_pitch), *width) }
            }
        }
        (Work::Fill { dst, value, len }, None) => {
            // SAFETY: a range checked when queued, kept alive until completion.
            unsafe { std::ptr::write_bytes(*dst, *value, *len) }
        }
        (Work::FillU32 { dst, count, value }, None) => {
            for i in 0..*count {
                // SAFETY: `count` elements from `dst` were checked against the allocation
                // when the kernel was launched; unaligned stores are allowed.
                unsafe { dst.add(i).write_unaligned(*value) };
            }
        }
        (Work::StridedCopy { src, dst, launch }, None) => {
            launch.for_each_element(|s, d| {
                // SAFETY: every element's bytes on both sides lie in the ranges checked
                // against live allocations when the kernel was launched (`reach`), kept
                // alive until it completes.
                unsafe { std::ptr::copy(src.offset(s as isize), dst.offset(d as isize), launch.item) }
            });
        }
        (Work::Host { f: HostFn::Plain(f), user }, None) => {
            IN_HOST_FN.with(|c| c.set(true));
            // SAFETY: as for the callback above.
            unsafe { f(*user) };
            IN_HOST_FN.with(|c| c.set(false));
        }
        (Work::Collective { clique, seq, rank, part, error, injected }, None) => {
            if let Some(why) = injected {
                clique.spoil(*seq, why.clone());
            }
            let report = |kind: &str, why: String| crate::report::violation_outside_call(kind, why);
            if let crate::collective::Outcome::Failed(why) = clique.arrive(*seq, *rank, *part, &report) {
                lock(error).get_or_insert(why);
            }
        }
        (Work::Exchange { clique, rank, sends, recvs, error }, None) => {
            let report = |kind: &str, why: String| crate::report::violation_outside_call(kind, why);
            if let crate::collective::Outcome::Failed(why) = clique.exchange(*rank, sends, recvs, &report) {
                lock(error).get_or_insert(why);
            }
        }
        (Work::Nothing | Work::Free(_), None) => {}
    }
}

/// Starts the thread that runs `core`'s operations.
pub(crate) fn spawn_worker(core: Arc<StreamCore>, machine: &'static dyn Completion) {
    let name = format!("double stream {}", core.id);
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        while let Some(op) = core.next(machine.newest_first()) {
            for (stream, seq) in &op.waits {
                stream.wait_for(*seq);
            }
            let delay = machine.delay();
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            run(&core, &op);
            machine.done(&op);
            core.complete_one();
        }
    });
    if let Err(e) = spawned {
        crate::report::violation_outside_call("internal", format!("cannot start a stream thread: {e}"));
    }
}
