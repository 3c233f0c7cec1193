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
//! Both ends run once per callback, so each is split into the common case, inlined (a
//! slot taken from, or given back to, the magazine in use: a thread-local access and a
//! pointer swap), and the rest out of line (refilling, trading a full magazine, a thread's
//! first slot, a thread exiting). The thread's magazines live in a thread-local without a
//! destructor, so that reaching them checks nothing; they are freed at the thread's exit by
//! a second thread-local, registered when the thread first keeps a slot. A slot's closure
//! is moved out of it when it runs, not swapped for an empty one.
//!
//! A driver is trusted to run each host function once, but a plugin is foreign code that
//! may not: it may run one twice, or after the stream it was queued on is gone. So a slot
//! is *armed* when its closure is written and disarmed, atomically, by the one run that
//! takes the closure out; a run that finds its slot disarmed does nothing and says so
//! ([`SlotRun::RanBefore`]), and so does a run handed a NULL `user`
//! ([`SlotRun::NullUser`]), for the backend to report. And slots are never freed, only
//! reused: a slot a thread cannot keep (it is exiting, or its magazines are full) goes to
//! the depot, so a late call reads a live slot, never freed memory. The slots in existence
//! are as many as were ever in flight at once.
//!
//! Each slot holds its stream's [`Reporter`] by reference count, so the reporter lives as
//! long as a callback that may use it, whatever order a driver runs them in: a driver that
//! breaks stream order gets its callbacks' results reported out of order (which the
//! conformance suite catches), never a reporter freed under a callback. A free slot keeps
//! the reporter of its last callback, and a slot taken for the same stream again reuses it
//! as it is: a stream's steady flow of callbacks touches no reference count (two atomic
//! operations per callback otherwise, on a line both threads write). A reporter so kept is
//! released when its slot next serves another stream, or when the thread keeping the slot
//! exits (its slots go to the depot reporting to no stream); it owns no driver object (the
//! stream's kept errors and its name), so where that happens does not matter.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use gpuport_core::{BackendKind, DeviceId, Error, HostCallback, Result};

use crate::lock;
use crate::stream_errors::StreamErrors;

/// Free slots per magazine: a thread keeps the list it uses and at most one full one, and
/// trades a full one with the depot when it runs out or has a third.
const MAGAZINE: usize = 64;

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

/// One host callback on its way through the driver.
pub(super) struct Slot {
    /// The closure: written when the slot is taken, moved out when it runs (or is
    /// refused); uninitialised while the slot is free.
    f: MaybeUninit<HostCallback>,
    /// True from the closure's writing to its one run (or refusal): a run that finds it
    /// false takes nothing.
    armed: AtomicBool,
    /// The stream the callback reports to; kept while the slot is free (see the module's
    /// documentation).
    reporter: Arc<Reporter>,
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
    #[inline]
    fn pop(&mut self) -> Option<NonNull<Slot>> {
        let slot = NonNull::new(self.head)?;
        // SAFETY: a slot in the chain is a live box this magazine owns.
        self.head = unsafe { (*slot.as_ptr()).next };
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

    /// Puts the magazine in the depot, for any thread to take (slots are never freed; see
    /// the module's documentation).
    fn deposit(self) {
        if self.len > 0 {
            lock(&DEPOT_MAGAZINES).push(self);
        }
    }

    /// [`Magazine::deposit`] for the slots of a thread that is exiting: they report to
    /// [`nobody`] from now on, so the streams' reporters they kept are released.
    #[cold]
    #[inline(never)]
    fn retire(self) {
        let mut at = self.head;
        while let Some(slot) = NonNull::new(at) {
            // SAFETY: a slot in the chain is a live box the magazine owns, holding no
            // closure, that nothing else uses.
            unsafe {
                if !Arc::ptr_eq(&(*slot.as_ptr()).reporter, nobody()) {
                    (*slot.as_ptr()).reporter = nobody().clone();
                }
                at = (*slot.as_ptr()).next;
            }
        }
        self.deposit();
    }
}

/// The reporter of slots no stream holds: an exited thread's slots report to it, so that
/// the streams' own reporters are released.
fn nobody() -> &'static Arc<Reporter> {
    static NOBODY: OnceLock<Arc<Reporter>> = OnceLock::new();
    NOBODY.get_or_init(|| {
        Arc::new(Reporter {
            errors: Arc::default(),
            stream: StreamName { raw: 0, device: DeviceId { kind: BackendKind::Host, ordinal: 0 } },
            kind: BackendKind::Host,
        })
    })
}

/// A thread's free slots: the magazine it takes from and gives back to, and one spare
/// (full, or empty).
struct ThreadSlots {
    current: Magazine,
    spare: Magazine,
}

/// [`ThreadSlots`] in a thread-local: only its own thread reaches it, through
/// [`with_free`], whose borrow ends before anything else could reach it again. It has no
/// destructor of its own (`ManuallyDrop`), so that reaching it is a plain thread-local
/// access, with no check of whether a destructor was registered or has run; the thread's
/// slots are freed at its exit by [`FreeAtExit`], registered when the thread first keeps
/// one.
struct FreeSlots(UnsafeCell<ManuallyDrop<ThreadSlots>>);

/// Frees this thread's free slots when the thread exits.
struct FreeAtExit;

impl Drop for FreeAtExit {
    fn drop(&mut self) {
        let kept = with_free(|slots| {
            [
                std::mem::replace(&mut slots.current, Magazine::EMPTY),
                std::mem::replace(&mut slots.spare, Magazine::EMPTY),
            ]
        });
        kept.into_iter().flatten().for_each(Magazine::retire);
    }
}

thread_local! {
    /// This thread's free slots.
    static FREE: FreeSlots = const {
        FreeSlots(UnsafeCell::new(ManuallyDrop::new(ThreadSlots { current: Magazine::EMPTY, spare: Magazine::EMPTY })))
    };
    /// Registered by [`may_keep`] the first time the thread keeps a slot.
    static FREE_AT_EXIT: FreeAtExit = const { FreeAtExit };
}

/// Runs `f` on this thread's free slots.
#[inline]
fn with_free<R>(f: impl FnOnce(&mut ThreadSlots) -> R) -> Option<R> {
    // SAFETY: only this thread reaches its `FREE`, and every `f` passed here (take, give
    // back, trade with the depot) calls nothing that could reach it again, so this is the
    // one borrow while it lasts.
    FREE.try_with(|free| f(unsafe { &mut *free.0.get() })).ok()
}

/// Whether this thread may keep free slots: registers [`FREE_AT_EXIT`] the first time;
/// false once the thread is exiting (its slots already in the depot), when slots given
/// back go to the depot one by one and slots taken come from it.
#[cold]
fn may_keep() -> bool {
    FREE_AT_EXIT.try_with(|_| ()).is_ok()
}

/// Full magazines of free slots, passed between threads.
static DEPOT_MAGAZINES: Mutex<Vec<Magazine>> = Mutex::new(Vec::new());

/// A free slot (this thread's, the depot's, or a new one) holding `f` and `reporter`.
///
/// Only the common case is inline — a slot in the magazine in use. Everything else goes
/// out of line with the closure, so that the enqueuing caller holds nothing across a call
/// before the slot is filled (its frame saves fewer registers on every callback).
#[inline(always)]
fn take(f: HostCallback, reporter: &Arc<Reporter>) -> NonNull<Slot> {
    match with_free(|slots| slots.current.pop()).flatten() {
        // SAFETY: a popped slot is a live box that is now ours alone, holding no closure.
        Some(slot) => unsafe { fill(slot, f, reporter) },
        None => take_refilled(f, reporter),
    }
}

/// [`take`] with this thread's magazine empty: a slot from its spare or the depot, or a
/// new one.
#[cold]
#[inline(never)]
fn take_refilled(f: HostCallback, reporter: &Arc<Reporter>) -> NonNull<Slot> {
    match refill() {
        // SAFETY: as in `take`.
        Some(slot) => unsafe { fill(slot, f, reporter) },
        None => NonNull::from(Box::leak(Box::new(Slot {
            #[cfg(test)]
            f: tests::made_one(f),
            #[cfg(not(test))]
            f: MaybeUninit::new(f),
            armed: AtomicBool::new(true),
            reporter: reporter.clone(),
            next: ptr::null_mut(),
        }))),
    }
}

/// Puts `f` in a free slot, reporting to `reporter`.
///
/// # Safety
/// `slot` is a free slot (a live box holding no closure) that is ours alone.
#[inline(always)]
unsafe fn fill(slot: NonNull<Slot>, f: HostCallback, reporter: &Arc<Reporter>) -> NonNull<Slot> {
    let raw = slot.as_ptr();
    // SAFETY: per the contract; writing over the uninitialised closure loses nothing.
    unsafe { (*raw).f.write(f) };
    // SAFETY: as above. Released: the run that finds it armed sees the closure.
    unsafe { (*raw).armed.store(true, Ordering::Release) };
    // SAFETY: as above.
    if !Arc::ptr_eq(unsafe { &(*raw).reporter }, reporter) {
        // SAFETY: as above.
        unsafe { keep_reporter(raw, reporter) };
    }
    slot
}

/// [`take`]'s slow path: this thread's spare if full, else a magazine from the depot (or
/// none). A thread that is exiting takes one slot out of a depot magazine and puts the rest
/// back.
#[inline]
fn refill() -> Option<NonNull<Slot>> {
    let taken = with_free(|slots| {
        if slots.spare.len > 0 {
            std::mem::swap(&mut slots.current, &mut slots.spare);
        } else if may_keep() {
            slots.current = lock(&DEPOT_MAGAZINES).pop().unwrap_or(Magazine::EMPTY);
        } else {
            return None;
        }
        slots.current.pop()
    });
    match taken {
        Some(slot) => slot,
        None => from_depot_exiting(),
    }
}

/// One slot from the depot for a thread whose magazines are gone (it is exiting).
#[cold]
#[inline(never)]
fn from_depot_exiting() -> Option<NonNull<Slot>> {
    let mut depot = lock(&DEPOT_MAGAZINES);
    let magazine = depot.last_mut()?;
    let slot = magazine.pop();
    if magazine.len == 0 {
        depot.pop();
    }
    slot
}

/// A reused slot that last served another stream reports to `reporter` from now on (its
/// old reporter released here). Out of line: a stream's own slots come back to it.
///
/// # Safety
/// `slot` is a live slot that is ours alone.
#[cold]
#[inline(never)]
unsafe fn keep_reporter(slot: *mut Slot, reporter: &Arc<Reporter>) {
    // SAFETY: per the contract.
    unsafe { (*slot).reporter = reporter.clone() };
}

/// Keeps an emptied slot for reuse: in this thread's magazines, or the depot when they
/// are full or the thread is exiting.
///
/// # Safety
/// `slot` is a live slot's pointer, holding no closure, that nothing else uses from now on.
#[inline]
unsafe fn give_back(slot: *mut Slot) {
    // The common case inline: a magazine in use that this slot does not fill.
    let kept = with_free(|slots| {
        let current = &mut slots.current;
        if current.len == 0 || current.len >= MAGAZINE - 1 {
            return false;
        }
        // SAFETY: per the contract.
        unsafe { current.push(slot) };
        true
    });
    if kept != Some(true) {
        // SAFETY: per the contract.
        unsafe { give_back_first_or_last(slot) };
    }
}

/// [`give_back`] with this thread's magazine empty (its first slot: the thread registers
/// its slots' return to the depot at its exit, or, exiting already, sends this one there)
/// or filled by this slot (traded: it becomes the spare, and a full spare goes to the
/// depot).
///
/// # Safety
/// As [`give_back`]'s.
#[cold]
#[inline(never)]
unsafe fn give_back_first_or_last(slot: *mut Slot) {
    let unkept = with_free(|slots| {
        if slots.current.len == 0 && !may_keep() {
            return Some(slot);
        }
        // SAFETY: per the contract.
        unsafe { slots.current.push(slot) };
        if slots.current.len == MAGAZINE {
            let full = std::mem::replace(&mut slots.current, Magazine::EMPTY);
            std::mem::replace(&mut slots.spare, full).deposit();
        }
        None
    });
    if let Some(slot) = unkept.unwrap_or(Some(slot)) {
        let mut single = Magazine::EMPTY;
        // SAFETY: per the contract, the slot is ours to pass on.
        unsafe { single.push(slot) };
        single.retire();
    }
}

/// Queues `f`, reporting to `reporter`, with `launch` (the driver's host-function call,
/// given the slot's address). When the driver refuses, nothing was queued and `f` comes
/// back with the error, for the caller to drop where it may.
#[inline(always)]
pub(super) fn launch(
    reporter: &Arc<Reporter>,
    f: HostCallback,
    launch: impl FnOnce(*mut c_void) -> Result<()>,
) -> std::result::Result<(), (Error, HostCallback)> {
    let slot = take(f, reporter);
    match launch(slot.as_ptr().cast()) {
        Ok(()) => Ok(()),
        // SAFETY: the driver refused the slot, so it is still ours alone.
        Err(e) => Err(unsafe { refused(slot, e) }),
    }
}

/// [`launch`] when the driver refused: the slot's closure comes back with the error, and
/// the slot is kept for reuse. Out of line: the accepted path is the hot one.
///
/// # Safety
/// `slot` is a slot [`take`] filled that no driver holds.
#[cold]
#[inline(never)]
unsafe fn refused(slot: NonNull<Slot>, e: Error) -> (Error, HostCallback) {
    // SAFETY: per the contract, the slot is ours alone and holds the closure `take` wrote,
    // moved out once here (and disarmed: no driver holds it to run it).
    let f = unsafe {
        (*slot.as_ptr()).armed.store(false, Ordering::Relaxed);
        (*slot.as_ptr()).f.assume_init_read()
    };
    // SAFETY: as above; emptied of its closure.
    unsafe { give_back(slot.as_ptr()) };
    (e, f)
}

/// What one call of the trampoline found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a run that found no callback is the driver's fault, to be reported"]
pub enum SlotRun {
    /// The slot's callback ran (this is its one run).
    Ran,
    /// The driver passed a NULL `user`: nothing ran, and the callback it was given for
    /// never will.
    NullUser,
    /// The slot's callback had run already (or was refused, or never queued): the driver
    /// ran one host function twice, or ran it after its stream was done with it. Nothing
    /// ran.
    RanBefore,
}

/// What the trampoline does with one slot: disarms it, moves its closure out, runs `run`
/// with it and the slot's reporter, and keeps the slot for reuse. A NULL `user` or a slot
/// already disarmed runs nothing, and says so.
///
/// # Safety
/// `user` is NULL or a slot's address [`launch`] handed the driver (slots are never freed,
/// so any such address stays a slot).
#[inline(always)]
pub(super) unsafe fn with_slot(user: *mut c_void, run: impl FnOnce(HostCallback, &Reporter)) -> SlotRun {
    let slot = user.cast::<Slot>();
    if slot.is_null() {
        return SlotRun::NullUser;
    }
    // SAFETY: per the contract, a live slot; its `armed` word is only touched atomically.
    // Acquire: pairs with the release of the write that armed it, so the closure is seen.
    if !unsafe { (*slot).armed.swap(false, Ordering::Acquire) } {
        return SlotRun::RanBefore;
    }
    // SAFETY: this run disarmed the slot, so it alone holds it: the closure `take` wrote is
    // moved out once here; its reporter stays until it is given back below.
    let (f, reporter) = unsafe { ((*slot).f.assume_init_read(), &*ptr::addr_of!((*slot).reporter)) };
    run(f, reporter);
    // SAFETY: as above; its closure was moved out, and nothing uses it after this.
    unsafe { give_back(slot) };
    SlotRun::Ran
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter() -> Arc<Reporter> {
        Arc::new(Reporter {
            errors: Arc::default(),
            stream: StreamName { raw: 1, device: DeviceId { kind: BackendKind::Cuda, ordinal: 0 } },
            kind: BackendKind::Cuda,
        })
    }

    thread_local! {
        /// Slots this thread made (rather than reused).
        static MADE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Counts a slot made on this thread; passes its closure through.
    pub(super) fn made_one(f: HostCallback) -> MaybeUninit<HostCallback> {
        MADE.with(|m| m.set(m.get() + 1));
        MaybeUninit::new(f)
    }

    fn made_here() -> usize {
        MADE.with(|m| m.get())
    }

    /// Queues a callback that counts its runs; its slot, as the driver would hold it.
    fn queue_counted(reporter: &Arc<Reporter>, runs: &Arc<std::sync::atomic::AtomicUsize>) -> Queued {
        let r = runs.clone();
        let mut user = std::ptr::null_mut();
        let f: HostCallback = Box::new(move || {
            r.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        launch(reporter, f, |u| {
            user = u;
            Ok(())
        })
        .map_err(|(e, _)| e)
        .unwrap();
        Queued(NonNull::new(user.cast()).unwrap())
    }

    #[test]
    fn a_thread_running_its_own_callbacks_reuses_one_slot() {
        let reporter = reporter();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Fewer under Miri, whose interpretation is some thousand times slower: still far
        // more callbacks than the one slot they need.
        let callbacks = if cfg!(miri) { 300 } else { 10_000 };
        let before = made_here();
        for _ in 0..callbacks {
            let Queued(slot) = queue_counted(&reporter, &runs);
            // SAFETY: the slot `launch` handed out, run once.
            assert_eq!(unsafe { with_slot(slot.as_ptr().cast(), |f, _| f()) }, SlotRun::Ran);
        }
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), callbacks);
        assert!(made_here() - before <= 1, "{} slots made for one in flight", made_here() - before);
    }

    #[test]
    fn slots_given_back_on_the_drivers_thread_return_to_the_enqueuer() {
        // At most IN_FLIGHT callbacks wait for the "driver" thread at once. The enqueuer
        // makes a slot only when its magazines and the depot are empty: every slot then is
        // in flight or in the driver thread's two magazines (or taken by another test's
        // thread from the depot, a few magazines at most) — a bound independent of how the
        // two threads interleave, and far below one slot per callback.
        const IN_FLIGHT: usize = 8;
        // Under Miri fewer, still several times the bound.
        const CALLBACKS: usize = if cfg!(miri) { 3_000 } else { 20_000 };
        let reporter = reporter();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (to_driver, queued) = std::sync::mpsc::sync_channel::<Queued>(IN_FLIGHT);
        let driver = std::thread::spawn(move || {
            for Queued(slot) in queued {
                // SAFETY: each is a slot `launch` handed out, run once.
                assert_eq!(unsafe { with_slot(slot.as_ptr().cast(), |f, _| f()) }, SlotRun::Ran);
            }
        });
        let before = made_here();
        for _ in 0..CALLBACKS {
            to_driver.send(queue_counted(&reporter, &runs)).unwrap();
        }
        drop(to_driver);
        driver.join().unwrap();
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), CALLBACKS);
        let made = made_here() - before;
        assert!(
            made <= IN_FLIGHT + 2 + 8 * MAGAZINE,
            "{made} slots made for {CALLBACKS} callbacks, {IN_FLIGHT} in flight"
        );
    }

    /// A slot handed to a driver, as the driver's thread holds it.
    struct Queued(NonNull<Slot>);
    // SAFETY: a queued slot is run by whichever thread the driver picks (what it holds is
    // `Send`), once.
    unsafe impl Send for Queued {}

    #[test]
    fn an_exiting_threads_slots_go_to_the_depot_and_release_their_reporters() {
        let reporter = reporter();
        // Fewer than a magazine: the thread running them keeps every one.
        let taken: Vec<Queued> = (0..MAGAZINE / 2).map(|_| Queued(take(Box::new(|| {}), &reporter))).collect();
        assert_eq!(Arc::strong_count(&reporter), 1 + taken.len(), "each slot holds the reporter");
        let ran = std::thread::spawn(move || {
            let mut ran = 0;
            for Queued(slot) in taken {
                // SAFETY: each is a slot `take` filled, run once.
                assert_eq!(unsafe { with_slot(slot.as_ptr().cast(), |f, _| f()) }, SlotRun::Ran);
                ran += 1;
            }
            ran
        })
        .join()
        .unwrap();
        assert_eq!(ran, MAGAZINE / 2);
        assert_eq!(Arc::strong_count(&reporter), 1, "the exited thread's slots kept the stream's reporter");
    }

    #[test]
    fn a_refused_slot_gives_its_closure_back_and_is_kept() {
        let reporter = reporter();
        let held = Arc::new(());
        let h = held.clone();
        let refused =
            launch(&reporter, Box::new(move || drop(h)), |_| Err(Error::unsupported(BackendKind::Cuda, "no")));
        let Err((_, f)) = refused else { panic!("the refusal was lost") };
        assert_eq!(Arc::strong_count(&held), 2, "the closure came back unrun");
        f();
        assert_eq!(Arc::strong_count(&held), 1);
        // The slot is this thread's free one now, and serves the next callback.
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = ran.clone();
        let mut user = std::ptr::null_mut();
        launch(&reporter, Box::new(move || r.store(true, std::sync::atomic::Ordering::SeqCst)), |u| {
            user = u;
            Ok(())
        })
        .map_err(|(e, _)| e)
        .unwrap();
        // SAFETY: the slot `launch` handed out, run once.
        assert_eq!(unsafe { with_slot(user, |f, _| f()) }, SlotRun::Ran);
        assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn a_second_run_a_run_of_a_refused_slot_and_a_null_user_run_nothing() {
        let reporter = reporter();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = |runs: &Arc<std::sync::atomic::AtomicUsize>| {
            let r = runs.clone();
            Box::new(move || {
                r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }) as HostCallback
        };
        let mut user = std::ptr::null_mut();
        launch(&reporter, counted(&runs), |u| {
            user = u;
            Ok(())
        })
        .map_err(|(e, _)| e)
        .unwrap();
        // SAFETY: the slot `launch` handed out: run once, then again (a driver's fault;
        // slots are never freed, so the second run reads a live slot).
        unsafe {
            assert_eq!(with_slot(user, |f, _| f()), SlotRun::Ran);
            assert_eq!(with_slot(user, |f, _| f()), SlotRun::RanBefore);
        }
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1, "the second run ran the callback again");
        // A refused slot is disarmed: a run of it afterwards takes nothing.
        let mut refused_user = std::ptr::null_mut();
        let refused = launch(&reporter, counted(&runs), |u| {
            refused_user = u;
            Err(Error::unsupported(BackendKind::Cuda, "no"))
        });
        let Err((_, f)) = refused else { panic!("the refusal was lost") };
        drop(f);
        // SAFETY: as above.
        assert_eq!(unsafe { with_slot(refused_user, |f, _| f()) }, SlotRun::RanBefore);
        // SAFETY: a NULL user is never dereferenced.
        assert_eq!(unsafe { with_slot(std::ptr::null_mut(), |f, _| f()) }, SlotRun::NullUser);
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
