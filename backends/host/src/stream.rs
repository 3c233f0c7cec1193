//! Host streams: `gpuport-queue`'s streams over host-accessible memory.

use gpuport_core::{
    BackendKind, Buffer, DeviceId, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result, Stream,
    StreamFlags,
};
use gpuport_queue::{host_range, QueueStream};

use crate::event::HostEvent;
use crate::HostBackend;

/// A stream of the host backend: an ordered queue run by its own worker thread.
#[derive(Clone)]
pub struct HostStream(pub(crate) QueueStream);

/// Host streams touch any host-accessible memory (host, or another backend's pinned or
/// managed memory).
fn resolve(operation: &'static str) -> impl Fn(&Buffer, usize, usize) -> Result<*mut u8> {
    move |buffer, offset, len| host_range(buffer, offset, len, operation)
}

impl Stream for HostStream {
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
    fn flags(&self) -> StreamFlags {
        self.0.flags()
    }
    fn priority(&self) -> i32 {
        0
    }
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        self.0.copy(src, src_offset, dst, dst_offset, len, resolve("copy"))
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.0.memset(dst, offset, len, value, resolve("memset"))
    }
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.0.write(src, dst, dst_offset, resolve("write"))
    }
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.0.read(src, src_offset, dst, resolve("read"))
    }
    fn record(&self, event: &HostEvent) -> Result<()> {
        self.0.record(&event.0)
    }
    fn wait(&self, event: &HostEvent) -> Result<()> {
        self.0.wait(&event.0)
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.0.host_callback(f)
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        self.0.launch(BackendKind::Host, kernel, config, args, resolve("launch"))
    }
    fn query(&self) -> Result<bool> {
        self.0.query()
    }
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
}
