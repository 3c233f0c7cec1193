//! The shared vendor-stream machinery against a fake vendor whose streams hold their work
//! until the test lets it run: drops never block or synchronize a borrowed stream, parked
//! handles outlive the work that uses them, errors reach stream and device as the
//! contract says, blocking calls inside callbacks and the per-thread stream on another
//! thread are refused; the shared event handle destroys only what it owns, once, and
//! refuses to block inside a callback.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gpuport_core::{
    Buffer, BufferDesc, DeviceId, DeviceInfo, Error, EventFlags, MemoryKind, ModuleImage, Ownership, PointerAttributes,
    Result, StreamFlags,
};
use gpuport_vendor_kit::parking::Keep;
use gpuport_vendor_kit::VendorEvent;
use gpuport_vendor_kit::{run_host_callback, VendorCalls, VendorStream};
use gpuport_vendor_kit::{OpenDevices, VendorDevice};

/// A fake runtime: host callbacks wait in a list until the test (or a synchronize) runs
/// them — the fake's "work".
#[derive(Default)]
struct Fake {
    pending: Mutex<Vec<(usize, UserPtr)>>, // (stream, user pointer)
    synchronized: AtomicUsize,
    destroyed: Mutex<Vec<usize>>,
    events_made: AtomicUsize,
    events_destroyed: Mutex<Vec<usize>>,
    /// The data-path calls made, in order, as text.
    calls: Mutex<Vec<String>>,
    /// Kernel names looked up; a function handle is an index here.
    functions: Mutex<Vec<String>>,
    /// While set, `launch_host_callback` refuses.
    refuse_callbacks: std::sync::atomic::AtomicBool,
    /// While set, every event has completed (unset, none has: the stream holds its work).
    events_done: std::sync::atomic::AtomicBool,
    /// While set, `mem_free_async` fails.
    fail_frees: std::sync::atomic::AtomicBool,
}

/// A host callback's pointer while the fake holds it: kept as a pointer (not an address),
/// so Miri can check the slots with strict provenance.
struct UserPtr(*mut c_void);

// SAFETY: the pointer names a slot the vendor kit handed over for any thread to run.
unsafe impl Send for UserPtr {}

/// A fake device of its own (each test has its own registry, so tests share nothing).
fn fake() -> Arc<VendorDevice<Fake>> {
    OpenDevices::new(gpuport_core::BackendKind::Host).open(0, 1, || Ok(Fake::default())).unwrap()
}

impl Fake {
    fn run(&self, stream: Option<usize>) {
        let mine: Vec<(usize, UserPtr)> = {
            let mut all = self.pending.lock().unwrap();
            let (run, keep) = all.drain(..).partition(|(s, _)| stream.is_none_or(|x| x == *s));
            *all = keep;
            run
        };
        for (_, user) in mine {
            // SAFETY: each pointer was handed to `launch_host_callback` once.
            unsafe { run_host_callback(user.0) };
        }
    }
}

impl VendorCalls for Fake {
    type Stream = usize;
    type Event = usize;
    fn device_id(&self) -> DeviceId {
        DeviceId::HOST
    }
    fn bind(&self) -> Result<()> {
        Ok(())
    }
    fn info(&self) -> Result<DeviceInfo> {
        Err(Error::unsupported(self.kind(), "facts of a fake"))
    }
    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        Ok(false)
    }
    fn enable_peer_access(&self, _peer: &Self) -> Result<()> {
        Err(Error::unsupported(self.kind(), "peers of a fake"))
    }
    fn pointer_attributes(&self, _addr: u64) -> Result<PointerAttributes> {
        Ok(PointerAttributes::unregistered())
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Ok((0, -2))
    }
    fn stream_create(&self, _flags: StreamFlags, priority: i32) -> Result<usize> {
        self.calls.lock().unwrap().push(format!("stream priority {priority}"));
        Ok(30)
    }
    fn per_thread_stream_handle(&self) -> Result<usize> {
        Ok(2)
    }
    fn fence_event(&self, _stream: usize) -> Result<usize> {
        Ok(1)
    }
    fn event_done(&self, _event: usize) -> Result<bool> {
        Ok(self.events_done.load(Ordering::SeqCst))
    }
    fn event_destroy(&self, event: usize) -> Result<()> {
        self.events_destroyed.lock().unwrap().push(event);
        Ok(())
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
        if self.refuse_callbacks.load(Ordering::SeqCst) {
            return Err(Error::unsupported(self.kind(), "host callbacks (refused on purpose)"));
        }
        self.pending.lock().unwrap().push((stream, UserPtr(user)));
        Ok(())
    }
    type Module = usize;
    type Function = usize;
    fn stream_wait_event(&self, stream: usize, event: usize) -> Result<()> {
        self.calls.lock().unwrap().push(format!("wait {stream} for {event}"));
        Ok(())
    }
    unsafe fn memcpy_async(&self, dst: u64, src: u64, len: usize, stream: usize) -> Result<()> {
        self.calls.lock().unwrap().push(format!("copy {dst:#x} <- {src:#x} {len} on {stream}"));
        Ok(())
    }
    unsafe fn memcpy_2d_async(
        &self,
        dst: u64,
        dst_pitch: usize,
        src: u64,
        src_pitch: usize,
        width: usize,
        height: usize,
        stream: usize,
    ) -> Result<()> {
        let call = format!("copy2d {dst:#x}/{dst_pitch} <- {src:#x}/{src_pitch} {width}x{height} on {stream}");
        self.calls.lock().unwrap().push(call);
        Ok(())
    }
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        dst_device: DeviceId,
        src: u64,
        src_device: DeviceId,
        len: usize,
        stream: usize,
    ) -> Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("peer {dst:#x}@{dst_device} <- {src:#x}@{src_device} {len} on {stream}"));
        Ok(())
    }
    unsafe fn memset_async(&self, dst: u64, value: u8, len: usize, stream: usize) -> Result<()> {
        self.calls.lock().unwrap().push(format!("memset {dst:#x} {len} = {value} on {stream}"));
        Ok(())
    }
    unsafe fn memset(&self, dst: u64, value: u8, len: usize) -> Result<()> {
        self.calls.lock().unwrap().push(format!("memset {dst:#x} {len} = {value}"));
        Ok(())
    }
    unsafe fn launch_kernel(
        &self,
        function: usize,
        config: &gpuport_core::LaunchConfig,
        stream: usize,
        _args: &mut [gpuport_vendor_kit::kernel_args::ArgSlot],
    ) -> Result<()> {
        let name = self.functions.lock().unwrap()[function].clone();
        self.calls.lock().unwrap().push(format!("launch {name} {:?} on {stream}", config.grid));
        Ok(())
    }
    fn legacy_stream_handle(&self) -> usize {
        1
    }
    fn total_memory(&self) -> usize {
        1 << 20
    }
    fn mem_alloc(&self, bytes: usize) -> Result<u64> {
        self.calls.lock().unwrap().push(format!("alloc {bytes}"));
        Ok(0x10_0000)
    }
    fn mem_alloc_managed(&self, bytes: usize) -> Result<u64> {
        self.calls.lock().unwrap().push(format!("alloc managed {bytes}"));
        Ok(0x20_0000)
    }
    fn mem_alloc_host(&self, bytes: usize, _flags: gpuport_core::HostAllocFlags) -> Result<u64> {
        self.calls.lock().unwrap().push(format!("alloc host {bytes}"));
        Ok(0x30_0000)
    }
    fn stream_ordered_supported(&self) -> Result<()> {
        Ok(())
    }
    unsafe fn mem_alloc_async(&self, bytes: usize, stream: usize) -> Result<u64> {
        self.calls.lock().unwrap().push(format!("alloc {bytes} on {stream}"));
        Ok(0x40_0000)
    }
    unsafe fn mem_free(&self, addr: u64) -> Result<()> {
        self.calls.lock().unwrap().push(format!("free {addr:#x}"));
        Ok(())
    }
    unsafe fn mem_free_host(&self, addr: u64) -> Result<()> {
        self.calls.lock().unwrap().push(format!("free host {addr:#x}"));
        Ok(())
    }
    unsafe fn mem_free_async(&self, addr: u64, stream: usize) -> Result<()> {
        if self.fail_frees.load(Ordering::SeqCst) {
            return Err(Error::invalid_argument(format!(
                "fake vendor: freeing {addr:#x} on {stream} fails on purpose"
            )));
        }
        self.calls.lock().unwrap().push(format!("free {addr:#x} on {stream}"));
        Ok(())
    }
    fn module_load(&self, image: ModuleImage<'_>) -> Result<usize> {
        match image {
            ModuleImage::Custom { format: "fake", bytes } => {
                self.calls.lock().unwrap().push(format!("load {} bytes", bytes.len()));
                Ok(bytes.len())
            }
            other => Err(Error::unsupported(self.kind(), format!("loading a {}", other.kind_name()))),
        }
    }
    unsafe fn module_unload(&self, module: usize) -> Result<()> {
        self.calls.lock().unwrap().push(format!("unload {module}"));
        Ok(())
    }
    unsafe fn module_function(&self, _module: usize, name: &CStr) -> Result<usize> {
        let mut all = self.functions.lock().unwrap();
        all.push(name.to_string_lossy().into_owned());
        Ok(all.len() - 1)
    }
}

fn buffer() -> Buffer {
    device_buffer(0x1000, DeviceId::HOST)
}

/// 8 bytes of "device memory" at `addr` (never dereferenced: the fake only records calls).
fn device_buffer(addr: u64, device: DeviceId) -> Buffer {
    fake_memory(addr, 8, device)
}

/// `len` bytes of "device memory" at `addr`, never dereferenced.
fn fake_memory(addr: u64, len: usize, device: DeviceId) -> Buffer {
    let desc = BufferDesc { addr, len, device, memory: MemoryKind::Device, host_accessible: false };
    // SAFETY: never dereferenced.
    unsafe { Buffer::from_borrowed(desc, None) }.unwrap()
}

#[test]
fn the_data_path_checks_every_range_before_the_vendor_sees_it() {
    use gpuport_core::{BackendKind, Kernel, KernelArg, LaunchConfig};
    let dev = fake();
    let s = VendorStream::new(&dev, 7, true, StreamFlags::empty(), 0);
    let (a, b) = (device_buffer(0x1000, DeviceId::HOST), device_buffer(0x3000, DeviceId::HOST));
    let other = device_buffer(0x2000, DeviceId::new(BackendKind::Host, 1));
    s.copy(&a, 2, &b, 0, 6).unwrap();
    s.copy(&a, 0, &other, 0, 8).unwrap(); // two devices of the backend: a peer copy
    s.memset(&b, 4, 4, 9).unwrap();
    let e = VendorEvent::from_parts(&dev, 55, false, EventFlags::empty());
    s.wait(&e).unwrap();
    let kernel =
        dev.kernel(&dev.load_module(ModuleImage::Custom { format: "fake", bytes: &[0; 3] }).unwrap(), "fill").unwrap();
    let config = LaunchConfig::for_items(8, 8).unwrap();
    s.launch(&kernel, &config, &[KernelArg::buffer(&a), KernelArg::scalar(3u32)]).unwrap();
    // Refused before any call: a range past its buffer, a memset of another backend's
    // memory, a kernel of another device.
    assert!(matches!(s.copy(&a, 4, &b, 0, 8), Err(Error::InvalidArgument { .. })));
    let foreign = device_buffer(0x4000, DeviceId::new(BackendKind::Plugin("ext"), 0));
    assert!(matches!(s.memset(&foreign, 0, 8, 0), Err(Error::BackendMismatch { .. })));
    let elsewhere = Kernel::new(DeviceId::new(BackendKind::Host, 1), "fill", 0usize);
    assert!(matches!(s.launch(&elsewhere, &config, &[]), Err(Error::BackendMismatch { .. })));
    let not_vendor = Kernel::new(DeviceId::HOST, "fill", 0usize);
    assert!(matches!(s.launch(&not_vendor, &config, &[]), Err(Error::BackendMismatch { .. })), "a foreign handle");
    assert_eq!(
        *dev.calls.lock().unwrap(),
        [
            "copy 0x3000 <- 0x1002 6 on 7",
            "peer 0x2000@host:1 <- 0x1000@host:0 8 on 7",
            "memset 0x3004 4 = 9 on 7",
            "wait 7 for 55",
            "load 3 bytes",
            "launch fill [1, 1, 1] on 7",
        ]
    );
}

#[test]
fn a_2d_copy_is_one_driver_call_unless_it_is_a_peer_copy_or_a_pitch_is_past_the_limit() {
    use gpuport_core::{BackendKind, Copy2d};
    use gpuport_vendor_kit::MAX_PITCH;
    let dev = fake();
    let s = VendorStream::new(&dev, 7, true, StreamFlags::empty(), 0);
    // Room for two 8-byte rows a pitch past the limit apart (fake memory, never touched).
    let len = MAX_PITCH + 1 + 8;
    let (a, b) =
        (fake_memory(0x1000_0000_0000, len, DeviceId::HOST), fake_memory(0x2000_0000_0000, len, DeviceId::HOST));
    let on_1 = fake_memory(0x3000_0000_0000, 64, DeviceId::new(BackendKind::Host, 1));
    let rows =
        |src_pitch, dst_pitch| Copy2d { src_offset: 0, src_pitch, dst_offset: 0, dst_pitch, width: 8, height: 2 };
    s.copy_2d(&a, &b, &rows(MAX_PITCH, MAX_PITCH)).unwrap(); // at the limit: one call
    s.copy_2d(&a, &b, &rows(MAX_PITCH + 1, 8)).unwrap(); // the source's pitch past it: rows
    s.copy_2d(&a, &b, &rows(8, MAX_PITCH + 1)).unwrap(); // the destination's: rows
    s.copy_2d(&a, &on_1, &rows(16, 16)).unwrap(); // two devices: peer copies, a row each
    let past = MAX_PITCH as u64 + 1;
    assert_eq!(
        *dev.calls.lock().unwrap(),
        [
            format!("copy2d 0x200000000000/{MAX_PITCH} <- 0x100000000000/{MAX_PITCH} 8x2 on 7"),
            "copy 0x200000000000 <- 0x100000000000 8 on 7".to_string(),
            format!("copy 0x200000000008 <- {:#x} 8 on 7", 0x1000_0000_0000 + past),
            "copy 0x200000000000 <- 0x100000000000 8 on 7".to_string(),
            format!("copy {:#x} <- 0x100000000008 8 on 7", 0x2000_0000_0000 + past),
            "peer 0x300000000000@host:1 <- 0x100000000000@host:0 8 on 7".to_string(),
            "peer 0x300000000010@host:1 <- 0x100000000010@host:0 8 on 7".to_string(),
        ]
    );
}

#[test]
fn dropping_a_borrowed_stream_neither_blocks_nor_synchronizes_it() {
    let dev = fake();
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
fn parked_batches_are_released_only_once_their_event_has_completed() {
    use gpuport_vendor_kit::parking::BATCH;
    let dev = fake();
    let s = VendorStream::new(&dev, 7, false, StreamFlags::empty(), 0);
    let b = buffer();
    // Two full batches while the stream holds its work: each is sealed behind an event
    // that has not completed, and kept.
    for _ in 0..2 * BATCH {
        s.park([Keep::Buffer(b.clone())]).unwrap();
    }
    assert_eq!(b.handle_count(), 1 + 2 * BATCH, "a batch was released before its event completed");
    assert!(dev.events_destroyed.lock().unwrap().is_empty());
    // The work runs: the next seal releases every completed batch, its own included.
    dev.events_done.store(true, Ordering::SeqCst);
    for _ in 0..BATCH {
        s.park([Keep::Buffer(b.clone())]).unwrap();
    }
    assert_eq!(b.handle_count(), 1, "completed batches were kept");
    assert_eq!(dev.events_destroyed.lock().unwrap().len(), 3, "each batch's event is destroyed once");
}

#[test]
fn an_owned_stream_is_destroyed_without_waiting() {
    let dev = fake();
    let owned = VendorStream::new(&dev, 9, true, StreamFlags::empty(), 0);
    owned.park([Keep::Buffer(buffer())]).unwrap();
    drop(owned);
    assert_eq!(*dev.destroyed.lock().unwrap(), vec![9]);
    assert_eq!(dev.synchronized.load(Ordering::SeqCst), 0);
    dev.run(None);
}

#[test]
fn errors_reach_the_stream_once_and_the_device_until_reported() {
    let dev = fake();
    let s = VendorStream::new(&dev, 3, true, StreamFlags::empty(), 0);
    s.host_callback(Box::new(|| panic!("fake vendor: a callback panics on purpose"))).unwrap();
    assert!(matches!(dev.synchronize(), Err(Error::StreamWork { .. })));
    assert!(matches!(dev.synchronize(), Err(Error::StreamWork { .. })), "sticky while the stream lives");
    assert!(matches!(s.synchronize(), Err(Error::StreamWork { .. })));
    s.synchronize().unwrap();
    dev.synchronize().unwrap();

    // A stream dropped with failing work still queued: the device reports it, once.
    let dropped = VendorStream::new(&dev, 4, true, StreamFlags::empty(), 0);
    dropped.host_callback(Box::new(|| panic!("fake vendor: work of a dropped stream fails"))).unwrap();
    drop(dropped);
    assert!(matches!(dev.synchronize(), Err(Error::StreamWork { .. })));
    dev.synchronize().unwrap();
}

#[test]
fn a_failed_stream_ordered_free_is_its_streams_error() {
    // A buffer's drop has no caller to fail: its stream's next synchronize reports the
    // failure, once, and the device's until then.
    let dev = fake();
    let s = VendorStream::new(&dev, 3, true, StreamFlags::empty(), 0);
    let ordered = dev.alloc_async(64, &s).unwrap();
    dev.fail_frees.store(true, Ordering::SeqCst);
    drop(ordered);
    gpuport_core::release::flush();
    assert!(dev.synchronize().is_err(), "the device does not report the stream's failed free");
    assert!(s.synchronize().is_err(), "the stream does not report its failed free");
    s.synchronize().unwrap();
    dev.synchronize().unwrap();
}

#[test]
fn callbacks_run_once_in_order_from_another_thread_and_their_slots_are_reused() {
    let dev = fake();
    let s = VendorStream::new(&dev, 6, true, StreamFlags::empty(), 0);
    let seen = Arc::new(Mutex::new(Vec::new()));
    // More callbacks in flight than a thread keeps free slots for, three times over, each
    // run on another thread (which keeps the slots it empties and passes them on).
    for round in 0..3 {
        for i in 0..300 {
            let seen = seen.clone();
            s.host_callback(Box::new(move || seen.lock().unwrap().push(round * 1000 + i))).unwrap();
        }
        let runner = dev.clone();
        std::thread::spawn(move || runner.run(Some(6))).join().unwrap();
    }
    let expected: Vec<i32> = (0..3).flat_map(|round| (0..300).map(move |i| round * 1000 + i)).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    s.synchronize().unwrap();
}

#[test]
fn a_reused_slot_reports_to_the_stream_of_its_callback() {
    let dev = fake();
    let (a, b) = (
        VendorStream::new(&dev, 11, true, StreamFlags::empty(), 0),
        VendorStream::new(&dev, 12, true, StreamFlags::empty(), 0),
    );
    // Run on this thread, `a`'s callbacks leave their slots (each still naming `a`'s
    // reporter) first in this thread's free list, so `b`'s callbacks take exactly those.
    for _ in 0..100 {
        a.host_callback(Box::new(|| {})).unwrap();
    }
    dev.run(Some(11));
    for i in 0..100 {
        b.host_callback(Box::new(move || assert!(i != 50, "fake vendor: b's callback panics on purpose"))).unwrap();
    }
    dev.run(Some(12));
    match b.synchronize() {
        Err(Error::StreamWork { stream, .. }) => assert!(stream.starts_with("0xc on"), "reported as {stream}"),
        other => panic!("b's failure was not reported to b: {other:?}"),
    }
    a.synchronize().expect("b's failure was reported to a");
    // And back: `a` reuses slots that last named `b`.
    a.host_callback(Box::new(|| panic!("fake vendor: a's callback panics on purpose"))).unwrap();
    dev.run(Some(11));
    b.synchronize().expect("a's failure was reported to b");
    assert!(matches!(a.synchronize(), Err(Error::StreamWork { .. })));
}

#[test]
fn a_refused_callback_is_dropped_unrun_and_the_stream_goes_on() {
    let dev = fake();
    let s = VendorStream::new(&dev, 8, true, StreamFlags::empty(), 0);
    let held = Arc::new(());
    let ran = Arc::new(AtomicUsize::new(0));
    dev.refuse_callbacks.store(true, Ordering::SeqCst);
    let (h, r) = (held.clone(), ran.clone());
    let refused = s.host_callback(Box::new(move || {
        let _h = h;
        r.fetch_add(1, Ordering::SeqCst);
    }));
    assert!(matches!(refused, Err(Error::Unsupported { .. })), "{refused:?}");
    assert_eq!(Arc::strong_count(&held), 1, "the refused closure was kept");
    dev.refuse_callbacks.store(false, Ordering::SeqCst);
    let r = ran.clone();
    s.host_callback(Box::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the accepted callback runs");
}

#[test]
fn a_dropped_stream_whose_last_callback_is_refused_waits_for_its_work_first() {
    let dev = fake();
    let s = VendorStream::new(&dev, 10, false, StreamFlags::empty(), 0);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    s.host_callback(Box::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    let b = buffer();
    s.park([Keep::Buffer(b.clone())]).unwrap();
    // The stream's last callback (which would free what its callbacks report to, and the
    // parked buffer) cannot be queued: the drop waits for the stream instead.
    dev.refuse_callbacks.store(true, Ordering::SeqCst);
    drop(s);
    assert_eq!(dev.synchronized.load(Ordering::SeqCst), 1, "the drop did not wait for the stream");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the queued callback did not run before the release");
    gpuport_core::release::flush();
    assert_eq!(b.handle_count(), 1, "the parked buffer was not released after the wait");
}

#[test]
fn calls_inside_a_callback_are_refused() {
    let dev = fake();
    let s = VendorStream::new(&dev, 5, true, StreamFlags::empty(), 0);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (inner, inner_dev, out) = (s.clone(), dev.clone(), seen.clone());
    s.host_callback(Box::new(move || {
        out.lock().unwrap().push(inner.synchronize());
        out.lock().unwrap().push(inner_dev.synchronize());
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
    let dev = fake();
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
fn a_dropped_per_thread_stream_releases_behind_its_work_on_its_thread_and_waits_elsewhere() {
    let dev = fake();
    let b = buffer();
    // Dropped on its own thread: the release is queued behind the stream's work (no block).
    let mine = VendorStream::per_thread_default(&dev, 2);
    mine.park([Keep::Buffer(b.clone())]).unwrap();
    drop(mine);
    gpuport_core::release::flush();
    assert_eq!(b.handle_count(), 2, "the parked buffer was released before the stream reached it");
    dev.run(Some(2));
    gpuport_core::release::flush();
    assert_eq!(b.handle_count(), 1, "the parked buffer was not released once the work had run");
    // Dropped on another thread, the handle cannot name its stream (it means "the calling
    // thread's"): the drop waits for the device rather than queueing the release on the
    // dropping thread's own per-thread stream.
    let theirs = std::thread::scope(|s| {
        s.spawn(|| {
            let theirs = VendorStream::per_thread_default(&dev, 2);
            theirs.park([Keep::Buffer(b.clone())]).unwrap();
            theirs
        })
        .join()
        .unwrap()
    });
    drop(theirs);
    gpuport_core::release::flush();
    assert!(dev.pending.lock().unwrap().is_empty(), "the release was queued on another thread's stream");
    assert_eq!(b.handle_count(), 1, "the drop neither waited nor released the parked buffer");
}

#[test]
fn the_per_thread_stream_answers_a_query_with_its_own_work() {
    // The per-thread default stream's calls take the caller checks first; its answers are
    // still the stream's.
    let dev = fake();
    let mine = VendorStream::per_thread_default(&dev, 2);
    assert!(mine.query().unwrap(), "an idle stream is done");
    mine.host_callback(Box::new(|| ())).unwrap();
    assert!(!mine.query().unwrap(), "a stream holding work is done");
    dev.run(Some(2));
    assert!(mine.query().unwrap(), "the stream's work ran");
}

#[test]
fn owned_events_are_destroyed_once_with_their_last_handle_and_borrowed_ones_never() {
    let dev = fake();
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
    let dev = fake();
    let s = VendorStream::new(&dev, 5, true, StreamFlags::empty(), 0);
    let ev = VendorEvent::create(&dev, EventFlags::empty()).unwrap();
    let seen = Arc::new(Mutex::new(None));
    let out = seen.clone();
    s.host_callback(Box::new(move || *out.lock().unwrap() = Some(ev.synchronize()))).unwrap();
    dev.run(Some(5));
    let seen = seen.lock().unwrap();
    assert!(matches!(*seen, Some(Err(Error::WouldDeadlock { .. }))), "{:?}", *seen);
}

#[test]
fn memory_is_freed_as_it_was_allocated_and_impossible_sizes_never_reach_the_driver() {
    let dev = fake();
    let device = dev.alloc(64).unwrap();
    let managed = dev.alloc_managed(64).unwrap();
    let pinned = dev.alloc_pinned(64, Default::default()).unwrap();
    assert!(pinned.is_host_accessible() && managed.is_host_accessible() && !device.is_host_accessible());
    let s = VendorStream::new(&dev, 7, true, StreamFlags::empty(), 0);
    let ordered = dev.alloc_async(64, &s).unwrap();
    // The per-thread stream's buffer is freed on the legacy stream (handle 1 here).
    let per_thread = VendorStream::per_thread_default(&dev, 2);
    let on_per_thread = dev.alloc_async(32, &per_thread).unwrap();
    drop((device, managed, pinned, ordered, on_per_thread));
    gpuport_core::release::flush();
    // Nothing is asked of the driver for sizes no device has, nor for zero bytes.
    assert!(matches!(dev.alloc(2 << 20), Err(Error::OutOfMemory { .. })));
    assert!(matches!(dev.alloc_managed(2 << 20), Err(Error::OutOfMemory { .. })));
    assert_eq!(dev.alloc(0).unwrap().len(), 0);
    assert_eq!(
        *dev.calls.lock().unwrap(),
        [
            "alloc 64",
            "alloc managed 64",
            "alloc host 64",
            "alloc 64 on 7",
            "alloc 32 on 2",
            "free 0x100000",
            "free 0x200000",
            "free host 0x300000",
            "free 0x400000 on 7",
            "free 0x400000 on 1",
        ]
    );
}

#[test]
fn the_device_contract_is_written_once_over_the_calls() {
    use gpuport_core::{BackendKind, DefaultStream};
    let dev = fake();
    // Priorities are clamped into the driver's range, whichever way round it is given.
    assert_eq!(dev.create_stream(StreamFlags::empty(), -9).unwrap().priority(), -2);
    assert_eq!(dev.create_stream(StreamFlags::empty(), 5).unwrap().priority(), 0);
    // The synchronous memset waits for the legacy stream only, and checks its range first.
    let b = buffer();
    dev.memset(&b, 2, 4, 7).unwrap();
    assert_eq!(dev.synchronized.load(Ordering::SeqCst), 1);
    assert!(matches!(dev.memset(&b, 6, 4, 7), Err(Error::InvalidArgument { .. })));
    let foreign = device_buffer(0x4000, DeviceId::new(BackendKind::Plugin("ext"), 0));
    assert!(matches!(dev.memset(&foreign, 0, 8, 0), Err(Error::BackendMismatch { .. })));
    // Default streams come from the vendor's handles; wrapped handles are borrowed.
    assert_eq!(dev.default_stream(DefaultStream::Legacy).unwrap().raw_value(), 1);
    assert_eq!(dev.default_stream(DefaultStream::PerThread).unwrap().raw_value(), 2);
    // SAFETY: the fake's handles are plain numbers.
    let wrapped = unsafe { dev.wrap_stream(44) }.unwrap();
    assert_eq!((wrapped.raw_value(), wrapped.ownership()), (44, Ownership::Borrowed));
    // SAFETY: as above.
    assert!(matches!(unsafe { dev.wrap_event(0) }, Err(Error::InvalidHandle { .. })), "a null event");
    // A device reaches itself without asking the driver.
    assert!(dev.can_access_peer(&dev).unwrap());
    dev.enable_peer_access(&dev).unwrap();
    // A module stays loaded while a kernel of it lives, and is unloaded once after.
    let module = dev.load_module(ModuleImage::Custom { format: "fake", bytes: &[0; 5] }).unwrap();
    assert!(matches!(dev.load_module(ModuleImage::Ptx("x")), Err(Error::Unsupported { .. })));
    let kernel = dev.kernel(&module, "k").unwrap();
    assert!(matches!(dev.kernel(&module, "k\0"), Err(Error::InvalidArgument { .. })));
    drop(module);
    gpuport_core::release::flush();
    assert!(!dev.calls.lock().unwrap().iter().any(|c| c.starts_with("unload")), "unloaded under a kernel");
    drop(kernel);
    gpuport_core::release::flush();
    let unloads: Vec<String> = dev.calls.lock().unwrap().iter().filter(|c| c.starts_with("unload")).cloned().collect();
    assert_eq!(unloads, ["unload 5"]);
    // Stream handles made by the device keep it; the device-wide synchronize runs.
    let s = dev.create_stream(StreamFlags::empty(), 0).unwrap();
    s.host_callback(Box::new(|| panic!("fake vendor: work fails on purpose"))).unwrap();
    assert!(matches!(dev.synchronize(), Err(Error::StreamWork { .. })));
}

#[test]
fn a_device_is_opened_once_while_a_handle_holds_it_whatever_the_order() {
    let registry = OpenDevices::<Fake>::new(gpuport_core::BackendKind::Host);
    let opened = AtomicUsize::new(0);
    let open = || {
        opened.fetch_add(1, Ordering::SeqCst);
        Ok(Fake::default())
    };
    // The higher ordinal first: the registry grows to hold it, and keeps it while a lower
    // one is added.
    let second = registry.open(2, 3, open).unwrap();
    let first = registry.open(0, 3, open).unwrap();
    assert!(Arc::ptr_eq(&registry.open(2, 3, open).unwrap(), &second));
    assert!(Arc::ptr_eq(&registry.open(0, 3, open).unwrap(), &first));
    assert!(Arc::ptr_eq(&registry.live(2).unwrap(), &second));
    assert!(registry.live(1).is_none(), "device 1 was never opened");
    assert_eq!(opened.load(Ordering::SeqCst), 2);
    assert!(matches!(registry.open(3, 3, open), Err(Error::DeviceNotFound { count: 3, .. })));
    // Once no handle holds it, the next open makes it anew.
    drop(second);
    assert!(registry.live(2).is_none());
    registry.open(2, 3, open).unwrap();
    assert_eq!(opened.load(Ordering::SeqCst), 3);
}

#[test]
fn an_empty_allocation_says_what_its_kind_says() {
    let dev = fake();
    let device = dev.alloc(0).unwrap();
    let pinned = dev.alloc_pinned(0, gpuport_core::HostAllocFlags::empty()).unwrap();
    let managed = dev.alloc_managed(0).unwrap();
    for (buffer, memory, host) in [
        (device, MemoryKind::Device, false),
        (pinned, MemoryKind::PinnedHost, true),
        (managed, MemoryKind::Managed, true),
    ] {
        let desc = buffer.desc();
        assert_eq!(desc.len, 0);
        assert_eq!(desc.memory, memory);
        assert_eq!(desc.host_accessible, host, "an empty {memory:?} allocation");
    }
}
