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

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use enum_dispatch::enum_dispatch;

pub use crate::runtime::DynBackend;
use gpuport_core::{
    as_bytes, as_bytes_mut, zeroed_vec, Backend, Buffer, DefaultStream, Device, DeviceId, DeviceInfo, DlpackDevices,
    Element, Error, Event, EventFlags, HostAllocFlags, HostCallback, Kernel, KernelArg, LaunchConfig, Module,
    ModuleImage, Ownership, PointerAttributes, Result, Stream, StreamFlags,
};
use gpuport_cuda::{CudaDevice, CudaEvent, CudaStream};
use gpuport_host::{HostDevice, HostEvent, HostStream};
use gpuport_rocm::{RocmDevice, RocmEvent, RocmStream};

/// Object-safe twin of [`Device`]: handles of other kinds are taken and returned as
/// `Any*` enums, and a handle of the wrong backend is [`Error::BackendMismatch`].
#[enum_dispatch]
pub trait DynDevice: Send + Sync + 'static {
    /// See [`Device::id`].
    fn id(&self) -> DeviceId;
    /// See [`Device::info`].
    fn info(&self) -> Result<DeviceInfo>;
    /// The DLPack device types its backend declares ([`Backend::DLPACK`]).
    fn dlpack_devices(&self) -> DlpackDevices;
    /// See [`Device::alloc`].
    fn alloc(&self, bytes: usize) -> Result<Buffer>;
    /// See [`Device::alloc_async`].
    fn alloc_async(&self, bytes: usize, stream: &AnyStream) -> Result<Buffer>;
    /// See [`Device::alloc_pinned`].
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer>;
    /// See [`Device::alloc_managed`].
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer>;
    /// See [`Device::memset`].
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// See [`Device::create_stream`].
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<AnyStream>;
    /// See [`Device::stream_priority_range`].
    fn stream_priority_range(&self) -> Result<(i32, i32)>;
    /// See [`Device::default_stream`].
    fn default_stream(&self, which: DefaultStream) -> Result<AnyStream>;
    /// See [`Device::wrap_stream`].
    ///
    /// # Safety
    /// As for [`Device::wrap_stream`].
    unsafe fn wrap_stream(&self, raw: usize) -> Result<AnyStream>;
    /// See [`Device::create_event`].
    fn create_event(&self, flags: EventFlags) -> Result<AnyEvent>;
    /// See [`Device::wrap_event`].
    ///
    /// # Safety
    /// As for [`Device::wrap_event`].
    unsafe fn wrap_event(&self, raw: usize) -> Result<AnyEvent>;
    /// See [`Device::synchronize`].
    fn synchronize(&self) -> Result<()>;
    /// See [`Device::can_access_peer`].
    fn can_access_peer(&self, peer: &AnyDevice) -> Result<bool>;
    /// See [`Device::enable_peer_access`].
    fn enable_peer_access(&self, peer: &AnyDevice) -> Result<()>;
    /// See [`Device::pointer_attributes`].
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes>;
    /// See [`Device::load_module`].
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module>;
    /// See [`Device::kernel`].
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel>;
    /// The typed handle, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// Object-safe twin of [`Stream`].
#[enum_dispatch]
pub trait DynStream: Send + Sync + 'static {
    /// See [`Stream::device_id`].
    fn device_id(&self) -> DeviceId;
    /// See [`Stream::ownership`].
    fn ownership(&self) -> Ownership;
    /// See [`Stream::raw_handle`].
    fn raw_handle(&self) -> usize;
    /// See [`Stream::flags`].
    fn flags(&self) -> StreamFlags;
    /// See [`Stream::priority`].
    fn priority(&self) -> i32;
    /// See [`Stream::copy`].
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()>;
    /// See [`Stream::memset`].
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// See [`Stream::write`].
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()>;
    /// See [`Stream::read`].
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()>;
    /// See [`Stream::record`].
    fn record(&self, event: &AnyEvent) -> Result<()>;
    /// See [`Stream::wait`].
    fn wait(&self, event: &AnyEvent) -> Result<()>;
    /// See [`Stream::host_callback`].
    fn host_callback(&self, f: HostCallback) -> Result<()>;
    /// See [`Stream::launch`].
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()>;
    /// See [`Stream::query`].
    fn query(&self) -> Result<bool>;
    /// See [`Stream::synchronize`].
    fn synchronize(&self) -> Result<()>;
    /// The typed handle, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// Object-safe twin of [`Event`].
#[enum_dispatch]
pub trait DynEvent: Send + Sync + 'static {
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
    /// The typed handle, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

/// Wrappers of plugin handles, so the `Plugin` variants can hold trait objects.
macro_rules! plugin_handle {
    ($name:ident, $tr:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Made only by the `*_into_any` functions, which give a built-in backend's handle
        /// its own variant: one device never has two representations.
        #[derive(Clone)]
        pub struct $name(Arc<dyn $tr>);
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

type StreamOf<D> = <<D as Device>::Backend as Backend>::Stream;
type EventOf<S> = <<S as Stream>::Backend as Backend>::Event;

impl<D: Device> DynDevice for D {
    fn id(&self) -> DeviceId {
        Device::id(self)
    }
    fn info(&self) -> Result<DeviceInfo> {
        Device::info(self)
    }
    fn dlpack_devices(&self) -> DlpackDevices {
        <D::Backend as Backend>::DLPACK
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        Device::alloc(self, bytes)
    }
    fn alloc_async(&self, bytes: usize, stream: &AnyStream) -> Result<Buffer> {
        let s = typed::<StreamOf<D>>(stream.as_any(), "alloc_async", Device::id(self), stream.device_id())?;
        Device::alloc_async(self, bytes, s)
    }
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        Device::alloc_pinned(self, bytes, flags)
    }
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer> {
        Device::alloc_managed(self, bytes)
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        Device::memset(self, dst, offset, len, value)
    }
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<AnyStream> {
        Device::create_stream(self, flags, priority).map(stream_into_any)
    }
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        Device::stream_priority_range(self)
    }
    fn default_stream(&self, which: DefaultStream) -> Result<AnyStream> {
        Device::default_stream(self, which).map(stream_into_any)
    }
    unsafe fn wrap_stream(&self, raw: usize) -> Result<AnyStream> {
        // SAFETY: the caller upholds `Device::wrap_stream`'s contract.
        unsafe { Device::wrap_stream(self, raw) }.map(stream_into_any)
    }
    fn create_event(&self, flags: EventFlags) -> Result<AnyEvent> {
        Device::create_event(self, flags).map(event_into_any)
    }
    unsafe fn wrap_event(&self, raw: usize) -> Result<AnyEvent> {
        // SAFETY: the caller upholds `Device::wrap_event`'s contract.
        unsafe { Device::wrap_event(self, raw) }.map(event_into_any)
    }
    fn synchronize(&self) -> Result<()> {
        Device::synchronize(self)
    }
    fn can_access_peer(&self, peer: &AnyDevice) -> Result<bool> {
        match peer.as_any().downcast_ref::<D>() {
            Some(p) => Device::can_access_peer(self, p),
            None => Ok(false), // another backend: never directly
        }
    }
    fn enable_peer_access(&self, peer: &AnyDevice) -> Result<()> {
        let p = typed::<D>(peer.as_any(), "enable_peer_access", Device::id(self), peer.id())?;
        Device::enable_peer_access(self, p)
    }
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        Device::pointer_attributes(self, addr)
    }
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        Device::load_module(self, image)
    }
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        Device::kernel(self, module, name)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<S: Stream> DynStream for S {
    fn device_id(&self) -> DeviceId {
        Stream::device_id(self)
    }
    fn ownership(&self) -> Ownership {
        Stream::ownership(self)
    }
    fn raw_handle(&self) -> usize {
        Stream::raw_handle(self)
    }
    fn flags(&self) -> StreamFlags {
        Stream::flags(self)
    }
    fn priority(&self) -> i32 {
        Stream::priority(self)
    }
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        Stream::copy(self, src, src_offset, dst, dst_offset, len)
    }
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        Stream::memset(self, dst, offset, len, value)
    }
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        Stream::write(self, src, dst, dst_offset)
    }
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        Stream::read(self, src, src_offset, dst)
    }
    fn record(&self, event: &AnyEvent) -> Result<()> {
        let e = typed::<EventOf<S>>(event.as_any(), "record", Stream::device_id(self), event.device_id())?;
        Stream::record(self, e)
    }
    fn wait(&self, event: &AnyEvent) -> Result<()> {
        let e = typed::<EventOf<S>>(event.as_any(), "wait", Stream::device_id(self), event.device_id())?;
        Stream::wait(self, e)
    }
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        Stream::host_callback(self, f)
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        Stream::launch(self, kernel, config, args)
    }
    fn query(&self) -> Result<bool> {
        Stream::query(self)
    }
    fn synchronize(&self) -> Result<()> {
        Stream::synchronize(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
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

/// For one twin trait: forwards it from the plugin wrapper to its trait object, and gives
/// the `Any*` enum the same methods as inherent ones, so callers need no trait import
/// (and `use gpuport::*` brings no second trait whose methods collide with the core
/// traits' on typed handles).
macro_rules! forward_to_plugin_and_any {
    ($tr:ident for $wrapper:ident, $any:ident { $( $(#[$unsafe:ident])? fn $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty; )* }) => {
        impl $tr for $wrapper {
            $(
                forward_to_plugin_and_any!(@forward $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
            fn as_any(&self) -> &dyn Any {
                self.0.as_any()
            }
        }
        impl $any {
            $(
                forward_to_plugin_and_any!(@inherent $tr $($unsafe)? $m(&self $(, $a: $t)*) -> $r);
            )*
        }
    };
    (@forward unsafe $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        unsafe fn $m(&self $(, $a: $t)*) -> $r {
            // SAFETY: the caller upholds the trait method's contract, which is forwarded.
            unsafe { self.0.$m($($a),*) }
        }
    };
    (@forward $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        fn $m(&self $(, $a: $t)*) -> $r {
            self.0.$m($($a),*)
        }
    };
    (@inherent $tr:ident unsafe $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[doc = concat!("See [`", stringify!($tr), "::", stringify!($m), "`].\n\n# Safety\nAs for that method.")]
        pub unsafe fn $m(&self $(, $a: $t)*) -> $r {
            // SAFETY: the caller upholds the trait method's contract, which is forwarded.
            unsafe { <Self as $tr>::$m(self $(, $a)*) }
        }
    };
    (@inherent $tr:ident $m:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty) => {
        #[doc = concat!("See [`", stringify!($tr), "::", stringify!($m), "`].")]
        #[inline]
        pub fn $m(&self $(, $a: $t)*) -> $r {
            <Self as $tr>::$m(self $(, $a)*)
        }
    };
}

forward_to_plugin_and_any!(DynDevice for PluginDevice, AnyDevice {
    fn id(&self) -> DeviceId;
    fn info(&self) -> Result<DeviceInfo>;
    fn dlpack_devices(&self) -> DlpackDevices;
    fn alloc(&self, bytes: usize) -> Result<Buffer>;
    fn alloc_async(&self, bytes: usize, stream: &AnyStream) -> Result<Buffer>;
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer>;
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer>;
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<AnyStream>;
    fn stream_priority_range(&self) -> Result<(i32, i32)>;
    fn default_stream(&self, which: DefaultStream) -> Result<AnyStream>;
    #[unsafe] fn wrap_stream(&self, raw: usize) -> Result<AnyStream>;
    fn create_event(&self, flags: EventFlags) -> Result<AnyEvent>;
    #[unsafe] fn wrap_event(&self, raw: usize) -> Result<AnyEvent>;
    fn synchronize(&self) -> Result<()>;
    fn can_access_peer(&self, peer: &AnyDevice) -> Result<bool>;
    fn enable_peer_access(&self, peer: &AnyDevice) -> Result<()>;
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes>;
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module>;
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel>;
});

forward_to_plugin_and_any!(DynStream for PluginStream, AnyStream {
    fn device_id(&self) -> DeviceId;
    fn ownership(&self) -> Ownership;
    fn raw_handle(&self) -> usize;
    fn flags(&self) -> StreamFlags;
    fn priority(&self) -> i32;
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()>;
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()>;
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()>;
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()>;
    fn record(&self, event: &AnyEvent) -> Result<()>;
    fn wait(&self, event: &AnyEvent) -> Result<()>;
    fn host_callback(&self, f: HostCallback) -> Result<()>;
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()>;
    fn query(&self) -> Result<bool>;
    fn synchronize(&self) -> Result<()>;
});

forward_to_plugin_and_any!(DynEvent for PluginEvent, AnyEvent {
    fn device_id(&self) -> DeviceId;
    fn ownership(&self) -> Ownership;
    fn raw_handle(&self) -> usize;
    fn flags(&self) -> EventFlags;
    fn query(&self) -> Result<bool>;
    fn synchronize(&self) -> Result<()>;
    fn elapsed_ms(&self, end: &AnyEvent) -> Result<f32>;
});
