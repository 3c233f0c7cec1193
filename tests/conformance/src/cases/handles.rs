use gpuport::{DynDevice, DynEvent, DynStream, EventFlags, Ownership};

use super::{pattern, read_all, stream};
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
