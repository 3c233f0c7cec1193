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
        ExtStream { shared, queue }
    }

    fn translator(&self, op: &'static str) -> impl Fn(&Buffer, usize, usize) -> Result<*mut u8> + '_ {
        move |buffer, offset, len| self.shared.translate(self.queue.device_id(), buffer, offset, len, op)
    }
}

gpuport_queue::impl_queue_stream!(ExtStream, ExtBackend, queue, |this, op| this.translator(op));

gpuport_queue::impl_queue_event!(ExtEvent, ExtBackend);
