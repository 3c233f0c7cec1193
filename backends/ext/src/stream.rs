//! Ext streams and events: `gpuport-queue`'s streams and events, with copies that
//! translate ext addresses to the hidden backing memory.

use std::sync::Arc;

use gpuport_core::{Buffer, Result};
use gpuport_queue::{QueueEvent, QueueStream};

use crate::{ExtBackend, Shared};

/// A stream of an ext device.
#[derive(Clone)]
pub struct ExtStream {
    shared: Arc<Shared>,
    queue: QueueStream,
}

/// An event of an ext device.
#[derive(Clone)]
pub struct ExtEvent(pub(crate) QueueEvent);

impl ExtStream {
    pub(crate) fn new(shared: Arc<Shared>, queue: QueueStream) -> Self {
        shared.track(&queue);
        ExtStream { shared, queue }
    }

    pub(crate) fn to_borrowed(&self) -> Self {
        ExtStream { shared: self.shared.clone(), queue: self.queue.to_borrowed() }
    }

    /// `Device::memset`: on this (the legacy) stream, after its queued work, then done.
    pub(crate) fn memset_blocking(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.queue.memset_blocking(dst, offset, len, value, self.resolve("memset"))
    }

    fn resolve(&self, op: &'static str) -> impl Fn(&Buffer, usize, usize) -> Result<*mut u8> + '_ {
        move |buffer, offset, len| self.shared.resolve(self.queue.device_id(), buffer, offset, len, op)
    }
}

gpuport_queue::impl_queue_stream!(ExtStream, ExtBackend, queue, |this, op| this.resolve(op));

gpuport_queue::impl_queue_event!(ExtEvent, ExtBackend);
