//! The pending work of one allocation, shared by every [`crate::Array`] view and clone of
//! it (cudarc's per-allocation read and write events; CubeCL's per-buffer stream
//! position).
//!
//! For each stream that wrote the allocation since the last full join, the event of its
//! latest write; for each stream that read it since, the event of its latest read. A
//! reader's stream waits on the writes, a writer's on the writes and the reads — an event
//! wait on the stream, never a host block when both streams are of one backend. Across
//! backends (no shared event type) a fresh event on the source stream is waited for by a
//! host callback on the waiting stream: that blocks the waiting stream's own worker or
//! callback thread, never the caller's.
//!
//! Events are created once per (stream, read/write) pair and re-recorded after that, so
//! steady-state work on an array allocates nothing here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use gpuport_core::{DeviceId, Error, EventFlags, Result};

use crate::dynamic::{AnyDevice, AnyEvent, AnyStream};

/// How work uses an array: a write conflicts with earlier reads and writes, a read only
/// with earlier writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only.
    Read,
    /// Read and write.
    Write,
}

/// A stream's identity: its device and raw handle.
type StreamKey = (DeviceId, usize);

fn key(stream: &AnyStream) -> StreamKey {
    (stream.device_id(), stream.raw_handle())
}

/// The latest access of one stream, marked by an event recorded after it.
struct Mark {
    key: StreamKey,
    device: AnyDevice,
    stream: AnyStream,
    event: AnyEvent,
    /// Bumped at every re-record, so a host synchronize forgets only what it waited for.
    seq: u64,
}

#[derive(Default)]
struct Marks {
    writes: Vec<Mark>,
    reads: Vec<Mark>,
    /// Streams whose later work is ordered after every mark above (they waited for all of
    /// it and nothing was added by another stream since): a write on one of them is a
    /// full join and replaces every mark.
    joined: Vec<StreamKey>,
}

/// Pending work of one allocation.
#[derive(Default)]
pub(crate) struct PendingWork {
    state: Mutex<Marks>,
    /// Whether `state` holds any mark, written under the lock whenever marks come or go:
    /// an export or read of an array nobody queued work on (the common interchange case)
    /// then takes no lock and waits for nothing.
    marked: AtomicBool,
}

/// Makes later work on `waiter` wait for `event`, recorded on `source` (a stream of
/// `source_device`). Never blocks the calling thread.
pub(crate) fn order_after(
    waiter: &AnyStream,
    source_device: &AnyDevice,
    source: &AnyStream,
    event: &AnyEvent,
) -> Result<()> {
    if key(waiter) == key(source) {
        return Ok(()); // one stream: already in order
    }
    if waiter.device_id().kind == event.device_id().kind {
        return waiter.wait(event);
    }
    // Across backends. A fresh event pins the point on `source` (the stored one may be
    // re-recorded later, past work that could itself wait on `waiter`). The waiter's stream
    // waits for it in a host callback; a wait that fails fails the callback, so the
    // waiter's stream keeps the error (its next synchronize reports it) — the ordering is
    // never lost in silence.
    let fence = source_device.create_event(EventFlags::DISABLE_TIMING)?;
    source.record(&fence)?;
    waiter.host_callback(Box::new(move || {
        if let Err(err) = fence.synchronize() {
            gpuport_core::fail_host_callback(err);
        }
    }))
}

impl PendingWork {
    fn lock(&self) -> MutexGuard<'_, Marks> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `marked` in step with `state` (called with the lock held, after a change).
    fn publish(&self, state: &Marks) {
        self.marked.store(!state.writes.is_empty() || !state.reads.is_empty(), Ordering::Release);
    }

    /// True when no mark is held: nothing to wait for. Work recorded by another thread at
    /// the same moment is unordered with the caller either way, as with the lock.
    fn unmarked(&self) -> bool {
        !self.marked.load(Ordering::Acquire)
    }

    /// Makes `stream` wait for what an `access` on it conflicts with.
    pub(crate) fn wait(&self, stream: &AnyStream, access: Access) -> Result<()> {
        // A read waits only for writes; with no mark there are none. (A write still takes
        // the lock: it notes that `stream` is joined.)
        if access == Access::Read && self.unmarked() {
            return Ok(());
        }
        let mut state = self.lock();
        let k = key(stream);
        let reads: &[Mark] = if access == Access::Write { &state.reads } else { &[] };
        for mark in state.writes.iter().chain(reads) {
            order_after(stream, &mark.device, &mark.stream, &mark.event)?;
        }
        if access == Access::Write && !state.joined.contains(&k) {
            state.joined.push(k);
        }
        Ok(())
    }

    /// Notes that work just queued on `stream` (of `device`) accessed the allocation.
    pub(crate) fn record(&self, device: &AnyDevice, stream: &AnyStream, access: Access) -> Result<()> {
        if stream.device_id() != device.id() {
            return Err(Error::invalid_argument(format!(
                "a stream of {} recorded as a stream of {}",
                stream.device_id(),
                device.id()
            )));
        }
        let mut state = self.lock();
        let k = key(stream);
        let full_join = access == Access::Write && state.joined.contains(&k);
        let list = if access == Access::Write { &mut state.writes } else { &mut state.reads };
        let at = match list.iter().position(|m| m.key == k) {
            Some(i) => i,
            None => {
                let event = device.create_event(EventFlags::DISABLE_TIMING)?;
                list.push(Mark { key: k, device: device.clone(), stream: stream.clone(), event, seq: 0 });
                // A mark now exists, even if recording it below fails.
                self.marked.store(true, Ordering::Release);
                list.len() - 1
            }
        };
        stream.record(&list[at].event)?;
        list[at].seq += 1;
        if full_join {
            // `stream` waited for everything, so its write is after all of it.
            let mark = state.writes.swap_remove(at);
            state.writes = vec![mark];
            state.reads.clear();
        }
        state.joined.retain(|j| *j == k);
        self.publish(&state);
        Ok(())
    }

    /// Blocks the calling thread until all pending work has completed, then forgets it.
    pub(crate) fn synchronize(&self) -> Result<()> {
        if self.unmarked() {
            return Ok(());
        }
        let snapshot: Vec<(StreamKey, bool, u64, AnyEvent)> = {
            let state = self.lock();
            let marks = state.writes.iter().map(|m| (m, true)).chain(state.reads.iter().map(|m| (m, false)));
            marks.map(|(m, write)| (m.key, write, m.seq, m.event.clone())).collect()
        };
        for (_, _, _, event) in &snapshot {
            event.synchronize()?;
        }
        let mut state = self.lock();
        let done =
            |m: &Mark, write: bool| snapshot.iter().any(|(k, w, seq, _)| *k == m.key && *w == write && *seq == m.seq);
        state.writes.retain(|m| !done(m, true));
        state.reads.retain(|m| !done(m, false));
        self.publish(&state);
        Ok(())
    }

    /// True while some recorded access has not completed.
    pub(crate) fn is_pending(&self) -> Result<bool> {
        if self.unmarked() {
            return Ok(false);
        }
        let state = self.lock();
        for mark in state.writes.iter().chain(&state.reads) {
            if !mark.event.query()? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
