//! The mutants' streams and events: `gpuport-queue`'s, with the stream- and event-level
//! flaws.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use gpuport_core::{
    Buffer, DeviceId, Error, Event, EventFlags, HostCallback, HostFunction, Kernel, KernelArg, LaunchConfig, Ownership,
    Result, Stream, StreamFlags,
};
use gpuport_queue::{host_translator, EventState, QueueEvent, QueueStream, WorkQueue};

use crate::{flaw, MutantBackend, MutantDevice};

/// One stream: its queue, a second queue for the out-of-order mutant, and whether
/// dropping it destroys the queue (the flawed wrapper).
pub(crate) struct StreamInner {
    main: QueueStream,
    second: Option<QueueStream>,
    turn: AtomicUsize,
    destroy_on_drop: bool,
    /// The error the flawed synchronize keeps reporting.
    kept_error: Mutex<Option<Error>>,
    /// The queue of its own (a pool thread while it has work) that the late-telling port
    /// completes its events on.
    notifier: OnceLock<WorkQueue>,
    /// The C host functions the deferring port runs at its next synchronize.
    deferred: Mutex<Vec<HostCallback>>,
    /// The arguments of the first launch, which the reusing port passes to every launch.
    launch_args: OnceLock<Vec<KernelArg>>,
}

impl StreamInner {
    pub(crate) fn new(main: QueueStream, second: Option<QueueStream>, destroy_on_drop: bool) -> Self {
        StreamInner {
            main,
            second,
            turn: AtomicUsize::new(0),
            destroy_on_drop,
            kept_error: Mutex::default(),
            notifier: OnceLock::new(),
            deferred: Mutex::default(),
            launch_args: OnceLock::new(),
        }
    }

    pub(crate) fn main(&self) -> &QueueStream {
        &self.main
    }

    /// The queue the next operation goes to: the main one, or the two in turn.
    fn next(&self) -> &QueueStream {
        match &self.second {
            Some(second) if self.turn.fetch_add(1, Ordering::Relaxed) % 2 == 1 => second,
            _ => self.main(),
        }
    }

    fn all(&self) -> impl Iterator<Item = &QueueStream> {
        std::iter::once(&self.main).chain(&self.second)
    }

    pub(crate) fn to_borrowed(&self) -> StreamInner {
        let second = self.second.as_ref().map(QueueStream::to_borrowed);
        StreamInner::new(self.main.to_borrowed(), second, false)
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.destroy_on_drop {
            self.main.queue().close();
        }
    }
}

/// A stream of mutant `F`.
pub struct MutantStream<const F: u8>(Arc<StreamInner>);

impl<const F: u8> Clone for MutantStream<F> {
    fn clone(&self) -> Self {
        MutantStream(self.0.clone())
    }
}

impl<const F: u8> MutantStream<F> {
    pub(crate) fn new(inner: Arc<StreamInner>) -> Self {
        MutantStream(inner)
    }
}

impl<const F: u8> Stream for MutantStream<F> {
    type Backend = MutantBackend<F>;

    fn device_id(&self) -> DeviceId {
        self.0.main().device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.main().ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.main().raw_handle()
    }
    fn flags(&self) -> StreamFlags {
        if F == flaw::STREAM_FLAGS_LOST {
            return StreamFlags::empty();
        }
        self.0.main().flags()
    }
    fn priority(&self) -> i32 {
        0
    }
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        if F == flaw::COPY_DROPS_BUFFERS {
            gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
            let s = host_translator("copy")(src, src_offset, len)?;
            let d = host_translator("copy")(dst, dst_offset, len)?;
            // SAFETY: the flaw: the ranges were checked, but the copy keeps neither buffer,
            // so memory its caller drops goes back to the queue kit while the copy waits.
            // The case that catches it uses blocks of 64 KiB, which the kit's cache keeps
            // allocated and hands out again: the copy then reads and writes another
            // buffer's bytes (what the case sees), never memory returned to the system.
            return unsafe { self.0.next().queue().copy(s, d, len, [None, None]) };
        }
        if F == flaw::LARGE_COPY_AHEAD && len >= 16 << 20 {
            // A large copy (a fast path of its own, say) runs at once, ahead of the work
            // queued before it.
            gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
            let s = host_translator("copy")(src, src_offset, len)?;
            let d = host_translator("copy")(dst, dst_offset, len)?;
            // SAFETY: both ranges were checked against their live buffers, which the
            // caller holds for the call; the flaw is only when the bytes move.
            unsafe { std::ptr::copy(s, d, len) };
            return Ok(());
        }
        if F == flaw::PINNED_COPY_AT_SYNCHRONIZE && dst.memory() == gpuport_core::MemoryKind::PinnedHost {
            // Staged, and flushed when the stream is next synchronized.
            gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
            let (inner, src, dst) = (self.0.clone(), src.clone(), dst.clone());
            let flush = move || {
                let _ = inner.main().copy(&src, src_offset, &dst, dst_offset, len, host_translator("copy"));
            };
            self.0.deferred.lock().unwrap_or_else(|p| p.into_inner()).push(Box::new(flush));
            return Ok(());
        }
        let src_offset = if F == flaw::COPY_IGNORES_OFFSET { 0 } else { src_offset };
        // Only the first chunk of a long copy is queued.
        let len = if F == flaw::LARGE_COPY_TRUNCATED { len.min(32 << 20) } else { len };
        // A copy between the devices moves one 4 KiB page.
        let len = if F == flaw::PEER_COPY_TRUNCATED && src.device() != dst.device() { len.min(4096) } else { len };
        if F == flaw::PEER_COPY_ON_LEGACY_STREAM && src.device() != dst.device() {
            // Queued on the destination device's legacy default stream instead.
            let device = MutantDevice::<F>::shared(dst.device().ordinal)
                .ok_or_else(|| Error::invalid_argument("a copy to another backend's memory"))?;
            return device.legacy()?.main().copy(src, src_offset, dst, dst_offset, len, host_translator("copy"));
        }
        self.0.next().copy(src, src_offset, dst, dst_offset, len, host_translator("copy"))
    }
    fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &gpuport_core::Copy2d) -> Result<()> {
        gpuport_core::check_copy_2d(src, dst, copy)?;
        let packed = (F == flaw::LARGE_2D_PACKED && copy.width.saturating_mul(copy.height) >= 16 << 20)
            || (F == flaw::PEER_2D_PACKED && src.device() != dst.device() && !copy.is_empty());
        if packed {
            // A large 2D copy (a fast path of its own, say) moves the rows as one block,
            // ignoring both pitches.
            return self.copy(src, copy.src_offset, dst, copy.dst_offset, copy.width * copy.height);
        }
        // Otherwise as the trait's provided method: a copy per row.
        if copy.is_empty() {
            return Ok(());
        }
        (0..copy.height).try_for_each(|row| {
            let (s, d) = copy.row_offsets(row);
            self.copy(src, s, dst, d, copy.width)
        })
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        // Rounds an odd length up to even where the buffer has room: one byte too many.
        let len = if F == flaw::FILL_OVERRUNS && len % 2 == 1 && offset + len < dst.len() { len + 1 } else { len };
        // Sets whole 16-bit words only: an odd length loses its last byte.
        let len = if F == flaw::MEMSET_EVEN_LENGTH { len & !1 } else { len };
        if F == flaw::FOREIGN_MEMSET_IGNORED && dst.device() != self.device_id() {
            return Ok(());
        }
        self.0.next().memset(dst, offset, len, value, host_translator("memset"))
    }
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        // A large write (a fast path of its own, say) forgets the destination offset.
        let dst_offset = if F == flaw::LARGE_WRITE_AT_ZERO && src.len() > 64 << 10 { 0 } else { dst_offset };
        self.0.next().write(src, dst, dst_offset, host_translator("write"))
    }
    fn read(&self, src: &Buffer, src_offset: usize, mut dst: &mut [u8]) -> Result<()> {
        if F == flaw::BLOCKING_READ_AT_ONCE && !self.flags().contains(StreamFlags::NON_BLOCKING) && self.query()? {
            // Idle, so read on the calling thread now: the legacy stream is not asked.
            let from = host_translator("read")(src, src_offset, dst.len())?;
            // SAFETY: `from` is `dst.len()` readable bytes of the live buffer `src`, which
            // the caller holds for the call; `dst` is the caller's own slice.
            unsafe { std::ptr::copy_nonoverlapping(from.cast_const(), dst.as_mut_ptr(), dst.len()) };
            return Ok(());
        }
        if F == flaw::READ_PAST_END_CLAMPED {
            // Reads what there is instead of refusing a range past the end.
            let there = src.len().saturating_sub(src_offset).min(dst.len());
            dst = &mut dst[..there];
        }
        let src_offset = if F == flaw::READ_OFFSET_IGNORED { 0 } else { src_offset };
        self.0.next().read(src, src_offset, dst, host_translator("read"))
    }
    fn record(&self, event: &MutantEvent<F>) -> Result<()> {
        if F == flaw::EVENT_TOLD_LATE {
            // The event is told by a notifier of its own once the stream has passed the
            // record, a moment later (as an interrupt thread would): it still completes
            // after the work before it, but the stream may be done while it is not yet.
            let passed = EventState::new(self.device_id(), EventFlags::DISABLE_TIMING);
            self.0.next().queue().record(&passed)?;
            if self.0.notifier.get().is_none() {
                let _ = self.0.notifier.set(WorkQueue::new("the late notifier".into())?);
            }
            let notifier = self.0.notifier.get().ok_or_else(|| Error::invalid_argument("no notifier"))?;
            notifier.wait(&passed)?;
            notifier.callback(Box::new(|| std::thread::sleep(Duration::from_micros(200))))?;
            return notifier.record(event.queue.state());
        }
        self.0.next().record(&event.queue)
    }
    fn wait(&self, event: &MutantEvent<F>) -> Result<()> {
        if F == flaw::NOOP_WAIT || (F == flaw::UNTIMED_WAIT_IGNORED && event.flags.contains(EventFlags::DISABLE_TIMING))
        {
            return Ok(());
        }
        // Ignores an event of another device.
        if F == flaw::NO_WAIT_ACROSS_DEVICES && event.queue.device_id() != self.0.main().device_id() {
            return Ok(());
        }
        if F == flaw::UNRECORDED_WAIT_BLOCKS && event.queue.state().recorded_generation() == 0 {
            // Treated as pending until recorded: the stream is held until a record has
            // completed (given up after 30 s, so a run ends).
            let event = event.queue.clone();
            return self.0.next().host_callback(Box::new(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while std::time::Instant::now() < deadline
                    && !(event.state().recorded_generation() > 0 && event.query().unwrap_or(true))
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }));
        }
        if F == flaw::WAIT_FOR_LATEST_RECORD {
            // Looks at the event only when the wait runs: whatever record is latest then.
            event.queue.query()?; // a destroyed event is still refused
            let event = event.queue.clone();
            return self.0.next().host_callback(Box::new(move || {
                let _ = event.synchronize();
            }));
        }
        self.0.next().wait(&event.queue)
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        if F == flaw::LOST_PANICS {
            return self.0.next().host_callback(Box::new(move || {
                let _ = catch_unwind(AssertUnwindSafe(f));
            }));
        }
        self.0.next().host_callback(f)
    }
    unsafe fn host_function(&self, func: HostFunction, user: *mut std::ffi::c_void) -> Result<()> {
        // SAFETY: forwarded: the caller's contract is the closure's.
        let f = unsafe { gpuport_core::host_function_callback(func, user) };
        if F == flaw::HOST_FUNCTIONS_AT_SYNCHRONIZE {
            self.0.deferred.lock().unwrap_or_else(|p| p.into_inner()).push(f);
            return Ok(());
        }
        self.host_callback(f)
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        if F == flaw::ZERO_GRID_NOOP && (config.grid.contains(&0) || config.block.contains(&0)) {
            return Ok(());
        }
        if F == flaw::LAUNCH_ARGS_REUSED {
            // The argument block is packed once, at the first launch, and kept.
            let kept = self.0.launch_args.get_or_init(|| args.to_vec());
            return self.0.next().launch(kernel, config, kept, host_translator("launch"));
        }
        self.0.next().launch(kernel, config, args, host_translator("launch"))
    }
    fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool {
        if F == flaw::RUN_IF_IDLE_WHILE_BUSY {
            f();
            return true;
        }
        // Work split over two queues cannot be held as one: decline.
        self.0.second.is_none() && self.0.main().run_if_idle(f)
    }
    fn query(&self) -> Result<bool> {
        if F == flaw::QUERY_ALWAYS_DONE {
            return Ok(true);
        }
        self.0.all().try_fold(true, |done, q| Ok(done && q.query()?))
    }
    fn synchronize(&self) -> Result<()> {
        let kept = self.0.kept_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(error) = kept {
            return Err(error);
        }
        let mut result = self.0.all().try_for_each(QueueStream::synchronize);
        // What the deferring ports held back runs now (and what it queued is waited for).
        let deferred = std::mem::take(&mut *self.0.deferred.lock().unwrap_or_else(|p| p.into_inner()));
        if !deferred.is_empty() {
            deferred.into_iter().for_each(|f| f());
            result = result.and_then(|()| self.0.all().try_for_each(QueueStream::synchronize));
        }
        // Told it is on its own worker, returns as if done.
        let result = match result {
            Err(Error::WouldDeadlock { .. }) if F == flaw::OWN_CALLBACK_SYNC_PASSES => Ok(()),
            result => result,
        };
        if let (Err(error), flaw::STREAM_ERROR_KEPT) = (&result, F) {
            // Reported, and kept: every later synchronize reports it again.
            *self.0.kept_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(error.clone());
        }
        result
    }
}

/// An event of mutant `F`.
pub struct MutantEvent<const F: u8> {
    queue: QueueEvent,
    /// The flags it was created with (the timing mutant's queue event has others).
    flags: EventFlags,
    claims_ownership: bool,
}

impl<const F: u8> Clone for MutantEvent<F> {
    fn clone(&self) -> Self {
        MutantEvent { queue: self.queue.clone(), flags: self.flags, claims_ownership: self.claims_ownership }
    }
}

impl<const F: u8> MutantEvent<F> {
    pub(crate) fn new(queue: QueueEvent, flags: EventFlags, claims_ownership: bool) -> Self {
        MutantEvent { queue, flags, claims_ownership }
    }
}

impl<const F: u8> Event for MutantEvent<F> {
    type Backend = MutantBackend<F>;

    fn device_id(&self) -> DeviceId {
        self.queue.device_id()
    }
    fn ownership(&self) -> Ownership {
        if self.claims_ownership {
            return Ownership::Owned;
        }
        self.queue.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.queue.raw_handle()
    }
    fn flags(&self) -> EventFlags {
        self.flags
    }
    fn query(&self) -> Result<bool> {
        if F == flaw::QUERY_ALWAYS_DONE {
            return Ok(true);
        }
        if F == flaw::UNRECORDED_EVENT_PENDING && self.queue.state().recorded_generation() == 0 {
            return Ok(false);
        }
        match self.queue.query() {
            // The object behind the handle is kept and asked, its owner's destroy unseen.
            Err(Error::InvalidHandle { .. }) if F == flaw::STALE_EVENT_ANSWERS => Ok(true),
            result => result,
        }
    }
    fn synchronize(&self) -> Result<()> {
        self.queue.synchronize()
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        if F == flaw::FAKE_ELAPSED {
            return Ok(1.0);
        }
        if F == flaw::ELAPSED_NEVER_NEGATIVE {
            return self.queue.elapsed_ms(&end.queue).map(f32::abs);
        }
        if F == flaw::ELAPSED_IN_MICROSECONDS {
            return self.queue.elapsed_ms(&end.queue).map(|ms| ms * 1000.0);
        }
        if F == flaw::ELAPSED_FROM_EARLIER_RECORD {
            // The flawed port keeps the last figure it gave for a pair of events and gives
            // it again while a newer record of either is pending.
            static GIVEN: Mutex<BTreeMap<(usize, usize), f32>> = Mutex::new(BTreeMap::new());
            let key = (self.raw_handle(), end.raw_handle());
            let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
            return match self.queue.elapsed_ms(&end.queue) {
                Ok(ms) => {
                    given.insert(key, ms);
                    Ok(ms)
                }
                Err(Error::NotReady { what }) => given.get(&key).copied().ok_or(Error::NotReady { what }),
                Err(e) => Err(e),
            };
        }
        match self.queue.elapsed_ms(&end.queue) {
            Err(Error::NotReady { .. }) if F == flaw::ELAPSED_ZERO_BEFORE_DONE => Ok(0.0),
            result => result,
        }
    }
}
