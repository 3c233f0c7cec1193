use gpuport_runtime::{EventFlags, Ownership};

use super::{pattern, read_all, stream, Gate, OpenOnDrop};
use crate::{ensure, Outcome, Target};

pub fn foreign_stream(t: &Target) -> Outcome {
    let dev = t.device();
    let owner = stream(dev)?;
    ensure!(owner.ownership() == Ownership::Owned, "a created stream is owned");
    let raw = owner.raw_handle();
    // SAFETY: `owner` keeps the stream alive for the whole use of the wrapper.
    let wrapped = unsafe { dev.wrap_stream(raw) }?;
    ensure!(wrapped.ownership() == Ownership::Borrowed, "a wrapped stream is borrowed");
    ensure!(wrapped.raw_handle() == raw, "the wrapper has another handle");
    let b = dev.alloc(512)?;
    let p = pattern(512, 6);
    wrapped.write(&p, &b, 0)?;
    wrapped.synchronize()?;
    drop(wrapped); // must not destroy the stream
    owner.memset(&b, 0, 1, 0)?;
    owner.synchronize()?;
    let mut expect = p;
    expect[0] = 0;
    ensure!(read_all(&owner, &b)? == expect, "the owner's stream stopped working after the wrapper dropped");
    Ok(())
}

pub fn foreign_event(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let owner = dev.create_event(EventFlags::empty())?;
    // SAFETY: `owner` keeps the event alive while the wrapper is used.
    let wrapped = unsafe { dev.wrap_event(owner.raw_handle()) }?;
    ensure!(wrapped.ownership() == Ownership::Borrowed, "a wrapped event is borrowed");
    s.record(&wrapped)?;
    wrapped.synchronize()?;
    drop(wrapped);
    s.record(&owner)?;
    owner.synchronize()?;
    ensure!(owner.query()?, "the owner's event stopped working after the wrapper dropped");
    Ok(())
}

/// Work queued through a wrapped stream and recorded on a wrapped event orders exactly as
/// through the owning handles: a stream waiting on the owner event waits for work queued
/// through the wrapper.
pub fn ordering_through_wrapped_handles(t: &Target) -> Outcome {
    let dev = t.device();
    let (owner, b) = (stream(dev)?, stream(dev)?);
    let event = dev.create_event(EventFlags::DISABLE_TIMING)?;
    // SAFETY: `owner` and `event` outlive the wrappers.
    let (ws, we) = unsafe { (dev.wrap_stream(owner.raw_handle())?, dev.wrap_event(event.raw_handle())?) };
    let n = 1 << 14;
    let (src, dst, out) = (dev.alloc(n)?, dev.alloc(n)?, dev.alloc(n)?);
    let data = pattern(n, 41);
    owner.write(&data, &src, 0)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&ws)?;
    ws.copy(&src, 0, &dst, 0, n)?;
    ws.record(&we)?;
    b.wait(&event)?;
    b.copy(&dst, 0, &out, 0, n)?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    ensure!(!owner.query()?, "the owning stream does not see work queued through its wrapper");
    ensure!(!b.query()?, "a wait on the owner event ignored a record made through the wrapped event");
    gate.open();
    b.synchronize()?;
    ensure!(read_all(&b, &out)? == data, "work through wrapped handles ran out of order");
    ensure!(owner.query()?, "the owning stream still has work after its wrapper's work completed");
    Ok(())
}

/// Pinned host memory written by a device copy is visible to the host once an event
/// recorded after the copy has completed — without synchronizing the stream.
pub fn pinned_visible_after_event(t: &Target) -> Outcome {
    let dev = t.device();
    let s = stream(dev)?;
    let n = 1 << 16;
    let src = dev.alloc(n)?;
    let data = pattern(n, 51);
    s.write(&data, &src, 0)?;
    let pinned = dev.alloc_pinned(n, Default::default())?;
    ensure!(pinned.is_host_accessible(), "pinned memory is not host-accessible");
    let ev = dev.create_event(EventFlags::DISABLE_TIMING)?;
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    gate.block(&s)?;
    s.copy(&src, 0, &pinned, 0, n)?;
    s.record(&ev)?;
    ensure!(!ev.query()?, "the event completed before the copy it follows could run");
    gate.open();
    ev.synchronize()?;
    let ptr = pinned.host_ptr(0, n)?;
    // SAFETY: `pinned` is host-accessible, `n` bytes long and alive; the event says the
    // only writer (the copy) has completed, and nothing else writes it.
    let seen = unsafe { std::slice::from_raw_parts(ptr.cast_const(), n) }.to_vec();
    ensure!(seen == data, "the host did not see the copy into pinned memory after its event");
    Ok(())
}
