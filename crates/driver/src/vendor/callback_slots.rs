//! Where host callbacks wait while a driver holds them: reused slots instead of a fresh
//! allocation per callback.
//!
//! A driver takes a host function and one pointer (`cuLaunchHostFunc(stream, fn, user)`),
//! so each queued closure needs a place of its own until the driver runs it: a [`Slot`]
//! (the closure, and what the stream's callbacks report to). Allocating it per callback,
//! on the enqueuing thread, and freeing it on the driver's callback thread made the
//! allocator the largest cost of a queued callback: memory taken on one thread and given
//! back on another, and a heap that grows and shrinks with every burst. Slots are kept
//! instead, the way a thread-caching allocator keeps blocks (Bonwick's magazines): each
//! thread holds a list of free slots being used and at most one full one ([`MAGAZINE`]
//! slots), linked through the slots themselves, so taking and giving back a slot is a
//! pointer swap with no atomic operation and no bounds or borrow check; a full list is
//! traded with a shared depot once per [`MAGAZINE`] callbacks. The enqueuing thread takes
//! slots; the callback thread gives them back, and they return to the enqueuer through the
//! depot.
//!
//! Each slot holds its stream's [`Reporter`] by reference count, so the reporter lives as
//! long as a callback that may use it, whatever order a driver runs them in: a driver that
//! breaks stream order gets its callbacks' results reported out of order (which the
//! conformance suite catches), never a reporter freed under a callback. A free slot keeps
//! the reporter of its last callback, and a slot taken for the same stream again reuses it
//! as it is: a stream's steady flow of callbacks touches no reference count (two atomic
//! operations per callback otherwise, on a line both threads write). A reporter so kept is
//! released when its slot next serves another stream, or is freed; it owns no driver
//! object (the stream's kept errors and its name), so where that happens does not matter.

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Mutex};

use gpuport_core::{BackendKind, DeviceId, Error, HostCallback, Result};

use super::lock;
use super::stream_errors::StreamErrors;

/// Free slots per magazine: a thread keeps the list it uses and at most one full one, and
/// trades a full one with the depot when it runs out or has a third.
const MAGAZINE: usize = 64;

/// Full magazines kept in the depot (16 Ki slots, about a MiB); beyond that, slots given
/// back are freed. A burst of more callbacks in flight than that allocates.
const DEPOT: usize = 256;

/// A stream as an error names it (`0x… on cuda:0`): two words, written out only when a
/// callback's failure is recorded — never on the enqueue path.
#[derive(Clone, Copy)]
pub(super) struct StreamName {
    pub(super) raw: usize,
    pub(super) device: DeviceId,
}

impl std::fmt::Display for StreamName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x} on {}", self.raw, self.device)
    }
}

/// What a stream's callbacks report to: its kept errors, its name in an error, and the
/// backend whose driver runs them (whose calls they may not make).
pub(super) struct Reporter {
    pub(super) errors: Arc<StreamErrors>,
    pub(super) stream: StreamName,
    pub(super) kind: BackendKind,
}

/// One host callback on its way through the driver; without a closure while free.
pub(super) struct Slot {
    f: Option<HostCallback>,
    /// The stream the callback reports to; kept while the slot is free (see the module's
    /// documentation). `None` only in a slot that never served a stream.
    reporter: Option<Arc<Reporter>>,
    /// The next free slot of the magazine this one is in.
    next: *mut Slot,
}

/// A chain of free slots linked through [`Slot::next`], each a `Box` turned into a raw
/// pointer (a slot's address is what the driver is handed, so a slot never moves).
struct Magazine {
    head: *mut Slot,
    len: usize,
}

// SAFETY: a magazine owns its slots outright (no other pointer to a free slot is used), and
// everything a slot holds is `Send`; moving the chain moves that ownership.
unsafe impl Send for Magazine {}

impl Magazine {
    const EMPTY: Magazine = Magazine { head: ptr::null_mut(), len: 0 };

    /// Takes the first slot.
    fn pop(&mut self) -> Option<*mut Slot> {
        let slot = self.head;
        if slot.is_null() {
            return None;
        }
        // SAFETY: a slot in the chain is a live box this magazine owns.
        self.head = unsafe { (*slot).next };
        self.len -= 1;
        Some(slot)
    }

    /// Adds `slot` first.
    ///
    /// # Safety
    /// `slot` is a live box's pointer that nothing else uses from now on.
    unsafe fn push(&mut self, slot: *mut Slot) {
        // SAFETY: per the contract, the slot is ours to link.
        unsafe { (*slot).next = self.head };
        self.head = slot;
        self.len += 1;
    }

    /// Frees every slot (with whatever reporter each kept).
    fn free(mut self) {
        while let Some(slot) = self.pop() {
            // SAFETY: popped slots are live boxes this magazine owned.
            drop(unsafe { Box::from_raw(slot) });
        }
    }
}

/// A thread's free slots: the magazine it takes from and gives back to, and one spare
/// (full, or empty).
struct ThreadSlots {
    current: Cell<Magazine>,
    spare: Cell<Magazine>,
}

impl Drop for ThreadSlots {
    fn drop(&mut self) {
        self.current.replace(Magazine::EMPTY).free();
        self.spare.replace(Magazine::EMPTY).free();
    }
}

thread_local! {
    /// This thread's free slots.
    static FREE: ThreadSlots = const {
        ThreadSlots { current: Cell::new(Magazine::EMPTY), spare: Cell::new(Magazine::EMPTY) }
    };
}

/// Full magazines of free slots, passed between threads.
static DEPOT_MAGAZINES: Mutex<Vec<Magazine>> = Mutex::new(Vec::new());

/// A free slot of this thread's (refilled from its spare or the depot), if there is one.
#[inline]
fn take_free(free: &ThreadSlots) -> Option<*mut Slot> {
    let mut current = free.current.replace(Magazine::EMPTY);
    let slot = match current.pop() {
        Some(slot) => Some(slot),
        None => {
            current = refill(free);
            current.pop()
        }
    };
    free.current.set(current);
    slot
}

/// [`take_free`] with this thread's magazine empty: its spare if full, else one from the
/// depot (or none).
#[cold]
fn refill(free: &ThreadSlots) -> Magazine {
    let spare = free.spare.replace(Magazine::EMPTY);
    if spare.len > 0 {
        return spare;
    }
    lock(&DEPOT_MAGAZINES).pop().unwrap_or(Magazine::EMPTY)
}

/// A free slot (this thread's, the depot's, or a new one) holding `f` and `reporter`.
#[inline]
fn take(f: HostCallback, reporter: &Arc<Reporter>) -> *mut Slot {
    match FREE.try_with(take_free).ok().flatten() {
        Some(slot) => {
            // SAFETY: a free slot is a live box that is now ours alone, and holds no
            // closure (so the write drops nothing by not dropping the old value).
            unsafe {
                ptr::addr_of_mut!((*slot).f).write(Some(f));
                let kept = &mut (*slot).reporter;
                if !kept.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, reporter)) {
                    *kept = Some(reporter.clone());
                }
            }
            slot
        }
        None => Box::into_raw(Box::new(Slot { f: Some(f), reporter: Some(reporter.clone()), next: ptr::null_mut() })),
    }
}

/// Keeps an emptied slot for reuse: freed when this thread's magazines and the depot are
/// full, or while the thread is exiting.
///
/// # Safety
/// `slot` is a live slot's pointer, holding no closure, that nothing else uses from now on.
#[inline]
unsafe fn give_back(slot: *mut Slot) {
    let kept = FREE.try_with(|free| {
        let mut current = free.current.replace(Magazine::EMPTY);
        // SAFETY: per the contract.
        unsafe { current.push(slot) };
        if current.len >= MAGAZINE {
            current = trade_full(free, current);
        }
        free.current.set(current);
    });
    if kept.is_err() {
        // SAFETY: per the contract, the box is ours.
        drop(unsafe { Box::from_raw(slot) });
    }
}

/// [`give_back`] with a full magazine: it becomes the spare, and a full spare goes to the
/// depot (or is freed when the depot is full). Returns the (empty) magazine to use next.
#[cold]
fn trade_full(free: &ThreadSlots, full: Magazine) -> Magazine {
    let spare = free.spare.replace(full);
    if spare.len > 0 {
        let mut depot = lock(&DEPOT_MAGAZINES);
        if depot.len() < DEPOT {
            depot.push(spare);
        } else {
            drop(depot);
            spare.free();
        }
    }
    Magazine::EMPTY
}

/// Queues `f`, reporting to `reporter`, with `launch` (the driver's host-function call,
/// given the slot's address). When the driver refuses, nothing was queued and `f` comes
/// back with the error, for the caller to drop where it may.
#[inline]
pub(super) fn launch(
    reporter: &Arc<Reporter>,
    f: HostCallback,
    launch: impl FnOnce(*mut c_void) -> Result<()>,
) -> std::result::Result<(), (Error, HostCallback)> {
    let user = take(f, reporter);
    match launch(user.cast()) {
        Ok(()) => Ok(()),
        // SAFETY: the driver refused the slot, so it is still ours alone.
        Err(e) => Err(unsafe { refused(user, e) }),
    }
}

/// [`launch`] when the driver refused: the slot's closure comes back with the error, and
/// the slot is kept for reuse. Out of line: the accepted path is the hot one.
///
/// # Safety
/// `user` is a slot [`take`] filled that no driver holds.
#[cold]
#[inline(never)]
unsafe fn refused(user: *mut Slot, e: Error) -> (Error, HostCallback) {
    // SAFETY: per the contract, the slot is ours alone.
    let f = unsafe { (*user).f.take() };
    // SAFETY: as above; emptied of its closure.
    unsafe { give_back(user) };
    (e, f.unwrap_or_else(|| Box::new(|| {})))
}

/// What the trampoline does with one slot: takes its closure, runs `run` with it and the
/// slot's reporter, and keeps the slot for reuse.
///
/// # Safety
/// `user` is a slot's address [`launch`] handed the driver, and this is its one run.
pub(super) unsafe fn with_slot(user: *mut c_void, run: impl FnOnce(HostCallback, &Reporter)) {
    let slot = user.cast::<Slot>();
    // SAFETY: per the contract, the slot is ours alone for this run.
    let (f, reporter) = unsafe { ((*slot).f.take(), (*slot).reporter.as_deref()) };
    if let (Some(f), Some(reporter)) = (f, reporter) {
        run(f, reporter);
    }
    // SAFETY: as above; its closure was taken, and nothing uses it after this.
    unsafe { give_back(slot) };
}
