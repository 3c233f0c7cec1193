//! HIP events.

use std::ffi::c_uint;
use std::sync::Arc;

use gpuport_core::{DeviceId, Event, EventFlags, Ownership, Result};
use gpuport_driver::release::Deferred;
use gpuport_driver::vendor_stream::refuse_in_callback;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, hipEvent_t};
use crate::RocmBackend;

struct EventInner {
    dev: Arc<DeviceCtx>,
    raw: hipEvent_t,
    owned: bool,
    flags: EventFlags,
}

// SAFETY: HIP event handles may be used from any thread.
unsafe impl Send for EventInner {}
// SAFETY: as above.
unsafe impl Sync for EventInner {}

impl Drop for EventInner {
    fn drop(&mut self) {
        if !self.owned || self.dev.bind().is_err() {
            return;
        }
        // SAFETY: created by hipEventCreateWithFlags, destroyed once.
        if let Err(e) = unsafe { result::event::destroy(&self.dev.rt.api, self.raw) } {
            log::warn!("{e}");
        }
    }
}

/// A HIP event.
#[derive(Clone)]
pub struct RocmEvent {
    inner: Arc<Deferred<EventInner>>,
}

impl RocmEvent {
    pub(crate) fn create(dev: &Arc<DeviceCtx>, flags: EventFlags) -> Result<Self> {
        dev.bind()?;
        // EventFlags' bits are HIP's: BlockingSync 1, DisableTiming 2, Interprocess 4.
        let raw = result::event::create(&dev.rt.api, flags.bits() as c_uint)?;
        Ok(Self::from_parts(dev, raw, true, flags))
    }

    pub(crate) fn from_parts(dev: &Arc<DeviceCtx>, raw: hipEvent_t, owned: bool, flags: EventFlags) -> Self {
        RocmEvent { inner: Arc::new(Deferred::new(EventInner { dev: dev.clone(), raw, owned, flags })) }
    }

    pub(crate) fn raw(&self) -> hipEvent_t {
        self.inner.raw
    }

    fn api(&self) -> &sys::Api {
        &self.inner.dev.rt.api
    }
}

impl Event for RocmEvent {
    type Backend = RocmBackend;

    fn device_id(&self) -> DeviceId {
        self.inner.dev.id
    }
    fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.inner.owned)
    }
    fn raw_handle(&self) -> usize {
        self.inner.raw as usize
    }
    fn flags(&self) -> EventFlags {
        self.inner.flags
    }
    fn query(&self) -> Result<bool> {
        self.inner.dev.bind()?;
        // SAFETY: live event.
        unsafe { result::event::query(self.api(), self.inner.raw) }
    }
    fn synchronize(&self) -> Result<()> {
        refuse_in_callback("Event::synchronize")?;
        self.inner.dev.bind()?;
        // SAFETY: live event.
        unsafe { result::event::synchronize(self.api(), self.inner.raw) }
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.inner.dev.bind()?;
        // SAFETY: both events are live (each handle holds its event).
        unsafe { result::event::elapsed_time(self.api(), self.inner.raw, end.inner.raw) }
    }
}
