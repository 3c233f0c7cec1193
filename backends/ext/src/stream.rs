//! Ext streams and events: the host backend's queues and events, with copies that
//! translate ext addresses to the hidden backing memory.

use std::sync::Arc;

use gpuport_core::{
    Buffer, DeviceId, Error, Event, EventFlags, HostCallback, Kernel, KernelArg, LaunchConfig, Ownership, Result,
    Stream, StreamFlags,
};
use gpuport_host::kernels::HostKernel;
use gpuport_host::{HostEvent, HostStream};

use crate::{ExtBackend, Shared};

/// A stream of an ext device.
#[derive(Clone)]
pub struct ExtStream {
    shared: Arc<Shared>,
    host: HostStream,
}

/// An event of an ext device.
#[derive(Clone)]
pub struct ExtEvent(pub(crate) HostEvent);

impl ExtStream {
    pub(crate) fn new(shared: Arc<Shared>, host: HostStream) -> Self {
        shared.track(host.queue().tracker(), Stream::device_id(&host));
        ExtStream { shared, host }
    }

    pub(crate) fn to_borrowed(&self) -> Self {
        ExtStream { shared: self.shared.clone(), host: self.host.to_borrowed() }
    }

    fn resolve(&self, buffer: &Buffer, offset: usize, len: usize, op: &'static str) -> Result<*mut u8> {
        self.shared.resolve(self.device_id(), buffer, offset, len, op)
    }
}

impl Stream for ExtStream {
    type Backend = ExtBackend;

    fn device_id(&self) -> DeviceId {
        Stream::device_id(&self.host)
    }
    fn ownership(&self) -> Ownership {
        self.host.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.host.raw_handle()
    }
    fn flags(&self) -> StreamFlags {
        self.host.flags()
    }
    fn priority(&self) -> i32 {
        0
    }

    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        gpuport_core::check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = self.resolve(src, src_offset, len, "copy")?;
        let d = self.resolve(dst, dst_offset, len, "copy")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges were checked against live allocations that travel with the op,
        // and do not overlap.
        unsafe { self.host.queue().copy(s, d, len, [Some(src.clone()), Some(dst.clone())]) }
    }

    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = self.resolve(dst, offset, len, "memset")?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: as for copy, one range.
        unsafe { self.host.queue().fill(d, len, value, Some(dst.clone())) }
    }

    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        let d = self.resolve(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: `src` stays borrowed until `flush` has seen the copy run.
        unsafe { self.host.queue().copy(src.as_ptr(), d, src.len(), [None, Some(dst.clone())])? };
        self.host.queue().flush()
    }

    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        let s = self.resolve(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: as in `write`.
        unsafe { self.host.queue().copy(s, dst.as_mut_ptr(), dst.len(), [Some(src.clone()), None])? };
        self.host.queue().flush()
    }

    fn record(&self, event: &ExtEvent) -> Result<()> {
        self.host.queue().record(event.0.state())
    }
    fn wait(&self, event: &ExtEvent) -> Result<()> {
        if event.0.state().is_destroyed() {
            return Err(Error::invalid_handle("waiting on a destroyed event"));
        }
        self.host.queue().wait(event.0.state())
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.host.host_callback(f)
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let HostKernel(f) = *kernel
            .handle::<HostKernel>()
            .ok_or_else(|| Error::mismatch("launch", gpuport_core::BackendKind::Ext, kernel.device()))?;
        config.validate()?;
        let (args, keep) = gpuport_host::resolve_args(args, |b, offset, len| self.resolve(b, offset, len, "launch"))?;
        let config = *config;
        self.host.queue().run(Box::new(move || {
            let _keep = keep;
            f(&config, &args)
        }))
    }

    fn query(&self) -> Result<bool> {
        self.host.query()
    }
    fn synchronize(&self) -> Result<()> {
        self.host.synchronize()
    }
}

impl Event for ExtEvent {
    type Backend = ExtBackend;

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
