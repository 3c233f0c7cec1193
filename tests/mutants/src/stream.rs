//! The mutants' streams and events: `gpuport-queue`'s, with the stream- and event-level
//! flaws.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gpuport_core::{
    Buffer, DeviceId, Event, EventFlags, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream,
    StreamFlags,
};
use gpuport_queue::{host_translator, QueueEvent, QueueStream};

use crate::{flaw, MutantBackend};

/// One stream: its queue, a second queue for the out-of-order mutant, and whether
/// dropping it destroys the queue (the flawed wrapper).
pub(crate) struct StreamInner {
    main: QueueStream,
    second: Option<QueueStream>,
    turn: AtomicUsize,
    destroy_on_drop: bool,
}

impl StreamInner {
    pub(crate) fn new(main: QueueStream, second: Option<QueueStream>, destroy_on_drop: bool) -> Self {
        StreamInner { main, second, turn: AtomicUsize::new(0), destroy_on_drop }
    }

    pub(crate) fn main(&self) -> &QueueStream {
        &self.main
    }

    /// The queue the next operation goes to: the main one, or the two in turn.
    fn next(&self) -> &QueueStream {
        match &self.second {
            Some(second) if self.turn.fetch_add(1, Ordering::Relaxed) % 2 == 1 => second,
            _ => self.main(),
        }
    }

    fn all(&self) -> impl Iterator<Item = &QueueStream> {
        std::iter::once(&self.main).chain(&self.second)
    }

    pub(crate) fn to_borrowed(&self) -> StreamInner {
        let second = self.second.as_ref().map(QueueStream::to_borrowed);
        StreamInner { main: self.main.to_borrowed(), second, turn: AtomicUsize::new(0), destroy_on_drop: false }
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.destroy_on_drop {
            self.main.queue().close();
        }
    }
}

/// A stream of mutant `F`.
pub struct MutantStream<const F: u8>(Arc<StreamInner>);

impl<const F: u8> Clone for MutantStream<F> {
    fn clone(&self) -> Self {
        MutantStream(self.0.clone())
    }
}

impl<const F: u8> MutantStream<F> {
    pub(crate) fn new(inner: Arc<StreamInner>) -> Self {
        MutantStream(inner)
    }
}

impl<const F: u8> Stream for MutantStream<F> {
    type Backend = MutantBackend<F>;

    fn device_id(&self) -> DeviceId {
        self.0.main().device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.main().ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.main().raw_handle()
    }
    fn flags(&self) -> StreamFlags {
        self.0.main().flags()
    }
    fn priority(&self) -> i32 {
        0
    }
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        if F == flaw::COPY_DROPS_BUFFERS {
            gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
            let s = host_translator("copy")(src, src_offset, len)?;
            let d = host_translator("copy")(dst, dst_offset, len)?;
            // SAFETY: the flaw: the ranges were checked, but the copy keeps neither buffer,
            // so memory its caller drops goes back to the queue kit while the copy waits.
            // The case that catches it uses blocks of 64 KiB, which the kit's cache keeps
            // allocated and hands out again: the copy then reads and writes another
            // buffer's bytes (what the case sees), never memory returned to the system.
            return unsafe { self.0.next().queue().copy(s, d, len, [None, None]) };
        }
        let src_offset = if F == flaw::COPY_IGNORES_OFFSET { 0 } else { src_offset };
        self.0.next().copy(src, src_offset, dst, dst_offset, len, host_translator("copy"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        // Rounds an odd length up to even where the buffer has room: one byte too many.
        let len = if F == flaw::FILL_OVERRUNS && len % 2 == 1 && offset + len < dst.len() { len + 1 } else { len };
        self.0.next().memset(dst, offset, len, value, host_translator("memset"))
    }
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        // A large write (a fast path of its own, say) forgets the destination offset.
        let dst_offset = if F == flaw::LARGE_WRITE_AT_ZERO && src.len() > 64 << 10 { 0 } else { dst_offset };
        self.0.next().write(src, dst, dst_offset, host_translator("write"))
    }
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.0.next().read(src, src_offset, dst, host_translator("read"))
    }
    fn record(&self, event: &MutantEvent<F>) -> Result<()> {
        self.0.next().record(&event.queue)
    }
    fn wait(&self, event: &MutantEvent<F>) -> Result<()> {
        if F == flaw::NOOP_WAIT {
            return Ok(());
        }
        // Ignores an event of another device.
        if F == flaw::NO_WAIT_ACROSS_DEVICES && event.queue.device_id() != self.0.main().device_id() {
            return Ok(());
        }
        self.0.next().wait(&event.queue)
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        if F == flaw::LOST_PANICS {
            return self.0.next().host_callback(Box::new(move || {
                let _ = catch_unwind(AssertUnwindSafe(f));
            }));
        }
        self.0.next().host_callback(f)
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        self.0.next().launch(kernel, config, args, host_translator("launch"))
    }
    fn query(&self) -> Result<bool> {
        if F == flaw::QUERY_ALWAYS_DONE {
            return Ok(true);
        }
        self.0.all().try_fold(true, |done, q| Ok(done && q.query()?))
    }
    fn synchronize(&self) -> Result<()> {
        self.0.all().try_for_each(QueueStream::synchronize)
    }
}

/// An event of mutant `F`.
pub struct MutantEvent<const F: u8> {
    queue: QueueEvent,
    claims_ownership: bool,
}

impl<const F: u8> Clone for MutantEvent<F> {
    fn clone(&self) -> Self {
        MutantEvent { queue: self.queue.clone(), claims_ownership: self.claims_ownership }
    }
}

impl<const F: u8> MutantEvent<F> {
    pub(crate) fn new(queue: QueueEvent, claims_ownership: bool) -> Self {
        MutantEvent { queue, claims_ownership }
    }
}

impl<const F: u8> Event for MutantEvent<F> {
    type Backend = MutantBackend<F>;

    fn device_id(&self) -> DeviceId {
        self.queue.device_id()
    }
    fn ownership(&self) -> Ownership {
        if self.claims_ownership {
            return Ownership::Owned;
        }
        self.queue.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.queue.raw_handle()
    }
    fn flags(&self) -> EventFlags {
        self.queue.flags()
    }
    fn query(&self) -> Result<bool> {
        if F == flaw::QUERY_ALWAYS_DONE {
            return Ok(true);
        }
        self.queue.query()
    }
    fn synchronize(&self) -> Result<()> {
        self.queue.synchronize()
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        if F == flaw::FAKE_ELAPSED {
            return Ok(1.0);
        }
        self.queue.elapsed_ms(&end.queue)
    }
}
