//! The shared vendor-stream machinery against a fake vendor whose streams hold their work
//! until the test lets it run: drops never block or synchronize a borrowed stream, parked
//! handles outlive the work that uses them, errors reach stream and device as the
//! contract says, blocking calls inside callbacks and the per-thread stream on another
//! thread are refused; the shared event handle destroys only what it owns, once, and
//! refuses to block inside a callback.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gpuport_core::{Buffer, BufferDesc, DeviceId, Error, EventFlags, MemoryKind, Ownership, Result, StreamFlags};
use gpuport_driver::parking::Keep;
use gpuport_driver::vendor_event::VendorEvent;
use gpuport_driver::vendor_stream::{run_host_callback, DeviceStreams, VendorStream, VendorStreams};

/// A fake runtime: host callbacks wait in a list until the test (or a synchronize) runs
/// them — the fake's "work".
#[derive(Default)]
struct Fake {
    pending: Mutex<Vec<(usize, usize)>>, // (stream, user pointer)
    synchronized: AtomicUsize,
    destroyed: Mutex<Vec<usize>>,
    events_made: AtomicUsize,
    events_destroyed: Mutex<Vec<usize>>,
    streams: DeviceStreams<Fake>,
}

impl Fake {
    fn run(&self, stream: Option<usize>) {
        let mine: Vec<(usize, usize)> = {
            let mut all = self.pending.lock().unwrap();
            let (run, keep) = all.drain(..).partition(|(s, _)| stream.is_none_or(|x| x == *s));
            *all = keep;
            run
        };
        for (_, user) in mine {
            // SAFETY: each pointer was handed to `launch_host_callback` once.
            unsafe { run_host_callback(user as *mut c_void) };
        }
    }
}

impl VendorStreams for Fake {
    const KIND: gpuport_core::BackendKind = gpuport_core::BackendKind::Host;
    type Stream = usize;
    type Event = usize;
    fn device_id(&self) -> DeviceId {
        DeviceId::HOST
    }
    fn bind(&self) -> Result<()> {
        Ok(())
    }
    fn stream_raw(stream: usize) -> usize {
        stream
    }
    fn fence_event(&self, _stream: usize) -> Result<usize> {
        Ok(1)
    }
    fn event_done(&self, _event: usize) -> Result<bool> {
        Ok(false)
    }
    fn event_destroy(&self, event: usize) -> Result<()> {
        self.events_destroyed.lock().unwrap().push(event);
        Ok(())
    }
    fn event_raw(event: usize) -> usize {
        event
    }
    fn event_create(&self, flags: EventFlags) -> Result<usize> {
        // Handles 100, 101, …; the flags' bits ride along in the thousands.
        Ok(100 + self.events_made.fetch_add(1, Ordering::SeqCst) + 1000 * flags.bits() as usize)
    }
    fn event_record(&self, _event: usize, _stream: usize) -> Result<()> {
        Ok(())
    }
    fn event_synchronize(&self, _event: usize) -> Result<()> {
        Ok(())
    }
    fn event_elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        Ok(end as f32 - start as f32)
    }
    fn stream_done(&self, stream: usize) -> Result<bool> {
        Ok(!self.pending.lock().unwrap().iter().any(|(s, _)| *s == stream))
    }
    fn stream_synchronize(&self, stream: usize) -> Result<()> {
        self.synchronized.fetch_add(1, Ordering::SeqCst);
        self.run(Some(stream));
        Ok(())
    }
    fn device_synchronize(&self) -> Result<()> {
        self.run(None);
        Ok(())
    }
    fn stream_destroy(&self, stream: usize) -> Result<()> {
        self.destroyed.lock().unwrap().push(stream);
        Ok(())
    }
    fn launch_host_callback(&self, stream: usize, user: *mut c_void) -> Result<()> {
        self.pending.lock().unwrap().push((stream, user as usize));
        Ok(())
    }
    fn streams(&self) -> &DeviceStreams<Self> {
        &self.streams
    }
}

fn buffer() -> Buffer {
    let desc =
        BufferDesc { addr: 0x1000, len: 8, device: DeviceId::HOST, memory: MemoryKind::Device, host_accessible: false };
    // SAFETY: never dereferenced.
    unsafe { Buffer::from_borrowed(desc, None) }.unwrap()
}

#[test]
fn dropping_a_borrowed_stream_neither_blocks_nor_synchronizes_it() {
    let dev = Arc::new(Fake::default());
    let wrapped = VendorStream::new(&dev, 7, false, StreamFlags::empty(), 0);
    assert_eq!(wrapped.ownership(), Ownership::Borrowed);
    let b = buffer();
    wrapped.park([Keep::Buffer(b.clone())]).unwrap();
    drop(wrapped);
    assert_eq!(dev.synchronized.load(Ordering::SeqCst), 0, "the drop synchronized a stream it does not own");
    assert!(dev.destroyed.lock().unwrap().is_empty(), "a borrowed stream was destroyed");
    assert_eq!(b.handle_count(), 2, "the parked buffer was released before the stream reached it");
    dev.run(Some(7)); // the stream reaches the release callback
    gpuport_core::release::flush();
    assert_eq!(b.handle_count(), 1, "the parked buffer was not released once the work had run");
}

#[test]
fn an_owned_stream_is_destroyed_without_waiting() {
    let dev = Arc::new(Fake::default());
    let owned = VendorStream::new(&dev, 9, true, StreamFlags::empty(), 0);
    owned.park([Keep::Buffer(buffer())]).unwrap();
    drop(owned);
    assert_eq!(*dev.destroyed.lock().unwrap(), vec![9]);
    assert_eq!(dev.synchronized.load(Ordering::SeqCst), 0);
    dev.run(None);
}

#[test]
fn errors_reach_the_stream_once_and_the_device_until_reported() {
    let dev = Arc::new(Fake::default());
    let s = VendorStream::new(&dev, 3, true, StreamFlags::empty(), 0);
    s.host_callback(Box::new(|| panic!("fake vendor: a callback panics on purpose"))).unwrap();
    assert!(matches!(dev.streams.synchronize(&dev), Err(Error::StreamWork { .. })));
    assert!(matches!(dev.streams.synchronize(&dev), Err(Error::StreamWork { .. })), "sticky while the stream lives");
    assert!(matches!(s.synchronize(), Err(Error::StreamWork { .. })));
    s.synchronize().unwrap();
    dev.streams.synchronize(&dev).unwrap();

    // A stream dropped with failing work still queued: the device reports it, once.
    let dropped = VendorStream::new(&dev, 4, true, StreamFlags::empty(), 0);
    dropped.host_callback(Box::new(|| panic!("fake vendor: work of a dropped stream fails"))).unwrap();
    drop(dropped);
    assert!(matches!(dev.streams.synchronize(&dev), Err(Error::StreamWork { .. })));
    dev.streams.synchronize(&dev).unwrap();
}

#[test]
fn calls_inside_a_callback_are_refused() {
    let dev = Arc::new(Fake::default());
    let s = VendorStream::new(&dev, 5, true, StreamFlags::empty(), 0);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (inner, inner_dev, out) = (s.clone(), dev.clone(), seen.clone());
    s.host_callback(Box::new(move || {
        out.lock().unwrap().push(inner.synchronize());
        out.lock().unwrap().push(inner_dev.streams.synchronize(&inner_dev));
        out.lock().unwrap().push(inner.query().map(|_| ()));
    }))
    .unwrap();
    dev.run(Some(5));
    let seen = seen.lock().unwrap();
    assert!(matches!(seen[0], Err(Error::WouldDeadlock { .. })), "{:?}", seen[0]);
    assert!(matches!(seen[1], Err(Error::WouldDeadlock { .. })), "{:?}", seen[1]);
    assert!(matches!(seen[2], Err(Error::InvalidArgument { .. })), "any call inside a callback: {:?}", seen[2]);
}

#[test]
fn default_streams_are_shared_and_the_per_thread_one_stays_on_its_thread() {
    let dev = Arc::new(Fake::default());
    let a = VendorStream::legacy_default(&dev, 1);
    let b = VendorStream::legacy_default(&dev, 1);
    assert!(a.same_stream(&b), "two legacy default handles are two streams");
    let mine = VendorStream::per_thread_default(&dev, 2);
    assert!(mine.same_stream(&VendorStream::per_thread_default(&dev, 2)));
    assert!(mine.raw().is_ok());
    let (theirs, other) = std::thread::scope(|s| {
        s.spawn(|| (VendorStream::per_thread_default(&dev, 2), mine.raw().map(|_| ()))).join().unwrap()
    });
    assert!(!theirs.same_stream(&mine), "two threads share a per-thread stream");
    assert!(matches!(other, Err(Error::InvalidArgument { .. })), "the per-thread stream used on another thread");
}

#[test]
fn owned_events_are_destroyed_once_with_their_last_handle_and_borrowed_ones_never() {
    let dev = Arc::new(Fake::default());
    let owned = VendorEvent::create(&dev, EventFlags::DISABLE_TIMING).unwrap();
    assert_eq!(owned.raw_handle(), 100 + 1000 * EventFlags::DISABLE_TIMING.bits() as usize);
    assert_eq!((owned.ownership(), owned.flags()), (Ownership::Owned, EventFlags::DISABLE_TIMING));
    let wrapped = VendorEvent::from_parts(&dev, 7, false, EventFlags::empty());
    assert_eq!(wrapped.ownership(), Ownership::Borrowed);
    let (second, raw) = (owned.clone(), owned.raw());
    drop(owned);
    gpuport_core::release::flush();
    assert!(dev.events_destroyed.lock().unwrap().is_empty(), "destroyed while a handle lives");
    assert_eq!(second.elapsed_ms(&wrapped).unwrap(), 7.0 - raw as f32, "start is self, end the argument");
    drop((second, wrapped));
    gpuport_core::release::flush();
    assert_eq!(*dev.events_destroyed.lock().unwrap(), vec![raw], "the owned event once; the wrapped one never");
}

#[test]
fn an_event_synchronize_inside_a_callback_is_refused() {
    let dev = Arc::new(Fake::default());
    let s = VendorStream::new(&dev, 5, true, StreamFlags::empty(), 0);
    let ev = VendorEvent::create(&dev, EventFlags::empty()).unwrap();
    let seen = Arc::new(Mutex::new(None));
    let out = seen.clone();
    s.host_callback(Box::new(move || *out.lock().unwrap() = Some(ev.synchronize()))).unwrap();
    dev.run(Some(5));
    let seen = seen.lock().unwrap();
    assert!(matches!(*seen, Some(Err(Error::WouldDeadlock { .. }))), "{:?}", *seen);
}
