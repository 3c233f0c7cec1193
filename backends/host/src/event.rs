//! Host events: `gpuport-queue`'s completion markers.

use gpuport_queue::QueueEvent;

use crate::HostBackend;

/// An event of the host backend.
#[derive(Clone)]
pub struct HostEvent(pub(crate) QueueEvent);

gpuport_queue::impl_queue_event!(HostEvent, HostBackend);
