//! CUDA events.

use std::ffi::c_uint;
use std::sync::Arc;

use gpuport_core::{DeviceId, Event, EventFlags, Ownership, Result};
use gpuport_driver::release::Deferred;
use gpuport_driver::vendor_stream::refuse_in_callback;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, CUevent};
use crate::CudaBackend;

struct EventInner {
    dev: Arc<DeviceCtx>,
    raw: CUevent,
    owned: bool,
    flags: EventFlags,
}

// SAFETY: CUDA event handles may be used from any thread.
unsafe impl Send for EventInner {}
// SAFETY: as above.
unsafe impl Sync for EventInner {}

impl Drop for EventInner {
    fn drop(&mut self) {
        if !self.owned || self.dev.bind().is_err() {
            return;
        }
        // SAFETY: created by cuEventCreate, destroyed once.
        if let Err(e) = unsafe { result::event::destroy(&self.dev.driver.api, self.raw) } {
            log::warn!("{e}");
        }
    }
}

/// A CUDA event.
#[derive(Clone)]
pub struct CudaEvent {
    inner: Arc<Deferred<EventInner>>,
}

impl CudaEvent {
    pub(crate) fn create(dev: &Arc<DeviceCtx>, flags: EventFlags) -> Result<Self> {
        dev.bind()?;
        // EventFlags' bits are the driver's: BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4.
        let raw = result::event::create(&dev.driver.api, flags.bits() as c_uint)?;
        Ok(Self::from_parts(dev, raw, true, flags))
    }

    pub(crate) fn from_parts(dev: &Arc<DeviceCtx>, raw: CUevent, owned: bool, flags: EventFlags) -> Self {
        CudaEvent { inner: Arc::new(Deferred::new(EventInner { dev: dev.clone(), raw, owned, flags })) }
    }

    pub(crate) fn raw(&self) -> CUevent {
        self.inner.raw
    }

    fn api(&self) -> &sys::Api {
        &self.inner.dev.driver.api
    }
}

impl Event for CudaEvent {
    type Backend = CudaBackend;

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
