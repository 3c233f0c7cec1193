//! Staging sets for staged copies, pooled per (source device, destination device): two
//! pinned buffers and the four events that order them, made once and reused,
//! not per call.
//!
//! A set goes back to the pool as soon as its copy is queued; it is handed out again only
//! once that copy has drained both buffers (its `drained` events are complete), so reuse
//! never overwrites bytes still in flight and never makes a caller wait: while every
//! pooled set is busy, a new one is made.

use std::sync::{Mutex, MutexGuard};

use gpuport_core::{BackendKind, Buffer, DeviceId, EventFlags, Result};

use crate::dynamic::{AnyDevice, AnyEvent};

/// Pinned buffers and their events for one device pair.
pub(super) struct StagingSet {
    key: (DeviceId, DeviceId),
    /// Bytes each buffer holds.
    capacity: usize,
    pub(super) stage: [Buffer; 2],
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
    let flags = EventFlags::DISABLE_TIMING;
    Ok(StagingSet {
        key,
        capacity,
        stage: [pin_on.alloc_pinned(capacity, Default::default())?, pin_on.alloc_pinned(capacity, Default::default())?],
        filled: [src.create_event(flags)?, src.create_event(flags)?],
        drained: [dst.create_event(flags)?, dst.create_event(flags)?],
    })
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
