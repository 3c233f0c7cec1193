//! The dynamic tier: object-safe twins of the core traits ([`DynDevice`], [`DynStream`],
//! [`DynEvent`]), implemented once for every typed backend by blanket impls, and the
//! [`AnyDevice`] / [`AnyStream`] / [`AnyEvent`] enums dispatched over them with
//! `enum_dispatch` (wgpu-hal's `DynDevice` pattern).
//!
//! Built-in backends get their own enum variant (a direct `match`, no vtable); a Rust
//! backend registered at run time is `Registered`, behind an `Arc<dyn …>`; a plugin loaded
//! from a shared library is `Loaded`, the `gpuport-loaded` backend's own handle (its
//! function table is then the only indirect call). Every variant gets its twin-trait
//! methods from the blanket impls over the typed traits: each method list is written once.
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
    as_bytes, as_bytes_mut, Buffer, CompileOptions, Copy2d, DefaultStream, Device, DeviceId, DeviceInfo, DlpackDevices,
    Element, Error, Event, EventFlags, HostAllocFlags, HostCallback, HostFunction, Kernel, KernelArg, KernelSource,
    LaunchConfig, Module, ModuleImage, Ownership, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_cuda::{CudaDevice, CudaEvent, CudaStream};
use gpuport_host::{HostDevice, HostEvent, HostStream};
use gpuport_rocm::{RocmDevice, RocmEvent, RocmStream};

pub use gpuport_loaded::{LoadedDevice, LoadedEvent, LoadedStream};

pub use backend::DynBackend;
pub use device::DynDevice;
pub use event::DynEvent;
pub use stream::DynStream;

/// The handles of Rust backends registered at run time (`Runtime::register_plugin`):
/// trait objects, one vtable call away. (A plugin loaded from a shared library has its own
/// variants, holding the loader's handles directly: every loaded plugin shares those types,
/// so a call on one needs no vtable and the plugin's function table is the only indirect
/// call between the caller and the plugin.)
macro_rules! registered_handle {
    ($name:ident, $tr:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Made only by the `*_into_any` functions, which give a built-in backend's handle
        /// its own variant (one device never has two representations).
        #[derive(Clone)]
        pub struct $name(Arc<dyn $tr>);
    };
}
registered_handle!(RegisteredDevice, DynDevice, "A device of a Rust backend registered at run time.");
registered_handle!(RegisteredStream, DynStream, "A stream of a Rust backend registered at run time.");
registered_handle!(RegisteredEvent, DynEvent, "An event of a Rust backend registered at run time.");

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
    /// A Rust backend registered at run time (`Runtime::register_plugin`).
    Registered(RegisteredDevice),
    /// A device plugin loaded from a shared library (`Runtime::load_plugin`,
    /// `GPUPORT_PLUGINS`).
    Loaded(LoadedDevice),
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
    /// A Rust backend registered at run time (`Runtime::register_plugin`).
    Registered(RegisteredStream),
    /// A device plugin loaded from a shared library (`Runtime::load_plugin`,
    /// `GPUPORT_PLUGINS`).
    Loaded(LoadedStream),
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
    /// A Rust backend registered at run time (`Runtime::register_plugin`).
    Registered(RegisteredEvent),
    /// A device plugin loaded from a shared library (`Runtime::load_plugin`,
    /// `GPUPORT_PLUGINS`).
    Loaded(LoadedEvent),
}

impl AnyStream {
    /// Typed [`DynStream::write`]: `src`'s elements into `dst` at byte offset `dst_offset`.
    pub fn write_slice<T: Element>(&self, src: &[T], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.write(as_bytes(src), dst, dst_offset)
    }
    /// Typed [`DynStream::read`]: `len` elements of `src` from byte offset `src_offset`.
    pub fn read_vec<T: Element>(&self, src: &Buffer, src_offset: usize, len: usize) -> Result<Vec<T>> {
        let mut out = crate::fresh_memory::zeroed_elements::<T>(len);
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
    ($fn:ident, $any:ident, $tr:ident, $registered:ident, $($variant:ident: $ty:ty),*) => {
        /// Wraps a typed handle: its built-in variant, or `Registered`.
        pub fn $fn<S: $tr>(value: S) -> $any {
            $(
                let value = match take_if::<$ty, S>(value) {
                    Ok(v) => return $any::$variant(v),
                    Err(v) => v,
                };
            )*
            $any::Registered($registered(Arc::new(value)))
        }
    };
}
into_any!(
    device_into_any, AnyDevice, Device, RegisteredDevice,
    Host: HostDevice, Cuda: CudaDevice, Rocm: RocmDevice, Loaded: LoadedDevice
);
into_any!(
    stream_into_any, AnyStream, Stream, RegisteredStream,
    Host: HostStream, Cuda: CudaStream, Rocm: RocmStream, Loaded: LoadedStream
);
into_any!(
    event_into_any, AnyEvent, Event, RegisteredEvent,
    Host: HostEvent, Cuda: CudaEvent, Rocm: RocmEvent, Loaded: LoadedEvent
);

/// The typed handle of backend `B` inside an `Any*` handle, or a mismatch error.
fn typed<'a, T: 'static>(
    any: &'a dyn Any,
    operation: &'static str,
    expected: DeviceId,
    found: DeviceId,
) -> Result<&'a T> {
    any.downcast_ref::<T>().ok_or_else(|| Error::mismatch(operation, expected.kind, found))
}
