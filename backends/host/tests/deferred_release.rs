//! Nothing queued work holds is released on a stream worker: the last clone of a stream,
//! an event or a buffer (and a foreign owner kept alive by a buffer) dropped there goes to
//! the release thread (`gpuport_core::release`).

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use gpuport_core::{release, Backend, Buffer, BufferDesc, Device, EventFlags, MemoryKind, Stream, StreamFlags};
use gpuport_host::HostBackend;

/// A foreign owner: reports the thread it is dropped on, after running `on_drop`.
struct Owner<F: FnMut() + Send + Sync> {
    on_drop: F,
    dropped_on: Sender<ThreadId>,
}
impl<F: FnMut() + Send + Sync> Drop for Owner<F> {
    fn drop(&mut self) {
        (self.on_drop)();
        let _ = self.dropped_on.send(std::thread::current().id());
    }
}

/// A borrowed host buffer over `memory`, whose owner reports its drop.
fn foreign_buffer(memory: &mut [u8], owner: impl Send + Sync + 'static) -> Buffer {
    let desc = BufferDesc {
        addr: memory.as_mut_ptr() as usize as u64,
        len: memory.len(),
        device: gpuport_core::DeviceId::HOST,
        memory: MemoryKind::Host,
        host_accessible: true,
    };
    // SAFETY: `memory` outlives every use: each test synchronizes and flushes the release
    // thread before it returns.
    unsafe { Buffer::from_borrowed(desc, Some(Box::new(owner))) }.unwrap()
}

#[test]
fn a_callback_holding_the_last_clones_completes_and_releases_them() {
    let dev = HostBackend.open(0).unwrap();
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let event = dev.create_event(EventFlags::empty()).unwrap();
    let raw_stream = stream.raw_handle();
    let mut memory = vec![0u8; 64];
    let (tx, rx) = channel();
    let buffer = foreign_buffer(&mut memory, Owner { on_drop: || {}, dropped_on: tx });
    let (ran_tx, ran) = channel();
    let (s, e, b) = (stream.clone(), event.clone(), buffer.clone());
    stream
        .host_callback(Box::new(move || {
            // The callback holds the last clone of its own stream, an event and a buffer.
            let _keep = (&s, &e, &b);
            ran_tx.send(std::thread::current().id()).unwrap();
        }))
        .unwrap();
    drop((stream, event, buffer));
    let worker = ran.recv_timeout(Duration::from_secs(30)).expect("the callback ran");
    dev.synchronize().unwrap();
    release::flush();
    let dropped_on = rx.recv_timeout(Duration::from_secs(30)).expect("the buffer's owner was released");
    assert_ne!(dropped_on, worker, "the owner was released on the stream's own worker");
    // SAFETY: the raw handle is only looked up; a released stream is refused.
    assert!(unsafe { dev.wrap_stream(raw_stream) }.is_err(), "the stream was released");
}

#[test]
fn a_keep_alive_that_needs_the_callers_lock_does_not_deadlock_synchronize() {
    // The caller holds a lock (think: the Python GIL) while it synchronizes; the buffer's
    // foreign owner needs that lock to be released. Released on the worker, this deadlocks.
    let dev = HostBackend.open(0).unwrap();
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let gil = Arc::new(Mutex::new(()));
    let mut memory = vec![0u8; 4096];
    let (tx, rx) = channel();
    let lock = gil.clone();
    let owner = Owner {
        on_drop: move || {
            let _held = lock.lock().unwrap();
        },
        dropped_on: tx,
    };
    let dst = foreign_buffer(&mut memory, owner);
    let src = dev.alloc(4096).unwrap();
    let held = gil.lock().unwrap();
    // Hold the stream until `dst` is dropped here, so the queued copy surely holds the
    // last clone (else, on a loaded machine, the copy could finish first and this thread
    // would release the owner itself, under the lock).
    let (go_tx, go) = channel::<()>();
    stream
        .host_callback(Box::new(move || {
            let _ = go.recv_timeout(Duration::from_secs(30));
        }))
        .unwrap();
    stream.copy(&src, 0, &dst, 0, 4096).unwrap();
    drop(dst); // queued work holds the last clone
    go_tx.send(()).unwrap();
    let (done_tx, done) = channel();
    let sync = std::thread::spawn(move || {
        let result = stream.synchronize();
        let _ = done_tx.send(());
        result
    });
    done.recv_timeout(Duration::from_secs(30)).expect("synchronize deadlocked on the owner's release");
    sync.join().unwrap().unwrap();
    assert!(rx.try_recv().is_err(), "the owner cannot have been released while the lock is held");
    drop(held);
    release::flush();
    rx.recv_timeout(Duration::from_secs(30)).expect("released once the lock is free");
}
