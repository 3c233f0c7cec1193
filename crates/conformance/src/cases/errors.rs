use std::time::{Duration, Instant};

use gpuport_runtime::{BackendKind, Buffer, BufferDesc, DeviceId, Error, EventFlags, MemoryKind};

use super::{read_all, stream, Gate, OpenOnDrop};
use crate::{deliberate_panic, ensure, ensure_err, Outcome, Target};

/// Memory of a backend the target cannot reach.
fn foreign_buffer() -> Buffer {
    let desc = BufferDesc {
        addr: 0x7000_0000_0000,
        len: 4096,
        device: DeviceId::new(BackendKind::Plugin("conformance-foreign"), 0),
        memory: MemoryKind::Device,
        host_accessible: false,
    };
    // SAFETY: the buffer claims memory no backend can reach; every use must be refused
    // before anything dereferences it.
    unsafe { Buffer::from_borrowed(desc, None) }.expect("a valid description")
}

pub fn backend_mismatch(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let mine = dev.alloc(4096)?;
    let other = foreign_buffer();
    ensure_err!(s.copy(&other, 0, &mine, 0, 16), Error::BackendMismatch { .. }, "copy from another backend's memory");
    ensure_err!(s.copy(&mine, 0, &other, 0, 16), Error::BackendMismatch { .. }, "copy to another backend's memory");
    ensure_err!(s.memset(&other, 0, 16, 0), Error::BackendMismatch { .. }, "memset of another backend's memory");
    let mut out = [0u8; 4];
    ensure_err!(s.read(&other, 0, &mut out), Error::BackendMismatch { .. }, "read of another backend's memory");
    for f in &t.foreign {
        let fev = f.create_event(EventFlags::empty())?;
        ensure_err!(s.record(&fev), Error::BackendMismatch { .. }, format!("recording a {} event", f.id()));
        ensure_err!(s.wait(&fev), Error::BackendMismatch { .. }, format!("waiting on a {} event", f.id()));
        let fs = f.create_stream(Default::default(), 0)?;
        ensure_err!(
            dev.alloc_async(16, &fs),
            Error::BackendMismatch { .. },
            format!("alloc_async on a {} stream", f.id())
        );
        let ev = dev.create_event(EventFlags::empty())?;
        ensure_err!(fs.wait(&ev), Error::BackendMismatch { .. }, format!("a {} stream waiting on our event", f.id()));
    }
    s.synchronize()?;
    Ok(())
}

pub fn bad_arguments(t: &Target) -> Outcome {
    let dev = t.device();
    let module = dev.load_module(gpuport_runtime::ModuleImage::Registered("no-such-module-anywhere"));
    if let Ok(m) = module {
        ensure_err!(dev.kernel(&m, "no_such_kernel"), Error::InvalidArgument { .. }, "a missing kernel");
    }
    ensure_err!(
        dev.load_module(gpuport_runtime::ModuleImage::Ptx("not ptx at all"))
            .and(dev.load_module(gpuport_runtime::ModuleImage::Registered("no-such-module-anywhere"))),
        Error::InvalidArgument { .. } | Error::Unsupported { .. } | Error::Vendor { .. },
        "loading garbage modules"
    );
    Ok(())
}

/// A host callback that panics: the device reports it without clearing it while the
/// stream lives (sticky), the stream's next `synchronize` reports it once and clears it,
/// and work queued after the callback still runs.
pub fn host_callback_panic_is_reported(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let b = dev.alloc(256)?;
    s.host_callback(Box::new(|| deliberate_panic("a host callback panics")))?;
    s.memset(&b, 0, 256, 0x42)?;
    ensure_err!(dev.synchronize(), Error::StreamWork { .. }, "Device::synchronize after a panicking host callback");
    ensure_err!(dev.synchronize(), Error::StreamWork { .. }, "a second Device::synchronize (errors are sticky)");
    ensure_err!(s.synchronize(), Error::StreamWork { .. }, "Stream::synchronize after a panicking host callback");
    s.synchronize()?; // reported once by the stream, which clears it
    dev.synchronize()?;
    ensure!(read_all(&s, &b)? == vec![0x42; 256], "work queued after the panicking callback did not run");
    Ok(())
}

/// An error of work on a stream that is then dropped reaches the next
/// `Device::synchronize`, whether the stream still had work queued when it was dropped
/// or had long finished; that report is its only one, so it is cleared there.
pub fn dropped_stream_error_is_reported(t: &Target) -> Outcome {
    let dev = t.device();
    // Dropped while busy: the failing callback runs after the last handle is gone.
    let busy = stream(dev)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&busy)?;
    busy.host_callback(Box::new(|| deliberate_panic("work of a stream dropped while busy fails")))?;
    drop(busy);
    gate.open();
    ensure_err!(dev.synchronize(), Error::StreamWork { .. }, "Device::synchronize after a busy stream was dropped");
    dev.synchronize()?;
    // Dropped when idle: the failure happened before the drop, and the stream has gone.
    let idle = stream(dev)?;
    idle.host_callback(Box::new(|| deliberate_panic("work of a stream dropped when idle fails")))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !idle.query()? {
        ensure!(Instant::now() < deadline, "the failing callback never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(idle);
    std::thread::sleep(Duration::from_millis(20)); // let any worker of the stream exit
    ensure_err!(dev.synchronize(), Error::StreamWork { .. }, "Device::synchronize after an idle stream was dropped");
    dev.synchronize()?;
    Ok(())
}

/// An event whose owner is gone is refused by every operation, not answered.
pub fn destroyed_event_is_refused(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let owner = dev.create_event(EventFlags::empty())?;
    s.record(&owner)?;
    owner.synchronize()?;
    // SAFETY: the handle is live here; the backend checks handles (Need::CheckedHandles),
    // so using the wrapper after the owner is gone must be refused, not trusted.
    let stale = unsafe { dev.wrap_event(owner.raw_handle()) }?;
    drop(owner);
    ensure_err!(stale.query(), Error::InvalidHandle { .. }, "query of a destroyed event");
    ensure_err!(stale.synchronize(), Error::InvalidHandle { .. }, "synchronize of a destroyed event");
    ensure_err!(s.record(&stale), Error::InvalidHandle { .. }, "recording a destroyed event");
    ensure_err!(s.wait(&stale), Error::InvalidHandle { .. }, "waiting on a destroyed event");
    s.synchronize()?;
    Ok(())
}
