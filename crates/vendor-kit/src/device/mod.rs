//! A vendor device, written once over [`VendorCalls`]: what every handle of one opened
//! device shares (the backend's context, and the kit's record of its streams' kept errors
//! and default streams), the registry that makes every handle of one device share it, and
//! the whole `Device` contract — memory, the synchronous memset, streams created, wrapped
//! and by default, events, the device-wide synchronize with its kept errors, peers, pointer
//! attributes and modules. `impl_vendor_device!` writes a backend's `Device` impl from it,
//! as `impl_vendor_stream!` and `impl_vendor_event!` do for streams and events.
//!
//! What stays the backend's own is behind [`VendorCalls`]: making the device current (a
//! CUDA primary context, HIP's `hipSetDevice`), device facts, image checks and the default
//! stream handles.

mod forward;

use std::ops::Deref;
use std::sync::{Arc, Mutex, Weak};

use gpuport_core::{BackendKind, DeviceId, Error, Result};

use crate::calls::VendorCalls;
use crate::lock;
use crate::stream::DeviceStreams;

/// One opened vendor device, shared by every handle of it (device, stream, event, buffer,
/// module): the backend's context and the kit's per-device stream record. It dereferences
/// to the backend's context, so the kit calls [`VendorCalls`] on it directly.
pub struct VendorDevice<V: VendorCalls> {
    pub(super) calls: V,
    pub(super) streams: DeviceStreams<V>,
}

impl<V: VendorCalls> Deref for VendorDevice<V> {
    type Target = V;
    fn deref(&self) -> &V {
        &self.calls
    }
}

impl<V: VendorCalls> VendorDevice<V> {
    /// The device's stream record: kept errors (dropped streams' too, until reported) and
    /// the default streams handed out.
    pub(crate) fn streams(&self) -> &DeviceStreams<V> {
        &self.streams
    }
}

/// The open devices of one vendor backend, by ordinal, so every handle of a device shares
/// one context and one stream record — and a peer copy can find the other device. A
/// backend keeps one in a `static`; a device is closed (its context released) when its
/// last handle is gone.
pub struct OpenDevices<V: VendorCalls> {
    kind: BackendKind,
    live: Mutex<Vec<Weak<VendorDevice<V>>>>,
}

impl<V: VendorCalls> OpenDevices<V> {
    /// No device of backend `kind` open yet.
    pub const fn new(kind: BackendKind) -> Self {
        OpenDevices { kind, live: Mutex::new(Vec::new()) }
    }

    /// Device `ordinal` of `count`: the open one if a handle holds it, else a new one from
    /// `open` (called with the registry locked, so a device is opened once).
    /// `DeviceNotFound` past the count.
    pub fn open(&self, ordinal: u32, count: u32, open: impl FnOnce() -> Result<V>) -> Result<Arc<VendorDevice<V>>> {
        if ordinal >= count {
            return Err(Error::DeviceNotFound { device: DeviceId::new(self.kind, ordinal), count });
        }
        let mut live = lock(&self.live);
        if let Some(dev) = live.get(ordinal as usize).and_then(Weak::upgrade) {
            return Ok(dev);
        }
        let dev = Arc::new(VendorDevice { calls: open()?, streams: DeviceStreams::default() });
        if live.len() <= ordinal as usize {
            live.resize_with(ordinal as usize + 1, Weak::new);
        }
        live[ordinal as usize] = Arc::downgrade(&dev);
        Ok(dev)
    }

    /// The open device `ordinal`, if some handle holds it.
    pub fn live(&self, ordinal: u32) -> Option<Arc<VendorDevice<V>>> {
        lock(&self.live).get(ordinal as usize).and_then(Weak::upgrade)
    }
}
