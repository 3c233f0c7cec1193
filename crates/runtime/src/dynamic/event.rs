//! [`DynEvent`], the object-safe twin of [`Event`]: the trait, its blanket impl for every
//! typed event, and its forwarding for plugin events and [`AnyEvent`].

use std::any::Any;

use gpuport_core::{DeviceId, Event, EventFlags, Ownership, Result};

use super::forward::twin_trait;
use super::{typed, AnyEvent, RegisteredEvent};

twin_trait! {
    /// Object-safe twin of [`Event`].
    pub trait DynEvent, forwarded by RegisteredEvent, inherent on AnyEvent {
        /// See [`Event::device_id`].
        fn device_id(&self) -> DeviceId;
        /// See [`Event::ownership`].
        fn ownership(&self) -> Ownership;
        /// See [`Event::raw_handle`].
        fn raw_handle(&self) -> usize;
        /// See [`Event::flags`].
        fn flags(&self) -> EventFlags;
        /// See [`Event::query`].
        fn query(&self) -> Result<bool>;
        /// See [`Event::synchronize`].
        fn synchronize(&self) -> Result<()>;
        /// See [`Event::elapsed_ms`].
        fn elapsed_ms(&self, end: &AnyEvent) -> Result<f32>;
    }
}

impl<E: Event> DynEvent for E {
    fn device_id(&self) -> DeviceId {
        Event::device_id(self)
    }
    fn ownership(&self) -> Ownership {
        Event::ownership(self)
    }
    fn raw_handle(&self) -> usize {
        Event::raw_handle(self)
    }
    fn flags(&self) -> EventFlags {
        Event::flags(self)
    }
    fn query(&self) -> Result<bool> {
        Event::query(self)
    }
    fn synchronize(&self) -> Result<()> {
        Event::synchronize(self)
    }
    fn elapsed_ms(&self, end: &AnyEvent) -> Result<f32> {
        let e = typed::<E>(end.as_any(), "elapsed_ms", Event::device_id(self), end.device_id())?;
        Event::elapsed_ms(self, e)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
