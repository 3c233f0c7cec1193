//! Where host callbacks wait while a driver holds them: reused slots instead of a fresh
//! allocation per callback.
//!
//! A driver takes a host function and one pointer (`cuLaunchHostFunc(stream, fn, user)`),
//! so each queued closure needs a place of its own until the driver runs it: a [`Slot`]
//! (the closure, and what the stream's callbacks report to). Allocating it per callback,
//! on the enqueuing thread, and freeing it on the driver's callback thread made the
//! allocator the largest cost of a queued callback: memory taken on one thread and given
//! back on another, and a heap that grows and shrinks with every burst. Slots are kept
//! instead, the way a thread-caching allocator keeps blocks: each thread holds up to two
//! magazines of free slots ([`MAGAZINE`] each), taken and given back with no atomic
//! operation, and trades a full magazine with a shared depot once per [`MAGAZINE`]
//! callbacks. The enqueuing thread takes slots; the callback thread gives them back, and
//! they return to the enqueuer through the depot.
//!
//! Each slot holds the stream's [`Reporter`] by reference count, so the reporter lives as
//! long as a callback that may use it, whatever order a driver runs them in: a driver that
//! breaks stream order gets its callbacks' results reported out of order (which the
//! conformance suite catches), never a reporter freed under a callback.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use gpuport_core::{BackendKind, DeviceId, Error, HostCallback, Result};

use super::lock;
use super::stream_errors::StreamErrors;

/// Free slots per magazine: a thread keeps up to two, and trades one with the depot when
/// it runs out or has three.
const MAGAZINE: usize = 64;

/// Full magazines kept in the depot (16 Ki slots, well under a MiB); beyond that, slots
/// given back are freed. A burst of more callbacks in flight than that allocates.
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

/// One host callback on its way through the driver; empty while free.
pub(super) struct Slot {
    f: Option<HostCallback>,
    reporter: Option<Arc<Reporter>>,
}

/// Free slots, each boxed: a slot's address is what the driver is handed, so a slot is
/// its own allocation, moved between lists without moving itself.
type Magazine = Vec<Box<Slot>>;

thread_local! {
    /// This thread's free slots.
    static FREE: RefCell<Magazine> = const { RefCell::new(Vec::new()) };
}

/// Full magazines of free slots, passed between threads.
static DEPOT_MAGAZINES: Mutex<Vec<Magazine>> = Mutex::new(Vec::new());

/// A free slot (this thread's, the depot's, or a new one) holding `f` and `reporter`.
fn take(f: HostCallback, reporter: Arc<Reporter>) -> Box<Slot> {
    let cached = FREE
        .try_with(|free| {
            let mut free = free.borrow_mut();
            if free.is_empty() {
                if let Some(magazine) = lock(&DEPOT_MAGAZINES).pop() {
                    *free = magazine;
                }
            }
            free.pop()
        })
        .ok()
        .flatten();
    match cached {
        Some(mut slot) => {
            (slot.f, slot.reporter) = (Some(f), Some(reporter));
            slot
        }
        None => Box::new(Slot { f: Some(f), reporter: Some(reporter) }),
    }
}

/// Keeps an emptied slot for reuse: freed when this thread's magazines and the depot are
/// full, or while the thread is exiting.
fn give_back(slot: Box<Slot>) {
    debug_assert!(slot.f.is_none() && slot.reporter.is_none(), "a slot given back holds a callback");
    let _ = FREE.try_with(|free| {
        let mut free = free.borrow_mut();
        free.push(slot);
        if free.len() >= 3 * MAGAZINE {
            let magazine = free.split_off(2 * MAGAZINE);
            let mut depot = lock(&DEPOT_MAGAZINES);
            if depot.len() < DEPOT {
                depot.push(magazine);
            }
        }
    });
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
    let user = Box::into_raw(take(f, reporter.clone()));
    launch(user.cast()).map_err(|e| {
        // SAFETY: the driver refused the slot, so the box is still ours.
        let mut slot = unsafe { Box::from_raw(user) };
        let f = slot.f.take();
        slot.reporter = None;
        give_back(slot);
        (e, f.unwrap_or_else(|| Box::new(|| {})))
    })
}

/// What the trampoline does with one slot: takes its closure and reporter, runs `run`
/// with them, and keeps the slot for reuse.
///
/// # Safety
/// `user` is a slot's address [`launch`] handed the driver, and this is its one run.
pub(super) unsafe fn with_slot(user: *mut c_void, run: impl FnOnce(HostCallback, &Reporter)) {
    // SAFETY: per the contract, the slot's box comes back to us with this run.
    let mut slot = unsafe { Box::from_raw(user.cast::<Slot>()) };
    let (f, reporter) = (slot.f.take(), slot.reporter.take());
    give_back(slot);
    if let (Some(f), Some(reporter)) = (f, reporter) {
        run(f, &reporter);
    }
}
