//! Host events: `gpuport-queue`'s completion markers.

use gpuport_core::{DeviceId, Event, EventFlags, Ownership, Result};
use gpuport_queue::QueueEvent;

use crate::HostBackend;

/// An event of the host backend.
#[derive(Clone)]
pub struct HostEvent(pub(crate) QueueEvent);

impl Event for HostEvent {
    type Backend = HostBackend;

    fn device_id(&self) -> DeviceId {
        self.0.device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.raw_handle()
    }
    fn flags(&self) -> EventFlags {
        self.0.flags()
    }
    fn query(&self) -> Result<bool> {
        self.0.query()
    }
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.0.elapsed_ms(&end.0)
    }
}
