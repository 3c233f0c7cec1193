//! The part of `gpuport_core::Device` every software device shares, written once: its
//! queues (for a device-wide synchronize that also waits for dropped streams' work), its
//! legacy default stream (created on first use, handed out as borrowed handles, and
//! synchronising implicitly with the device's blocking streams as on CUDA), streams
//! created and wrapped, events, the synchronous memset ordered after the legacy stream,
//! and registered-kernel modules. A port keeps a `QueueDevice` and forwards to it; what is
//! its own — memory, device facts, peers, per-thread default streams where it has them —
//! it writes itself.
//!
//! The port's stream type `S` wraps a [`QueueStream`]: the methods that make streams take
//! `wrap`, the port's constructor from a queue stream (a newtype's constructor, or one
//! that adds the port's own state).

use std::sync::Arc;

use gpuport_core::{
    Buffer, DefaultStream, DeviceId, Error, EventFlags, Kernel, Module, ModuleImage, Result, StreamFlags,
};

use crate::device::DeviceQueues;
use crate::event::QueueEvent;
use crate::kernels;
use crate::lazy::LazyStream;
use crate::port::QueueStreamPort;
use crate::queue::{ImplicitRole, ImplicitSync};
use crate::stream::QueueStream;

/// What one software device shares among its handles (keep it in an `Arc`).
pub struct QueueDevice<S> {
    id: DeviceId,
    queues: DeviceQueues,
    legacy: LazyStream<S>,
    implicit: Arc<ImplicitSync>,
}

impl<S> QueueDevice<S> {
    /// The shared part of device `id`, with no stream yet.
    pub fn new(id: DeviceId) -> Self {
        QueueDevice { id, queues: DeviceQueues::default(), legacy: LazyStream::new(), implicit: Arc::default() }
    }

    /// The device.
    pub fn id(&self) -> DeviceId {
        self.id
    }

    /// Every queue of the device (for a port that makes its queue streams itself: track
    /// each one here).
    pub fn queues(&self) -> &DeviceQueues {
        &self.queues
    }

    /// The part a stream created with `flags` takes in the device's implicit
    /// synchronisation with its legacy default stream (for a port that makes its queue
    /// streams itself): blocking without `StreamFlags::NON_BLOCKING`, else none.
    pub fn stream_role(&self, flags: StreamFlags) -> ImplicitRole {
        if flags.contains(StreamFlags::NON_BLOCKING) {
            ImplicitRole::Independent
        } else {
            ImplicitRole::Blocking(self.implicit.clone())
        }
    }

    /// The part the device's legacy default stream takes (for a port that makes it
    /// itself): it follows every blocking stream.
    pub fn legacy_role(&self) -> ImplicitRole {
        ImplicitRole::Legacy(self.implicit.clone())
    }

    /// `InvalidArgument` unless `stream_device` is this device (a stream given to
    /// `alloc_async` and the like).
    pub fn check_stream(&self, stream_device: DeviceId) -> Result<()> {
        if stream_device != self.id {
            return Err(Error::invalid_argument(format!("a stream of {stream_device} used with {}", self.id)));
        }
        Ok(())
    }

    /// `Device::create_event`: a queue event (interprocess events are `Unsupported`).
    pub fn create_event(&self, flags: EventFlags) -> Result<QueueEvent> {
        if flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::unsupported(self.id.kind, "interprocess events"));
        }
        Ok(QueueEvent::create(self.id, flags))
    }

    /// `Device::wrap_event`: a borrowed handle to an event of this device.
    pub fn wrap_event(&self, raw: usize) -> Result<QueueEvent> {
        QueueEvent::from_raw(self.id, raw)
    }

    /// `Device::synchronize`: waits for every queue of the device, dropped streams'
    /// included; the first error of their work (not cleared).
    pub fn synchronize(&self) -> Result<()> {
        self.queues.synchronize()
    }

    /// `Device::load_module`: a module of registered Rust kernels.
    pub fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        kernels::load_module(self.id.kind, self.id, image)
    }

    /// `Device::kernel`.
    pub fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        kernels::kernel(self.id.kind, self.id, module, name)
    }
}

impl<S: QueueStreamPort + Clone> QueueDevice<S> {
    /// `Device::create_stream`: a new queue, tracked by the device, wrapped by `wrap`.
    /// Without `StreamFlags::NON_BLOCKING` it is a blocking stream: its work waits for the
    /// legacy default stream's earlier work, and the legacy stream's work waits for its
    /// earlier work, as on CUDA and ROCm.
    pub fn create_stream(&self, flags: StreamFlags, wrap: impl FnOnce(QueueStream) -> S) -> Result<S> {
        self.make_stream(flags, self.stream_role(flags), wrap)
    }

    fn make_stream(&self, flags: StreamFlags, role: ImplicitRole, wrap: impl FnOnce(QueueStream) -> S) -> Result<S> {
        let queue = QueueStream::create(self.id, flags, role)?;
        self.queues.track(&queue);
        Ok(wrap(queue))
    }

    /// `Device::wrap_stream`: a borrowed handle to a stream of this device (its queue was
    /// tracked when it was created).
    pub fn wrap_stream(&self, raw: usize, wrap: impl FnOnce(QueueStream) -> S) -> Result<S> {
        Ok(wrap(QueueStream::from_raw(self.id, raw)?))
    }

    /// The legacy default stream, created on first use; a borrowed handle to it.
    pub fn legacy_stream(&self, wrap: impl Fn(QueueStream) -> S) -> Result<S> {
        let owned = self.legacy.get_or_create(|| self.make_stream(StreamFlags::empty(), self.legacy_role(), &wrap))?;
        Ok(wrap(owned.queue().to_borrowed()))
    }

    /// `Device::default_stream` for a device without per-thread default streams (those
    /// are `Unsupported`).
    pub fn default_stream(&self, which: DefaultStream, wrap: impl Fn(QueueStream) -> S) -> Result<S> {
        match which {
            DefaultStream::Legacy => self.legacy_stream(wrap),
            DefaultStream::PerThread => Err(Error::unsupported(self.id.kind, "per-thread default streams")),
        }
    }

    /// `Device::memset`: synchronous, ordered after the legacy default stream's work (as
    /// `cuMemsetD8` is), through the port's address resolution.
    pub fn memset(
        &self,
        dst: &Buffer,
        offset: usize,
        len: usize,
        value: u8,
        wrap: impl Fn(QueueStream) -> S,
    ) -> Result<()> {
        let legacy = self.legacy_stream(wrap)?;
        legacy.queue().memset_blocking(dst, offset, len, value, legacy.translator("memset"))
    }
}
