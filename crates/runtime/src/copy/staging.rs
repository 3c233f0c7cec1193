//! Staging sets for staged copies, pooled per (source device, destination device): two
//! pinned buffers and the four events that order them, made once and reused,
//! not per call.
//!
//! The buffers are page-locked for both sides. They are allocated pinned by the side that
//! does DMA into or out of them (the destination, unless it is the host), and registered
//! with the other side's backend when that is another vendor (a CUDA ↔ ROCm copy): to a
//! driver, another vendor's pinned memory is pageable memory, and an asynchronous copy into
//! pageable memory returns only once it is done — the caller would wait for each chunk's
//! first half before queuing the next, and the two halves of the pipeline could not
//! overlap. Where the other side has no registration call (the host and software
//! backends, whose copies never wait on the caller), it uses the buffers as they are.
//!
//! A set goes back to the pool as soon as its copy is queued; it is handed out again only
//! once that copy has drained both buffers (its `drained` events are complete), so reuse
//! never overwrites bytes still in flight and never makes a caller wait: while every
//! pooled set is busy, a new one is made.

use std::sync::{Mutex, MutexGuard};

use gpuport_core::{BackendKind, Buffer, DeviceId, Error, EventFlags, Result};

use crate::dynamic::{AnyDevice, AnyEvent};

/// Pinned buffers and their events for one device pair.
pub(super) struct StagingSet {
    key: (DeviceId, DeviceId),
    /// Bytes each buffer holds.
    capacity: usize,
    /// The buffers as the source's streams copy into them.
    pub(super) fill: [Buffer; 2],
    /// The same buffers as the destination's streams copy out of them.
    pub(super) drain: [Buffer; 2],
    pub(super) filled: [AnyEvent; 2],
    pub(super) drained: [AnyEvent; 2],
}

/// Sets kept per device pair at most (a third concurrent copy makes its own, dropped after).
const KEEP_PER_PAIR: usize = 2;

static POOL: Mutex<Vec<StagingSet>> = Mutex::new(Vec::new());

fn pool() -> MutexGuard<'static, Vec<StagingSet>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A set for copies from `src` to `dst` with chunks of `chunk` bytes: a pooled one that is
/// large enough and free, else a new one sized for the
/// largest chunk this engine uses (`max_chunk`) when the copy is that large, or for
/// `chunk` rounded up to a power of two.
pub(super) fn checkout(src: &AnyDevice, dst: &AnyDevice, chunk: usize, max_chunk: usize) -> Result<StagingSet> {
    let key = (src.id(), dst.id());
    {
        let mut sets = pool();
        // Only a set whose previous copy has drained both buffers: never a host wait here
        // (that copy may be held behind work the caller has yet to queue).
        let free = |s: &StagingSet| s.drained.iter().all(|e| e.query().unwrap_or(false));
        if let Some(i) = sets.iter().position(|s| s.key == key && s.capacity >= chunk && free(s)) {
            return Ok(sets.swap_remove(i));
        }
    }
    let capacity = chunk.checked_next_power_of_two().unwrap_or(chunk).min(max_chunk).max(chunk);
    // Pin on the side that does DMA: the destination unless it is the host itself.
    let pin_on = if dst.id().kind == BackendKind::Host { src } else { dst };
    let pinned =
        [pin_on.alloc_pinned(capacity, Default::default())?, pin_on.alloc_pinned(capacity, Default::default())?];
    let seen_by = |device: &AnyDevice| -> Result<[Buffer; 2]> {
        Ok([page_locked_for(device, &pinned[0])?, page_locked_for(device, &pinned[1])?])
    };
    let flags = EventFlags::DISABLE_TIMING;
    Ok(StagingSet {
        key,
        capacity,
        fill: seen_by(src)?,
        drain: seen_by(dst)?,
        filled: [src.create_event(flags)?, src.create_event(flags)?],
        drained: [dst.create_event(flags)?, dst.create_event(flags)?],
    })
}

/// `pinned` as `device` copies it: as it is on its own backend, else registered with
/// `device`'s backend (the registration lasts as long as the returned buffer), or as it is
/// where that backend has no registration call.
fn page_locked_for(device: &AnyDevice, pinned: &Buffer) -> Result<Buffer> {
    if pinned.device().kind == device.id().kind {
        return Ok(pinned.clone());
    }
    match device.register_host(pinned) {
        Err(Error::Unsupported { .. }) => Ok(pinned.clone()),
        registered => registered,
    }
}

/// Drops every pooled set (their buffers and events are released as any buffer is: after
/// the work queued on them).
pub(super) fn release_all() {
    let sets = std::mem::take(&mut *pool());
    drop(sets);
}

/// Returns a set to the pool (or drops it when the pair already has enough).
pub(super) fn give_back(set: StagingSet) {
    let mut sets = pool();
    if sets.iter().filter(|s| s.key == set.key).count() < KEEP_PER_PAIR {
        sets.push(set);
    }
}
