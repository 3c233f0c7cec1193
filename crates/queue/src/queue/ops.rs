//! The operations a queue carries and how its drainer runs one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};

use gpuport_core::{Buffer, HostCallback, HostFunction, Result, UserPointer};

use super::QueueCore;
use crate::event::EventState;
use crate::wait::{cpus, Signal};

/// A raw host pointer that may cross to the worker thread. The enqueuing code guarantees
/// the memory outlives the operation (a buffer clone travels with it, or the caller blocks
/// until the operation has run).
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut u8);
// SAFETY: the pointer is only dereferenced by the worker while the memory is kept alive as
// described above; the queue orders the accesses.
unsafe impl Send for SendPtr {}

impl SendPtr {
    /// The pointer. (A closure that calls this moves the whole `SendPtr`, which is `Send`;
    /// one that reads `.0` would capture the bare pointer, which is not.)
    pub fn get(self) -> *mut u8 {
        self.0
    }
}

/// Work run on the queue's thread; an `Err` becomes the queue's sticky error.
pub type Work = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

/// A copy's operands (boxed in [`Op`]: see there): `rows` rows of `len` bytes.
pub(super) struct CopyOp {
    pub(super) src: SendPtr,
    pub(super) dst: SendPtr,
    pub(super) len: usize,
    pub(super) rows: Rows,
    pub(super) _keep: [Option<Buffer>; 2],
}

/// How many rows a copy moves and how far apart they start on each side (a plain copy is
/// one row).
#[derive(Debug, Clone, Copy)]
pub struct Rows {
    /// Number of rows.
    pub count: usize,
    /// Bytes from one source row's start to the next's.
    pub src_pitch: usize,
    /// Bytes from one destination row's start to the next's.
    pub dst_pitch: usize,
}

impl Rows {
    /// A single row.
    pub const ONE: Rows = Rows { count: 1, src_pitch: 0, dst_pitch: 0 };
}

/// A fill's operands.
pub(super) struct FillOp {
    pub(super) dst: SendPtr,
    pub(super) len: usize,
    pub(super) value: u8,
    pub(super) _keep: Option<Buffer>,
}

/// One queued operation. Kept to two words plus a tag — the channel moves and stores every
/// message, so its size is paid on every enqueue — by boxing the two large ones (measured,
/// one core: 100k enqueues 6.8–7.1 ms boxed against 8.7–9.7 ms inline; an 8-byte copy's
/// round trip the same either way).
pub(super) enum Op {
    Copy(Box<CopyOp>),
    Fill(Box<FillOp>),
    Record(Arc<EventState>, u64),
    Wait(Arc<EventState>, u64),
    Run(Work),
    /// A host callback, run as given (no second box around it).
    Callback(HostCallback),
    /// A C host function and its pointer, called as given (no closure around them).
    HostFunction(HostFunction, UserPointer),
    Signal(Arc<Signal>),
    /// Waits until another queue has completed this many operations: the legacy default
    /// stream's implicit synchronisation (see `implicit`). Weak: a queue nobody holds any
    /// more has finished its work.
    Follow(Weak<QueueCore>, u64),
}

/// Copies `len` bytes, splitting large copies across threads: one thread does not reach
/// memory bandwidth on most machines.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes; if they overlap they must be the same
/// allocation (memmove semantics apply, and the copy is then done on one thread).
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // Under Miri the threshold is lower, so that the parallel path is checked at sizes
    // Miri can run in minutes.
    const PARALLEL_MIN: usize = if cfg!(miri) { 64 << 10 } else { 16 << 20 };
    let overlap = src.addr() < dst.addr().wrapping_add(len) && dst.addr() < src.addr().wrapping_add(len);
    if len < PARALLEL_MIN || overlap {
        // SAFETY: the caller guarantees both ranges are valid; `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) };
        return;
    }
    // SAFETY: as for this function; the ranges do not overlap.
    unsafe { copy_in_parts(src, dst, len, cpus().min(8)) }
}

/// Copies `len` bytes in `parts` contiguous pieces, one thread each (on the calling thread
/// when `parts` < 2). Apart from `copy_bytes` so that the split is tested whatever the
/// machine's CPU count: `copy_bytes` takes it only where two or more CPUs may run the
/// process, which a test confined to one CPU never is.
///
/// # Safety
/// `src` and `dst` must be valid for `len` bytes and must not overlap.
unsafe fn copy_in_parts(src: *const u8, dst: *mut u8, len: usize, parts: usize) {
    if parts < 2 {
        // SAFETY: the caller guarantees both ranges are valid and apart.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    let chunk = len.div_ceil(parts).max(1);
    let (src, dst) = (SendPtr(src.cast_mut()), SendPtr(dst));
    std::thread::scope(|s| {
        for start in (0..len).step_by(chunk) {
            let n = chunk.min(len - start);
            s.spawn(move || {
                // SAFETY: disjoint sub-ranges of valid, non-overlapping ranges; the pointers
                // are offset, never rebuilt from integers, so they keep their provenance.
                unsafe { std::ptr::copy_nonoverlapping(src.get().add(start), dst.get().add(start), n) };
            });
        }
    });
}

/// Runs one operation and counts it complete. A marker (an event record, a flush's
/// signal) is counted and announced as one step (`QueueCore::complete_with`): whoever sees
/// the event complete sees the stream's work up to it counted, and whoever sees the count
/// (`query`, `synchronize`) sees the event complete.
pub(super) fn run(op: Op, state: &QueueCore) {
    match op {
        Op::Copy(op) => {
            let CopyOp { src, dst, len, rows, _keep } = *op;
            // The deliberate bug behind `deliberate-race`: counted complete and announced
            // first, so a waiter goes on while the bytes are still being written.
            #[cfg(feature = "deliberate-race")]
            state.complete_with(|| ());
            for row in 0..rows.count {
                // SAFETY: the enqueuer checked both spans (every row inside them) and keeps
                // the memory alive (see SendPtr); the offsets stay inside the spans.
                unsafe { copy_bytes(src.0.add(row * rows.src_pitch), dst.0.add(row * rows.dst_pitch), len) };
            }
            // Released before the op counts as complete: after a synchronize, no clone
            // of the op's buffers is left on the worker (`Buffer::free` can succeed).
            drop(_keep);
            #[cfg(feature = "deliberate-race")]
            return;
        }
        Op::Fill(op) => {
            let FillOp { dst, len, value, _keep } = *op;
            // SAFETY: as above, for one range.
            unsafe { std::ptr::write_bytes(dst.0, value, len) };
            drop(_keep);
        }
        Op::Wait(event, generation) => {
            event.wait_for(generation);
        }
        Op::Follow(queue, target) => {
            if let Some(queue) = queue.upgrade() {
                // Never this queue's own worker (a queue does not follow itself), so the
                // wait is not refused; kept as the queue's error if it ever were.
                if let Err(err) = queue.wait_until(target, "the implicit synchronisation") {
                    state.fail(err.to_string());
                }
            }
        }
        Op::Run(work) => match catch_unwind(AssertUnwindSafe(work)) {
            Ok(Ok(())) => {}
            Ok(Err(err)) => state.fail(err.to_string()),
            Err(unwound) => state.fail(gpuport_core::unwound_work_message(&*unwound)),
        },
        Op::Callback(f) => {
            if let Err(unwound) = catch_unwind(AssertUnwindSafe(f)) {
                state.fail(gpuport_core::unwound_work_message(&*unwound));
            }
        }
        Op::HostFunction(func, user) => {
            // SAFETY: `Stream::host_function`'s contract: called once, on any thread; it
            // does not unwind.
            unsafe { func(user.0) };
        }
        // The markers return here: counted and announced as one step.
        Op::Record(event, generation) => return state.complete_with(|| event.complete(generation)),
        Op::Signal(signal) => return state.complete_with(|| signal.set()),
    }
    state.complete_one();
}

#[cfg(test)]
mod split_tests {
    use super::copy_in_parts;

    /// Every byte lands where it belongs, whatever the split: pieces of unequal length (a
    /// length no part count divides), one part per byte, more parts than bytes.
    #[test]
    fn a_split_copy_moves_every_byte_to_its_place() {
        for (len, parts) in [(1000, 3), (1001, 8), (7, 7), (5, 16), (0, 4), (64, 1)] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut dst = vec![0u8; len];
            // SAFETY: two distinct vectors of `len` bytes each.
            unsafe { copy_in_parts(src.as_ptr(), dst.as_mut_ptr(), len, parts) };
            assert_eq!(dst, src, "{len} bytes in {parts} parts");
        }
    }
}
