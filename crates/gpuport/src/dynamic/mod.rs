//! The dynamic tier: object-safe twins of the core traits ([`DynDevice`], [`DynStream`],
//! [`DynEvent`]), implemented once for every typed backend by blanket impls, and the
//! [`AnyDevice`] / [`AnyStream`] / [`AnyEvent`] enums dispatched over them with
//! `enum_dispatch` (wgpu-hal's `DynDevice` pattern).
//!
//! Built-in backends get their own enum variant (a direct `match`, no vtable); backends
//! registered at run time live behind the `Plugin` variant's `Arc<dyn …>`.
//!
//! The `Any*` enums also have every method of their twin trait as an inherent method, so
//! using them needs no import from here; import these traits to write code generic over
//! handle types of the dynamic tier.

mod backend;
mod device;
mod event;
mod forward;
mod stream;

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use enum_dispatch::enum_dispatch;
use gpuport_core::{
    as_bytes, as_bytes_mut, zeroed_vec, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, DlpackDevices, Element,
    Error, Event, EventFlags, HostAllocFlags, HostCallback, HostFunction, Kernel, KernelArg, LaunchConfig, Module,
    ModuleImage, Ownership, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_cuda::{CudaDevice, CudaEvent, CudaStream};
use gpuport_host::{HostDevice, HostEvent, HostStream};
use gpuport_rocm::{RocmDevice, RocmEvent, RocmStream};

pub use backend::DynBackend;
pub use device::DynDevice;
pub use event::DynEvent;
pub use stream::DynStream;

/// Wrappers of plugin handles, so the `Plugin` variants can hold trait objects.
macro_rules! plugin_handle {
    ($name:ident, $tr:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Made only by the `*_into_any` functions, which give a built-in backend's handle
        /// its own variant: one device never has two representations.
        #[derive(Clone)]
        pub struct $name(Arc<dyn $tr>);

        impl $name {
            /// A handle of a backend that implements the twin trait directly (a plugin
            /// loaded from a shared library, whose kind is known only at run time).
            pub(crate) fn from_dyn(handle: Arc<dyn $tr>) -> Self {
                $name(handle)
            }
        }
    };
}
plugin_handle!(PluginDevice, DynDevice, "A device of a backend registered at run time.");
plugin_handle!(PluginStream, DynStream, "A stream of a backend registered at run time.");
plugin_handle!(PluginEvent, DynEvent, "An event of a backend registered at run time.");

/// A device of any backend.
#[enum_dispatch(DynDevice)]
#[derive(Clone)]
pub enum AnyDevice {
    /// The CPU.
    Host(HostDevice),
    /// An NVIDIA GPU.
    Cuda(CudaDevice),
    /// An AMD GPU.
    Rocm(RocmDevice),
    /// A backend registered at run time.
    Plugin(PluginDevice),
}

/// A stream of any backend.
#[enum_dispatch(DynStream)]
#[derive(Clone)]
pub enum AnyStream {
    /// The CPU.
    Host(HostStream),
    /// An NVIDIA GPU.
    Cuda(CudaStream),
    /// An AMD GPU.
    Rocm(RocmStream),
    /// A backend registered at run time.
    Plugin(PluginStream),
}

/// An event of any backend.
#[enum_dispatch(DynEvent)]
#[derive(Clone)]
pub enum AnyEvent {
    /// The CPU.
    Host(HostEvent),
    /// An NVIDIA GPU.
    Cuda(CudaEvent),
    /// An AMD GPU.
    Rocm(RocmEvent),
    /// A backend registered at run time.
    Plugin(PluginEvent),
}

impl AnyStream {
    /// Typed [`DynStream::write`]: `src`'s elements into `dst` at byte offset `dst_offset`.
    pub fn write_slice<T: Element>(&self, src: &[T], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.write(as_bytes(src), dst, dst_offset)
    }
    /// Typed [`DynStream::read`]: `len` elements of `src` from byte offset `src_offset`.
    pub fn read_vec<T: Element>(&self, src: &Buffer, src_offset: usize, len: usize) -> Result<Vec<T>> {
        let mut out = zeroed_vec::<T>(len);
        self.read(src, src_offset, as_bytes_mut(&mut out))?;
        Ok(out)
    }
}

impl fmt::Debug for AnyDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyDevice({})", self.id())
    }
}
impl fmt::Debug for AnyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyStream({} {:#x} {:?})", self.device_id(), self.raw_handle(), self.ownership())
    }
}
impl fmt::Debug for AnyEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyEvent({} {:#x})", self.device_id(), self.raw_handle())
    }
}

/// Moves a typed value into the built-in variant of type `T` when it is one; otherwise
/// hands it back. A `TypeId` comparison: no allocation, no vtable.
fn take_if<T: 'static, S: 'static>(value: S) -> std::result::Result<T, S> {
    let mut slot = Some(value);
    if let Some(t) = (&mut slot as &mut dyn Any).downcast_mut::<Option<T>>().and_then(Option::take) {
        return Ok(t);
    }
    match slot {
        Some(s) => Err(s),
        // `slot` is emptied only on the early return above.
        None => unreachable!("value taken without being returned"),
    }
}

macro_rules! into_any {
    ($fn:ident, $any:ident, $tr:ident, $plugin:ident, $($variant:ident: $ty:ty),*) => {
        /// Wraps a typed handle: its built-in variant, or `Plugin`.
        pub fn $fn<S: $tr>(value: S) -> $any {
            $(
                let value = match take_if::<$ty, S>(value) {
                    Ok(v) => return $any::$variant(v),
                    Err(v) => v,
                };
            )*
            $any::Plugin($plugin(Arc::new(value)))
        }
    };
}
into_any!(device_into_any, AnyDevice, Device, PluginDevice, Host: HostDevice, Cuda: CudaDevice, Rocm: RocmDevice);
into_any!(stream_into_any, AnyStream, Stream, PluginStream, Host: HostStream, Cuda: CudaStream, Rocm: RocmStream);
into_any!(event_into_any, AnyEvent, Event, PluginEvent, Host: HostEvent, Cuda: CudaEvent, Rocm: RocmEvent);

/// The typed handle of backend `B` inside an `Any*` handle, or a mismatch error.
fn typed<'a, T: 'static>(
    any: &'a dyn Any,
    operation: &'static str,
    expected: DeviceId,
    found: DeviceId,
) -> Result<&'a T> {
    any.downcast_ref::<T>().ok_or_else(|| Error::mismatch(operation, expected.kind, found))
}
