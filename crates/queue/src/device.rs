//! Every queue of one device, for `Device::synchronize`.

use std::sync::Mutex;

use gpuport_core::{LiveList, Result};

use crate::queue::{synchronize_all, QueueTracker};
use crate::stream::QueueStream;

/// The queues of one device that may still have work, destroyed streams' included.
#[derive(Default)]
pub struct DeviceQueues {
    queues: Mutex<LiveList<QueueTracker>>,
}

impl DeviceQueues {
    /// Tracks a stream of the device (queues whose worker has exited and that have nothing
    /// left to report are forgotten as the list grows: a constant cost per stream on
    /// average, however many live).
    pub fn track(&self, stream: &QueueStream) {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.push(stream.queue().tracker(), QueueTracker::is_live);
    }

    /// Waits for every tracked queue; the first error of their work (not cleared).
    pub fn synchronize(&self) -> Result<()> {
        let queues: Vec<QueueTracker> = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            // A synchronize looks at every queue anyway: forget the gone ones now.
            queues.prune(QueueTracker::is_live);
            queues.items().to_vec()
        };
        synchronize_all(&queues)
    }
}
