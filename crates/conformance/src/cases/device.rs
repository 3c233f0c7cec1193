//! Device-wide operations: synchronize, the synchronous memset, and blocking calls made
//! from inside a stream's own work.

use std::sync::mpsc;
use std::time::Duration;

use gpuport_runtime::{DefaultStream, Error, EventFlags};

use super::{pattern, read_all, stream, within, Gate, OpenOnDrop};
use crate::{ensure, Failure, Outcome, Target};

/// `Device::synchronize` while stream A is blocked and stream B waits on A's event: it
/// must not return before both have finished, and afterwards both results are there — on
/// every device of the port (a device-wide operation is each device's own).
pub fn synchronize_waits_for_every_stream(t: &Target) -> Outcome {
    t.devices.iter().try_for_each(synchronize_waits_on)
}

fn synchronize_waits_on(dev: &gpuport_runtime::AnyDevice) -> Outcome {
    let (a, b) = (stream(dev)?, stream(dev)?);
    let n = 1 << 16;
    let src = dev.alloc(n)?;
    let mid = dev.alloc(n)?;
    let dst = dev.alloc(n)?;
    let data = pattern(n, 31);
    a.write(&data, &src, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    gate.block(&a)?;
    a.copy(&src, 0, &mid, 0, n)?;
    a.record(&ev)?;
    b.wait(&ev)?;
    b.copy(&mid, 0, &dst, 0, n)?;
    let (tx, rx) = mpsc::channel();
    let waiter = dev.clone();
    std::thread::spawn(move || {
        let _ = tx.send(waiter.synchronize());
    });
    match rx.recv_timeout(Duration::from_millis(50)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Ok(result) => {
            return Err(Failure::new(format!(
                "{}: Device::synchronize returned ({result:?}) while a stream was still blocked",
                dev.id()
            )))
        }
        Err(e) => return Err(Failure::new(format!("the synchronizing thread died: {e}"))),
    }
    gate.open();
    rx.recv_timeout(Duration::from_secs(30)).map_err(|_| Failure::new("Device::synchronize never returned"))??;
    ensure!(a.query()? && b.query()?, "streams report pending work after Device::synchronize");
    let check = stream(dev)?;
    ensure!(read_all(&check, &dst)? == data, "B's copy had not run when Device::synchronize returned");
    Ok(())
}

/// The synchronous `Device::memset` is ordered after work already queued on the legacy
/// default stream (as `cuMemsetD8` is), without the caller synchronizing first — on every
/// device of the port.
pub fn memset_ordered_after_legacy_stream(t: &Target) -> Outcome {
    t.devices.iter().try_for_each(memset_ordered_on)
}

fn memset_ordered_on(dev: &gpuport_runtime::AnyDevice) -> Outcome {
    let legacy = dev.default_stream(DefaultStream::Legacy)?;
    let n = 4096;
    let b = dev.alloc(n)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&legacy)?;
    legacy.memset(&b, 0, n, 1)?;
    let (tx, rx) = mpsc::channel();
    let (setter, target) = (dev.clone(), b.clone());
    std::thread::spawn(move || {
        let _ = tx.send(setter.memset(&target, 0, n, 2));
    });
    // Give an unordered memset every chance to run before the queued one.
    if let Ok(result) = rx.recv_timeout(Duration::from_millis(50)) {
        result?;
        return Err(Failure::new(format!(
            "{}: Device::memset returned while the legacy stream's earlier work was still blocked",
            dev.id()
        )));
    }
    gate.open();
    rx.recv_timeout(Duration::from_secs(30)).map_err(|_| Failure::new("Device::memset never returned"))??;
    ensure!(read_all(&legacy, &b)? == vec![2u8; n], "Device::memset ran before the legacy stream's earlier memset");
    Ok(())
}

/// Blocking calls from a host callback that would wait for that callback: a clear
/// error, never a hang.
pub fn synchronize_from_own_callback_is_refused(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    let (tx, rx) = mpsc::channel();
    // The callback waits until the event's record is queued behind it: only then is
    // synchronizing the event waiting for the callback itself.
    let (recorded_tx, recorded_rx) = mpsc::channel::<()>();
    let (own, own_ev, own_dev) = (s.clone(), ev.clone(), dev.clone());
    s.host_callback(Box::new(move || {
        let _ = recorded_rx.recv_timeout(Duration::from_secs(30));
        let results = [
            ("Stream::synchronize", own.synchronize()),
            ("Event::synchronize", own_ev.synchronize()),
            ("Device::synchronize", own_dev.synchronize()),
        ];
        let _ = tx.send(results);
    }))?;
    s.record(&ev)?;
    let _ = recorded_tx.send(());
    let results = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
        Failure::new("a host callback synchronizing its own stream hung (it must get Error::WouldDeadlock)")
    })?;
    for (call, result) in results {
        ensure!(
            matches!(result, Err(Error::WouldDeadlock { .. })),
            "{call} from the stream's own callback gave {result:?}, expected Error::WouldDeadlock"
        );
    }
    within("synchronizing after the refused calls", move || s.synchronize())?;
    Ok(())
}

/// `Device::make_current` answers `Ok`, or `Unsupported` where the backend has no
/// per-thread current device — on every device, from a thread that never used it, and again
/// — and disturbs nothing: afterwards work on every device, this one and the others, runs
/// and reads back what it wrote (gpuport's own calls make their device current themselves).
pub fn make_current_answers_and_disturbs_nothing(t: &Target) -> Outcome {
    for (i, dev) in t.devices.iter().enumerate() {
        let fresh = dev.clone();
        let answers = std::thread::spawn(move || [fresh.make_current(), fresh.make_current()])
            .join()
            .map_err(|_| Failure::new(format!("{}: Device::make_current panicked", dev.id())))?;
        for answer in answers {
            match answer {
                Ok(()) | Err(Error::Unsupported { .. }) => {}
                Err(e) => {
                    return Err(Failure::new(format!(
                        "{}: Device::make_current answered {e}: it must be Ok, or Unsupported where the backend \
                         has no current device",
                        dev.id()
                    )))
                }
            }
        }
        let _ = dev.make_current();
        for (j, other) in t.devices.iter().enumerate() {
            let s = stream(other)?;
            let n = 4096 + 7;
            let buf = other.alloc(n)?;
            let data = pattern(n, (i * 8 + j) as u8);
            s.write(&data, &buf, 0)?;
            ensure!(
                read_all(&s, &buf)? == data,
                "{}: work after {}'s make_current read back other bytes",
                other.id(),
                dev.id()
            );
        }
    }
    Ok(())
}
