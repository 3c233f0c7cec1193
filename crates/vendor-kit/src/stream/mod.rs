//! The stream machinery every vendor backend needs, written once and generic over the
//! vendor's calls ([`VendorCalls`]): a stream handle with ownership, flags and priority;
//! the handles its queued work keeps alive ([`crate::parking`]); the first error of work
//! found outside a call (a panicking host callback, a failed stream-ordered free), kept
//! for the stream's next synchronize and, sticky, for the device's; host callbacks run by
//! one trampoline that never unwinds and never drops a handle on the driver's thread;
//! blocking calls refused from inside a callback; the default streams handed out as one
//! stream per device (legacy) and per thread (per-thread).
//!
//! A dropped stream handle never blocks and never synchronizes a stream it does not own:
//! what its work still holds is released by a host callback queued behind that work
//! (which hands the drop to the release thread).
//!
//! The vendor's `sys` tables and device queries stay in its backend crate; it implements
//! [`VendorCalls`] with one checked `result` call per method. The `Stream` data path over
//! those calls (copies, memsets, blocking reads and writes, records, waits, launches) is
//! in the `data_path` module, and `impl_vendor_stream!` writes a backend's `Stream` impl from it;
//! the host-callback trampoline is in the `callback` module.

mod data_path;

/// The largest pitch a 2D copy hands the driver: 2³¹ − 1 bytes, what CUDA and HIP devices
/// report as their maximum (`CU_DEVICE_ATTRIBUTE_MAX_PITCH`, `hipDeviceAttributeMaxPitch`;
/// the drivers refuse a larger one). A 2D copy with a larger pitch is queued row by row.
pub const MAX_PITCH: usize = i32::MAX as usize;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;

use gpuport_core::release::Deferred;
use gpuport_core::{Buffer, DeviceId, Error, HostCallback, LiveList, Ownership, Result, StreamFlags};

use crate::callback::{refuse_in_callback, IN_CALLBACK};
use crate::callback_slots::{launch, Reporter, StreamName};
use crate::calls::{RawHandle, VendorCalls};
use crate::device::VendorDevice;
use crate::lock;
use crate::parking::{Fence, Keep, Parked};
use crate::stream_errors::StreamErrors;

/// What one device knows of its streams: their kept errors (dropped streams' included,
/// until reported) and the default streams handed out.
pub struct DeviceStreams<V: VendorCalls> {
    errors: Mutex<LiveList<Arc<StreamErrors>>>,
    legacy: Mutex<Weak<Deferred<StreamState<V>>>>,
    per_thread: Mutex<HashMap<ThreadId, Weak<Deferred<StreamState<V>>>>>,
}

impl<V: VendorCalls> Default for DeviceStreams<V> {
    fn default() -> Self {
        DeviceStreams { errors: Mutex::default(), legacy: Mutex::new(Weak::new()), per_thread: Mutex::default() }
    }
}

impl<V: VendorCalls> DeviceStreams<V> {
    fn track(&self, errors: &Arc<StreamErrors>) {
        // Streams that are gone and have nothing left to report are forgotten as the list
        // grows (a constant cost per stream on average, however many live).
        lock(&self.errors).push(errors.clone(), StreamErrors::still_reports);
    }

    /// `Device::synchronize`: waits for the device, then reports the first kept error of
    /// its streams — without clearing it while the stream lives (sticky; the stream's own
    /// synchronize clears it), clearing it for a dropped stream (reported once, here).
    /// Refused from inside a host callback.
    pub fn synchronize(&self, dev: &V) -> Result<()> {
        refuse_in_callback(dev.kind(), "Device::synchronize")?;
        dev.bind()?;
        dev.device_synchronize()?;
        let all: Vec<Arc<StreamErrors>> = {
            let mut all = lock(&self.errors);
            // A synchronize looks at every stream anyway: forget the gone ones now.
            all.prune(StreamErrors::still_reports);
            all.items().to_vec()
        };
        let mut first = Ok(());
        for errors in all {
            let mut kept = lock(&errors.first);
            let err = if errors.orphaned.load(Ordering::SeqCst) { kept.take() } else { kept.clone() };
            if let (Some(err), true) = (err, first.is_ok()) {
                first = Err(err);
            }
        }
        first
    }
}

/// A vendor stream handle, destroyed (when owned) once nothing refers to it any more:
/// neither the stream's state nor a buffer allocated stream-ordered on it. Such a buffer
/// is freed on its own stream, in that stream's order — on any other stream the free could
/// run before the allocation, or before work the allocating stream still has queued on
/// the memory — so the stream must outlive it. The buffer holds only this handle, never
/// the stream's state, so a buffer parked on its own stream forms no cycle.
pub struct RawStream<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    raw: V::Stream,
    owned: bool,
}

// SAFETY: vendor stream handles may be used from any thread.
unsafe impl<V: VendorCalls> Send for RawStream<V> {}
// SAFETY: as above; the handle is immutable.
unsafe impl<V: VendorCalls> Sync for RawStream<V> {}

impl<V: VendorCalls> Drop for RawStream<V> {
    fn drop(&mut self) {
        if !self.owned || self.dev.bind().is_err() {
            return;
        }
        // Queued work still completes (the vendors' stream destroy does not wait).
        if let Err(e) = self.dev.stream_destroy(self.raw) {
            log::warn!("{e}");
        }
    }
}

/// One vendor stream's state, shared by its handles.
pub struct StreamState<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    raw: V::Stream,
    owned: bool,
    /// Destroys the stream once the last of its users is gone.
    handle: Arc<Deferred<RawStream<V>>>,
    flags: StreamFlags,
    priority: i32,
    /// For the per-thread default stream: the only thread whose stream it is.
    thread: Option<ThreadId>,
    errors: Arc<StreamErrors>,
    parked: Mutex<Parked<V::Event>>,
    /// What host callbacks report to (each queued callback holds it too).
    reporter: Arc<Reporter>,
}

// SAFETY: vendor stream and event handles may be used from any thread (the per-thread
// default stream checks its thread before use); the parked lists are behind a mutex.
unsafe impl<V: VendorCalls> Send for StreamState<V> {}
// SAFETY: as above.
unsafe impl<V: VendorCalls> Sync for StreamState<V> {}

/// The stream seen as a [`Fence`] for its parked batches.
struct StreamFence<'a, V: VendorCalls>(&'a StreamState<V>);

impl<V: VendorCalls> Fence for StreamFence<'_, V> {
    type Handle = V::Event;
    fn seal(&self) -> Result<V::Event> {
        self.0.dev.fence_event(self.0.raw)
    }
    fn done(&self, event: V::Event) -> Result<bool> {
        self.0.dev.event_done(event)
    }
    fn destroy(&self, event: V::Event) {
        if let Err(e) = self.0.dev.event_destroy(event) {
            log::warn!("{e}");
        }
    }
}

impl<V: VendorCalls> Drop for StreamState<V> {
    fn drop(&mut self) {
        self.errors.orphaned.store(true, Ordering::SeqCst);
        if self.dev.bind().is_err() {
            return;
        }
        let keep = lock(&self.parked).take_all(&StreamFence(self));
        if !keep.is_empty() {
            self.release_after_work(keep);
        }
        // The stream itself is destroyed with `handle`, once no stream-ordered buffer of
        // it is left either.
    }
}

impl<V: VendorCalls> StreamState<V> {
    /// Releases `keep` once the stream's queued work has run, without blocking: a host
    /// callback queued behind that work drops it (on the release thread). Where that is
    /// impossible (the runtime refuses, or the per-thread stream of another thread), waits.
    fn release_after_work(&self, keep: Vec<Keep>) {
        let here = self.thread.is_none_or(|t| t == std::thread::current().id());
        if here {
            let last: HostCallback = Box::new(move || drop(keep));
            if let Err((e, refused)) =
                launch(&self.reporter, last, |user| self.dev.launch_host_callback(self.raw, user))
            {
                log::warn!("releasing a dropped stream's buffers: {e}; waiting for the stream instead");
                if let Err(e) = self.dev.stream_synchronize(self.raw) {
                    log::warn!("{e}");
                }
                drop(refused);
            }
        } else if let Err(e) = self.dev.device_synchronize() {
            // The per-thread stream of another thread cannot be named from here.
            log::warn!("releasing a dropped per-thread stream's buffers: {e}");
        }
    }
}

/// The error of a host callback the driver refused; the closure, never run, is dropped
/// here (on the enqueuing thread). Out of line: the accepted launch is the hot path.
#[cold]
#[inline(never)]
fn drop_refused((e, f): (Error, HostCallback)) -> Error {
    drop(f);
    e
}

/// A vendor stream handle: cheap to clone; an owned stream is destroyed (after its queued
/// work) when its last handle drops, on an ordinary thread (never a driver callback's).
pub struct VendorStream<V: VendorCalls> {
    inner: Arc<Deferred<StreamState<V>>>,
}

impl<V: VendorCalls> Clone for VendorStream<V> {
    fn clone(&self) -> Self {
        VendorStream { inner: self.inner.clone() }
    }
}

impl<V: VendorCalls> VendorStream<V> {
    /// A handle to stream `raw` of `dev`; `owned` streams are destroyed with their last
    /// handle.
    pub fn new(dev: &Arc<VendorDevice<V>>, raw: V::Stream, owned: bool, flags: StreamFlags, priority: i32) -> Self {
        Self::with_thread(dev, raw, owned, flags, priority, None)
    }

    fn with_thread(
        dev: &Arc<VendorDevice<V>>,
        raw: V::Stream,
        owned: bool,
        flags: StreamFlags,
        priority: i32,
        thread: Option<ThreadId>,
    ) -> Self {
        let errors = Arc::new(StreamErrors::default());
        dev.streams().track(&errors);
        let name = StreamName { raw: raw.to_raw(), device: dev.device_id() };
        let reporter = Arc::new(Reporter { errors: errors.clone(), stream: name, kind: dev.kind() });
        let handle = Arc::new(Deferred::new(RawStream { dev: dev.clone(), raw, owned }));
        let state = StreamState {
            dev: dev.clone(),
            raw,
            owned,
            handle,
            flags,
            priority,
            thread,
            errors,
            parked: Mutex::default(),
            reporter,
        };
        VendorStream { inner: Arc::new(Deferred::new(state)) }
    }

    /// The legacy default stream (`raw`): one stream per device while a handle to it
    /// lives, borrowed.
    pub fn legacy_default(dev: &Arc<VendorDevice<V>>, raw: V::Stream) -> Self {
        let mut slot = lock(&dev.streams().legacy);
        if let Some(inner) = slot.upgrade() {
            return VendorStream { inner };
        }
        let stream = Self::new(dev, raw, false, StreamFlags::empty(), 0);
        *slot = Arc::downgrade(&stream.inner);
        stream
    }

    /// The calling thread's per-thread default stream (`raw`): one per thread while a
    /// handle to it lives, borrowed, and refused on any other thread (the handle means
    /// "the calling thread's stream").
    pub fn per_thread_default(dev: &Arc<VendorDevice<V>>, raw: V::Stream) -> Self {
        let thread = std::thread::current().id();
        let mut all = lock(&dev.streams().per_thread);
        all.retain(|_, weak| weak.strong_count() > 0);
        if let Some(inner) = all.get(&thread).and_then(Weak::upgrade) {
            return VendorStream { inner };
        }
        let stream = Self::with_thread(dev, raw, false, StreamFlags::empty(), 0, Some(thread));
        all.insert(thread, Arc::downgrade(&stream.inner));
        stream
    }

    /// The device context.
    pub fn dev(&self) -> &Arc<VendorDevice<V>> {
        &self.inner.dev
    }
    /// The vendor handle, once the calling thread may use it (not a host callback's; the
    /// per-thread default stream only on its own thread) and the device is current.
    #[inline(always)]
    pub fn raw(&self) -> Result<V::Stream> {
        // Every stream call passes here. The common case costs one thread-local read and one
        // field test (not inside a host callback, not a per-thread default stream); the
        // refusals are decided out of line, so a hot call keeps a small frame.
        if self.caller_may_be_refused() {
            self.check_caller()?;
        }
        self.inner.dev.bind()?;
        Ok(self.inner.raw)
    }

    /// Whether the caller must be checked before a stream call: it is inside a host
    /// callback (of any backend), or the stream is a per-thread default stream. One
    /// thread-local read and one field test; the checks themselves are [`Self::check_caller`].
    #[inline(always)]
    fn caller_may_be_refused(&self) -> bool {
        IN_CALLBACK.with(Cell::get).is_some() || self.inner.thread.is_some()
    }

    /// [`VendorStream::raw`]'s refusals: a call inside one of this backend's host callbacks,
    /// or on another thread's per-thread default stream.
    #[inline(never)]
    fn check_caller(&self) -> Result<()> {
        if IN_CALLBACK.with(Cell::get) == Some(self.inner.dev.kind()) {
            return Err(self.refused_in_callback());
        }
        if let Some(owner) = self.inner.thread {
            if owner != std::thread::current().id() {
                return Err(self.refused_other_thread());
            }
        }
        Ok(())
    }

    #[cold]
    fn refused_in_callback(&self) -> Error {
        Error::invalid_argument(format!(
            "a call on a stream of {} inside a host callback (the driver forbids it; queue the work instead)",
            self.inner.dev.device_id()
        ))
    }

    #[cold]
    fn refused_other_thread(&self) -> Error {
        Error::invalid_argument(format!(
            "the per-thread default stream of {} belongs to the thread that asked for it; \
             ask for it again on this thread",
            self.inner.dev.device_id()
        ))
    }
    /// True for the per-thread default stream (a handle that means "the calling thread's
    /// stream", so work that outlives the call must not name it from another thread).
    pub fn is_per_thread(&self) -> bool {
        self.inner.thread.is_some()
    }
    /// The vendor handle's value, without checks (for display and comparisons).
    pub fn raw_value(&self) -> usize {
        self.inner.raw.to_raw()
    }
    /// Whether the handle owns the stream.
    pub fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.inner.owned)
    }
    /// Creation flags.
    pub fn flags(&self) -> StreamFlags {
        self.inner.flags
    }
    /// Priority (after clamping).
    pub fn priority(&self) -> i32 {
        self.inner.priority
    }
    /// The device.
    pub fn device_id(&self) -> DeviceId {
        self.inner.dev.device_id()
    }
    /// The stream's kept errors (a stream-ordered free records its failure here).
    pub fn errors(&self) -> &Arc<StreamErrors> {
        &self.inner.errors
    }
    /// The stream's handle alone, for a buffer allocated stream-ordered on it: it keeps
    /// the vendor stream (not its state) alive until the buffer is freed on it.
    pub fn handle_keeper(&self) -> Arc<dyn Send + Sync> {
        self.inner.handle.clone()
    }

    /// The device address of `len` bytes at `offset` of a buffer this stream may copy to
    /// or from: memory of any device of its backend, or host-accessible memory (pinned,
    /// managed, another backend's pinned). Anything else is `BackendMismatch`.
    pub fn reachable_addr(&self, buffer: &Buffer, offset: usize, len: usize, op: &'static str) -> Result<u64> {
        if buffer.device().kind == self.inner.dev.kind() || buffer.is_host_accessible() {
            return buffer.range_addr(offset, len);
        }
        Err(Error::BackendMismatch {
            operation: op,
            expected: format!("{} or host-accessible memory", self.inner.dev.kind()),
            found: format!("{:?} memory of {}", buffer.memory(), buffer.device()),
        })
    }

    /// `BackendMismatch` unless `buffer` is memory of this backend (memset targets, kernel
    /// arguments).
    pub fn own_memory(&self, buffer: &Buffer, op: &'static str) -> Result<()> {
        if buffer.device().kind != self.inner.dev.kind() {
            return Err(Error::mismatch(op, self.inner.dev.kind(), buffer.device()));
        }
        Ok(())
    }

    /// Keeps the handles of work just queued alive until an event after it completes.
    pub fn park(&self, items: impl IntoIterator<Item = Keep>) -> Result<()> {
        lock(&self.inner.parked).park(items, &StreamFence(&self.inner))
    }

    /// `Stream::host_callback`: `f` runs on the driver's callback thread when the stream
    /// reaches it, inside `catch_unwind` (a panic is kept as the stream's error), and what
    /// it drops is released on the release thread.
    ///
    /// Every host callback passes here, so the common case is inlined into the backend's
    /// call and holds as little as it can: the caller's checks that may refuse, and
    /// everything after a refused launch, are out of line and take the closure along.
    #[inline(always)]
    pub fn host_callback(&self, f: HostCallback) -> Result<()> {
        if self.caller_may_be_refused() {
            return self.host_callback_checked(f);
        }
        self.queue_host_callback(f)
    }

    /// [`VendorStream::host_callback`] from a host callback or on a per-thread default
    /// stream: the caller is checked first.
    #[inline(never)]
    fn host_callback_checked(&self, f: HostCallback) -> Result<()> {
        self.check_caller()?;
        self.queue_host_callback(f)
    }

    /// Hands `f` to the driver in a slot, the device bound first.
    #[inline(always)]
    fn queue_host_callback(&self, f: HostCallback) -> Result<()> {
        let inner = &self.inner;
        let launched = launch(&inner.reporter, f, |user| {
            inner.dev.bind()?;
            inner.dev.launch_host_callback(inner.raw, user)
        });
        match launched {
            Ok(()) => Ok(()),
            Err(refused) => Err(drop_refused(refused)),
        }
    }

    /// `Stream::query`. As in [`VendorStream::host_callback`], the caller's checks (inside
    /// a host callback, on a per-thread default stream) are decided out of line whole, so
    /// a query answered from memory (a plugin's progress counters) inlines into its caller
    /// with no frame of its own.
    #[inline]
    pub fn query(&self) -> Result<bool> {
        if self.caller_may_be_refused() {
            return self.query_checked();
        }
        self.inner.dev.bind()?;
        self.inner.dev.stream_done(self.inner.raw)
    }

    /// [`VendorStream::query`] from a host callback or on a per-thread default stream.
    #[inline(never)]
    fn query_checked(&self) -> Result<bool> {
        let raw = self.raw()?;
        self.inner.dev.stream_done(raw)
    }

    /// `Stream::synchronize`: waits, releases what the work kept, and reports (once) the
    /// first error of work found outside a call. Refused inside a host callback.
    pub fn synchronize(&self) -> Result<()> {
        refuse_in_callback(self.inner.dev.kind(), "Stream::synchronize")?;
        let raw = self.raw()?;
        self.inner.dev.stream_synchronize(raw)?;
        lock(&self.inner.parked).release_all(&StreamFence(&self.inner));
        self.inner.errors.take()
    }

    /// True when both handles name one stream state.
    pub fn same_stream(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
