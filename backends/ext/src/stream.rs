//! Ext streams and events: `gpuport-queue`'s streams and events, with copies that
//! translate ext addresses to the hidden backing memory.

use std::sync::Arc;

use gpuport_core::{
    Buffer, DeviceId, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream, StreamFlags,
};
use gpuport_queue::{QueueEvent, QueueStream};

use crate::{ExtBackend, Shared, KIND};

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

    fn resolve(&self, op: &'static str) -> impl Fn(&Buffer, usize, usize) -> Result<*mut u8> + '_ {
        move |buffer, offset, len| self.shared.resolve(self.queue.device_id(), buffer, offset, len, op)
    }
}

impl Stream for ExtStream {
    type Backend = ExtBackend;

    fn device_id(&self) -> DeviceId {
        self.queue.device_id()
    }
    fn ownership(&self) -> Ownership {
        self.queue.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.queue.raw_handle()
    }
    fn flags(&self) -> StreamFlags {
        self.queue.flags()
    }
    fn priority(&self) -> i32 {
        0
    }
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        self.queue.copy(src, src_offset, dst, dst_offset, len, self.resolve("copy"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.queue.memset(dst, offset, len, value, self.resolve("memset"))
    }
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.queue.write(src, dst, dst_offset, self.resolve("write"))
    }
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.queue.read(src, src_offset, dst, self.resolve("read"))
    }
    fn record(&self, event: &ExtEvent) -> Result<()> {
        self.queue.record(&event.0)
    }
    fn wait(&self, event: &ExtEvent) -> Result<()> {
        self.queue.wait(&event.0)
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.queue.host_callback(f)
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        self.queue.launch(KIND, kernel, config, args, self.resolve("launch"))
    }
    fn query(&self) -> Result<bool> {
        self.queue.query()
    }
    fn synchronize(&self) -> Result<()> {
        self.queue.synchronize()
    }
}

gpuport_queue::impl_queue_event!(ExtEvent, ExtBackend);
