use std::sync::{Arc, Mutex};

use gpuport_runtime::{DefaultStream, Error, EventFlags, ProgressReading};

use super::{finishes_within, pattern, read_all, stream, Gate, OpenOnDrop, FINISHES_WITHIN};
use crate::{ensure, Outcome, Target};

/// A copy this large takes the queue kit's parallel path (`PARALLEL_MIN`, 16 MiB), a
/// port's fast path for large copies in general: ordering is checked on both sides of it.
const LARGE: usize = if cfg!(miri) { (64 << 10) + 13 } else { (16 << 20) + 13 };

/// One stream runs its work in the order it was queued: a chain of memsets and copies of
/// 4 KiB over 32 buffers, and of one size past the large-copy threshold over three.
pub fn one_stream_in_order(t: &Target) -> Outcome {
    chain_in_order(t, 4096, 32)?;
    chain_in_order(t, LARGE, 3)
}

fn chain_in_order(t: &Target, n: usize, buffers: usize) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let bufs = (0..buffers).map(|_| dev.alloc(n)).collect::<Result<Vec<_>, _>>()?;
    let data = pattern(n, 1);
    s.write(&data, &bufs[0], 0)?;
    // Everything below is queued behind a closed gate, so work that escapes the stream's
    // order runs before the work it should follow, every time.
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    // A chain: each copy overwrites a memset of its destination and reads what the previous
    // copy wrote; a memset after it clobbers the source only once it was copied.
    for i in 1..bufs.len() {
        s.memset(&bufs[i], 0, n, 0x11)?;
        s.copy(&bufs[i - 1], 0, &bufs[i], 0, n)?;
        s.memset(&bufs[i - 1], 0, n, 0xCC)?;
    }
    std::thread::sleep(std::time::Duration::from_millis(10));
    gate.open();
    s.synchronize()?;
    ensure!(read_all(&s, bufs.last().unwrap())? == data, "the copy chain of {n} bytes lost data: ops ran out of order");
    ensure!(read_all(&s, &bufs[0])? == vec![0xCC; n], "the memset after the first copy of {n} bytes did not run last");
    Ok(())
}

/// A slow operation on stream A (a gated callback), then a copy, then a record; stream B
/// waits and copies on. B must see A's result.
pub fn cross_stream_event(t: &Target) -> Outcome {
    let dev = t.device();
    let (a, b) = (stream(dev)?, stream(dev)?);
    let n = 1 << 16;
    let src = dev.alloc(n)?;
    let mid = dev.alloc(n)?;
    let dst = dev.alloc(n)?;
    let data = pattern(n, 11);
    a.write(&data, &src, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let ev = dev.create_event(EventFlags::empty())?;
    gate.block(&a)?;
    a.copy(&src, 0, &mid, 0, n)?;
    a.record(&ev)?;
    b.wait(&ev)?;
    b.copy(&mid, 0, &dst, 0, n)?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    ensure!(!b.query()?, "stream B finished while the event it waits on cannot have completed");
    ensure!(!ev.query()?, "the event completed while stream A was still blocked");
    gate.open();
    b.synchronize()?;
    ensure!(read_all(&b, &dst)? == data, "stream B did not see stream A's result");
    ensure!(ev.query()?, "the event is not complete after B waited on it");
    Ok(())
}

/// The same shape without the wait: B must be able to run ahead of A — so the previous
/// case really tests the event, not an accidental serialisation. (B works on memory of
/// its own: reading what A writes without ordering would be a data race.)
pub fn without_wait_streams_overlap(t: &Target) -> Outcome {
    let dev = t.device();
    let (a, b) = (stream(dev)?, stream(dev)?);
    let n = 1 << 16;
    let (src, mid) = (dev.alloc(n)?, dev.alloc(n)?);
    let (other, dst) = (dev.alloc(n)?, dev.alloc(n)?);
    let data = pattern(n, 12);
    let unrelated = pattern(n, 99);
    a.write(&data, &src, 0)?;
    b.write(&unrelated, &other, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&a)?;
    a.copy(&src, 0, &mid, 0, n)?;
    // B's work touches nothing A's does (sharing memory without ordering would be a data
    // race): it must complete while A is still held — seen within `FINISHES_WITHIN`, so a
    // port whose streams share one queue fails there rather than when the gate gives up.
    b.copy(&other, 0, &dst, 0, n)?;
    ensure!(finishes_within(&b, FINISHES_WITHIN)?, "stream B's work waited for the held stream A");
    b.synchronize()?;
    ensure!(read_all(&b, &dst)? == unrelated, "stream B's copy did not complete while A was held");
    ensure!(!a.query()?, "stream A finished while blocked");
    gate.open();
    a.synchronize()?;
    ensure!(read_all(&a, &mid)? == data, "stream A's copy did not run after the gate opened");
    Ok(())
}

/// A C host function's argument: the order list and the number it pushes.
struct Pushed {
    seen: Arc<Mutex<Vec<i32>>>,
    value: i32,
}

/// The C host function of [`host_callbacks_in_order`]: pushes its number, frees its box.
unsafe extern "C" fn push_value(user: *mut std::ffi::c_void) {
    // SAFETY: a `Box<Pushed>` leaked for this one call.
    let pushed = unsafe { Box::from_raw(user.cast::<Pushed>()) };
    // Nothing unwinds out of a C function: a poisoned lock (a failed case elsewhere) is
    // passed over, and any panic is caught here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Ok(mut seen) = pushed.seen.lock() {
            seen.push(pushed.value);
        }
    }));
}

/// Host callbacks and C host functions (`Stream::host_function`), interleaved, run once
/// each, in the order queued.
pub fn host_callbacks_in_order(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    for i in 0..100 {
        let seen = seen.clone();
        if i % 3 == 1 {
            let user = Box::into_raw(Box::new(Pushed { seen, value: i }));
            // SAFETY: `push_value` takes the box once, on any thread, without unwinding.
            if let Err(e) = unsafe { s.host_function(push_value, user.cast()) } {
                // SAFETY: refused, so the box was not handed over.
                drop(unsafe { Box::from_raw(user) });
                return Err(e.into());
            }
        } else {
            s.host_callback(Box::new(move || seen.lock().unwrap().push(i)))?;
        }
    }
    s.synchronize()?;
    let seen = seen.lock().unwrap().clone();
    ensure!(seen == (0..100).collect::<Vec<_>>(), "callbacks ran out of order: {seen:?}");
    Ok(())
}

pub fn stream_query(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    ensure!(s.query()?, "a new stream has no work");
    progress_says(&s, ProgressReading::Done, "a new stream")?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    ensure!(!s.query()?, "a blocked stream reports done");
    progress_says(&s, ProgressReading::Pending, "a blocked stream")?;
    gate.open();
    s.synchronize()?;
    ensure!(s.query()?, "a synchronized stream reports pending work");
    progress_says(&s, ProgressReading::Done, "a synchronized stream")?;
    Ok(())
}

/// `Stream::run_if_idle`: never runs `f` while work is pending (held by a gate); where the
/// stream runs it, it runs once, on the calling thread, and work `f` queues runs after it.
/// A stream may always decline (the provided method does).
pub fn run_if_idle(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    let mut ran = 0;
    ensure!(!s.run_if_idle(&mut || ran += 1) && ran == 0, "ran while a callback held the stream (ran {ran} times)");
    gate.open();
    s.synchronize()?;
    let caller = std::thread::current().id();
    let (mut calls, mut on, mut queued) = (0, None, Ok(()));
    let f_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_by_later = Arc::new(Mutex::new(None));
    let ran = s.run_if_idle(&mut || {
        calls += 1;
        on = Some(std::thread::current().id());
        let (done, seen) = (f_done.clone(), seen_by_later.clone());
        queued = s.host_callback(Box::new(move || {
            *seen.lock().unwrap() = Some(done.load(std::sync::atomic::Ordering::SeqCst));
        }));
        f_done.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    queued?;
    s.synchronize()?;
    if !ran {
        ensure!(calls == 0, "declined, yet ran f {calls} times");
        return Ok(());
    }
    ensure!(calls == 1, "ran f {calls} times");
    ensure!(on == Some(caller), "ran f on another thread");
    let seen = *seen_by_later.lock().unwrap();
    ensure!(seen == Some(true), "work f queued ran before f returned (it saw f unfinished: {seen:?})");
    Ok(())
}

/// Where the stream publishes its counters (`Stream::progress`), they must say what its
/// query says: a plugin boundary answers queries from them alone.
fn progress_says(s: &gpuport_runtime::AnyStream, expected: ProgressReading, what: &str) -> Outcome {
    if let Some(progress) = s.progress() {
        let read = progress.read();
        ensure!(read == expected, "{what}: its published progress reads {read:?}, its query says {expected:?}");
    }
    Ok(())
}

pub fn default_streams(t: &Target) -> Outcome {
    // Each device's legacy stream is its own (its handle may be one value on every device,
    // as CUDA's `CU_STREAM_LEGACY` is): it names its device and round-trips its memory.
    for dev in &t.devices {
        let legacy = dev.default_stream(DefaultStream::Legacy)?;
        ensure!(legacy.device_id() == dev.id(), "{}'s legacy default stream is {}'s", dev.id(), legacy.device_id());
        let b = dev.alloc(64)?;
        let p = pattern(64, 9);
        legacy.write(&p, &b, 0)?;
        ensure!(read_all(&legacy, &b)? == p, "{}'s legacy default stream did not round-trip", dev.id());
    }
    let dev = t.device();
    let legacy = dev.default_stream(DefaultStream::Legacy)?;
    ensure!(legacy.ownership() == gpuport_runtime::Ownership::Borrowed, "the default stream must be borrowed");
    let b = dev.alloc(256)?;
    let p = pattern(256, 4);
    legacy.write(&p, &b, 0)?;
    ensure!(read_all(&legacy, &b)? == p, "the legacy default stream did not round-trip");
    let again = dev.default_stream(DefaultStream::Legacy)?;
    ensure!(again.raw_handle() == legacy.raw_handle(), "the legacy default stream must be one stream");
    drop(legacy);
    again.synchronize()?; // still usable: borrowed handles destroy nothing
    match dev.default_stream(DefaultStream::PerThread) {
        Err(Error::Unsupported { .. }) => {}
        Err(e) => return Err(e.into()),
        Ok(pt) => {
            pt.memset(&b, 0, 256, 1)?;
            pt.synchronize()?;
            let other = std::thread::spawn({
                let dev = dev.clone();
                move || dev.default_stream(DefaultStream::PerThread).map(|s| s.raw_handle())
            })
            .join()
            .map_err(|_| crate::Failure::new("thread panicked"))??;
            ensure!(
                other != pt.raw_handle() || pt.raw_handle() == 2,
                "per-thread streams of two threads are one stream"
            );
        }
    }
    Ok(())
}
