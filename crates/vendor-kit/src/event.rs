//! The event handle of a vendor backend, written once over [`VendorCalls`]' event calls:
//! ownership (an owned event is destroyed with its last handle, on the release thread —
//! never on a driver callback thread), binding the device before each call, and the
//! refusal to block inside a host callback. CUDA's and ROCm's `Event` implementations wrap
//! it and forward.

use std::sync::Arc;

use gpuport_core::{DeviceId, EventFlags, Ownership, Result};

use crate::callback::refuse_in_callback;
use crate::calls::RawHandle;
use crate::calls::VendorCalls;
use crate::device::VendorDevice;
use crate::release::Deferred;

struct EventState<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    raw: V::Event,
    owned: bool,
    flags: EventFlags,
}

// SAFETY: vendor event handles may be used from any thread (CUDA and HIP both say so);
// the state is immutable after creation.
unsafe impl<V: VendorCalls> Send for EventState<V> {}
// SAFETY: as above.
unsafe impl<V: VendorCalls> Sync for EventState<V> {}

impl<V: VendorCalls> Drop for EventState<V> {
    fn drop(&mut self) {
        if !self.owned || self.dev.bind().is_err() {
            return;
        }
        if let Err(e) = self.dev.event_destroy(self.raw) {
            log::warn!("{e}");
        }
    }
}

/// A vendor event handle: the event and the device that made it.
pub struct VendorEvent<V: VendorCalls> {
    inner: Arc<Deferred<EventState<V>>>,
}

impl<V: VendorCalls> Clone for VendorEvent<V> {
    fn clone(&self) -> Self {
        VendorEvent { inner: self.inner.clone() }
    }
}

impl<V: VendorCalls> VendorEvent<V> {
    /// A new owned event of `dev` (`EventFlags`' bits are the vendor's own).
    pub fn create(dev: &Arc<VendorDevice<V>>, flags: EventFlags) -> Result<Self> {
        dev.bind()?;
        let raw = dev.event_create(flags)?;
        Ok(Self::from_parts(dev, raw, true, flags))
    }

    /// A handle to event `raw` of `dev`; an `owned` one is destroyed with its last handle,
    /// a borrowed one (a wrapped foreign event) never.
    pub fn from_parts(dev: &Arc<VendorDevice<V>>, raw: V::Event, owned: bool, flags: EventFlags) -> Self {
        VendorEvent { inner: Arc::new(Deferred::new(EventState { dev: dev.clone(), raw, owned, flags })) }
    }

    /// The vendor handle.
    pub fn raw(&self) -> V::Event {
        self.inner.raw
    }

    /// `Event::device_id`.
    pub fn device_id(&self) -> DeviceId {
        self.inner.dev.device_id()
    }

    /// `Event::ownership`.
    pub fn ownership(&self) -> Ownership {
        Ownership::from_owned(self.inner.owned)
    }

    /// `Event::raw_handle`.
    pub fn raw_handle(&self) -> usize {
        self.inner.raw.to_raw()
    }

    /// `Event::flags`.
    pub fn flags(&self) -> EventFlags {
        self.inner.flags
    }

    /// `Event::query`.
    pub fn query(&self) -> Result<bool> {
        self.inner.dev.bind()?;
        self.inner.dev.event_done(self.inner.raw)
    }

    /// `Event::synchronize`; refused inside a host callback (it could wait for itself).
    pub fn synchronize(&self) -> Result<()> {
        refuse_in_callback(self.inner.dev.kind(), "Event::synchronize")?;
        self.inner.dev.bind()?;
        self.inner.dev.event_synchronize(self.inner.raw)
    }

    /// `Event::elapsed_ms` from this event to `end`.
    pub fn elapsed_ms(&self, end: &Self) -> Result<f32> {
        crate::same_backend("elapsed_ms", self.device_id(), end.device_id())?;
        self.inner.dev.bind()?;
        self.inner.dev.event_elapsed_ms(self.inner.raw, end.inner.raw)
    }
}

/// Implements `gpuport_core::Event` for a newtype over [`VendorEvent`]
/// (`struct MyEvent(VendorEvent<MyDevice>)`): every method forwards
/// (`gpuport_core::forward_event!`).
#[macro_export]
macro_rules! impl_vendor_event {
    ($event:ty, $backend:ty) => {
        $crate::__core::forward_event!($event, $backend);
    };
}
