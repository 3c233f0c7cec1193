//! CUDA events.

use std::ffi::c_uint;
use std::sync::Arc;

use gpuport_core::{DeviceId, Error, Event, EventFlags, Ownership, Result};
use gpuport_driver::release::Deferred;
use gpuport_driver::vendor_stream::refuse_in_callback;

use crate::context::DeviceCtx;
use crate::result::{check, check_ready};
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
        let api = &self.dev.driver.api;
        // SAFETY: created by cuEventCreate, destroyed once.
        if let Err(e) = check(api, unsafe { (api.cuEventDestroy)(self.raw) }, "cuEventDestroy") {
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
        let api = &dev.driver.api;
        // EventFlags' bits are the driver's: BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4.
        let mut raw: CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        check(api, unsafe { (api.cuEventCreate)(&mut raw, flags.bits() as c_uint) }, "cuEventCreate")?;
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
        check_ready(self.api(), unsafe { (self.api().cuEventQuery)(self.inner.raw) }, "cuEventQuery")
    }
    fn synchronize(&self) -> Result<()> {
        refuse_in_callback("Event::synchronize")?;
        self.inner.dev.bind()?;
        // SAFETY: live event.
        check(self.api(), unsafe { (self.api().cuEventSynchronize)(self.inner.raw) }, "cuEventSynchronize")
    }
    fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        self.inner.dev.bind()?;
        let mut ms = 0f32;
        // SAFETY: valid out-pointer; live events.
        let status = unsafe { (self.api().cuEventElapsedTime)(&mut ms, self.inner.raw, end.inner.raw) };
        if status == sys::ERROR_NOT_READY {
            return Err(Error::NotReady { what: "an event's recorded work has not completed".into() });
        }
        check(self.api(), status, "cuEventElapsedTime")?;
        Ok(ms)
    }
}
