//! Every queue of one device, for `Device::synchronize`.

use std::sync::Mutex;

use gpuport_core::Result;

use crate::queue::{synchronize_all, QueueTracker};
use crate::stream::QueueStream;

/// The queues of one device that may still have work, destroyed streams' included.
#[derive(Default)]
pub struct DeviceQueues {
    queues: Mutex<Vec<QueueTracker>>,
}

impl DeviceQueues {
    /// Tracks a stream of the device (and forgets queues whose worker has exited).
    pub fn track(&self, stream: &QueueStream) {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.retain(QueueTracker::is_live);
        queues.push(stream.queue().tracker());
    }

    /// Waits for every tracked queue; the first error of their work (not cleared).
    pub fn synchronize(&self) -> Result<()> {
        let queues: Vec<QueueTracker> = self.queues.lock().unwrap_or_else(|p| p.into_inner()).clone();
        synchronize_all(&queues)
    }
}
