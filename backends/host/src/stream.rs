//! Host streams: `gpuport-queue`'s streams over host-accessible memory (host, or another
//! backend's pinned or managed memory).

use gpuport_queue::{host_translator, QueueStream};

use crate::HostBackend;

/// A stream of the host backend: an ordered queue, drained by a pool thread while it has work.
#[derive(Clone)]
pub struct HostStream(pub(crate) QueueStream);

gpuport_queue::impl_queue_stream!(HostStream, HostBackend, 0, |_this, op| host_translator(op));
