//! HIP events.

use std::ffi::c_uint;
use std::sync::Arc;

use gpuport_core::{DeviceId, Error, Event, EventFlags, Ownership, Result};
use gpuport_driver::release::Deferred;
use gpuport_driver::vendor_stream::refuse_in_callback;

use crate::context::DeviceCtx;
use crate::result::{check, check_ready};
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
        let api = &self.dev.rt.api;
        // SAFETY: created by hipEventCreateWithFlags, destroyed once.
        if let Err(e) = check(api, unsafe { (api.hipEventDestroy)(self.raw) }, "hipEventDestroy") {
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
        let api = &dev.rt.api;
        // EventFlags' bits are HIP's: BlockingSync 1, DisableTiming 2, Interprocess 4.
        let mut raw: hipEvent_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let status = unsafe { (api.hipEventCreateWithFlags)(&mut raw, flags.bits() as c_uint) };
        check(api, status, "hipEventCreateWithFlags")?;
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
        check_ready(self.api(), unsafe { (self.api().hipEventQuery)(self.inner.raw) }, "hipEventQuery")
    }
    fn synchronize(&self) -> Result<()> {
        refuse_in_callback("Event::synchronize")?;
        self.inner.dev.bind()?;
        // SAFETY: live event.
        check(self.api(), unsafe { (self.api().hipEventSynchronize)(self.inner.raw) }, "hipEventSynchronize")
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.inner.dev.bind()?;
        let mut ms = 0f32;
        // SAFETY: valid out-pointer; live events.
        let status = unsafe { (self.api().hipEventElapsedTime)(&mut ms, self.inner.raw, end.inner.raw) };
        if status == sys::ERROR_NOT_READY {
            return Err(Error::NotReady { what: "an event's recorded work has not completed".into() });
        }
        check(self.api(), status, "hipEventElapsedTime")?;
        Ok(ms)
    }
}
