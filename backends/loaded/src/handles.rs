//! A loaded plugin's device, stream and event: newtypes over the vendor kit's handles on
//! [`PluginCalls`], their traits from the kit's macros as CUDA's and ROCm's are. Every
//! loaded library's handles are of these types; the kit tells them apart by kind.

use std::sync::Arc;

use gpuport_vendor_kit::{VendorDevice, VendorEvent, VendorStream};

use crate::calls::PluginCalls;
use crate::LoadedBackend;

/// A device of a plugin loaded from a shared library; handles share the opened device.
#[derive(Clone)]
pub struct LoadedDevice(pub(crate) Arc<VendorDevice<PluginCalls>>);

/// A stream of a plugin loaded from a shared library.
#[derive(Clone)]
pub struct LoadedStream(pub(crate) VendorStream<PluginCalls>);

/// An event of a plugin loaded from a shared library.
#[derive(Clone)]
pub struct LoadedEvent(pub(crate) VendorEvent<PluginCalls>);

gpuport_vendor_kit::impl_vendor_device!(LoadedDevice, LoadedBackend, LoadedStream, LoadedEvent);
gpuport_vendor_kit::impl_vendor_stream!(LoadedStream, LoadedBackend);
gpuport_vendor_kit::impl_vendor_event!(LoadedEvent, LoadedBackend);
