//! A loaded plugin's devices, streams and events in the dynamic tier: the vendor kit's
//! handles over [`PluginCalls`], the `Loaded` variants of `AnyDevice`, `AnyStream` and
//! `AnyEvent`. Their backend is known only at run time, so they implement the twin
//! traits directly (a built-in or linked-in backend gets them from its typed traits).
//!
//! Every loaded plugin's handles are of these same types, so a handle taken from an `Any*`
//! is checked to be of this plugin (its kind), not only of this type.
//!
//! The `Loaded` variants hold these handles directly (no trait object), and each method
//! that calls into the plugin is kept out of line: the `Any*` dispatch reaches it with one
//! direct jump, as it reaches a built-in backend's, and none of its other arms inherits
//! this method's stack frame (inlined, the frame would be set up before the dispatch, for
//! every backend). Plain accessors are left to the compiler, and so is a stream's query:
//! its common case reads the plugin's progress counters and calls nothing, with its
//! checks and its call into the plugin out of line, so it needs no frame and inlines into
//! the dispatch whole (the query of a port linked in pays a vtable call instead).

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use gpuport_core::{
    Buffer, CompileOptions, Copy2d, DefaultStream, DeviceId, DeviceInfo, DlpackDevices, Error, EventFlags,
    HostAllocFlags, HostCallback, HostFunction, Kernel, KernelArg, KernelSource, LaunchConfig, Module, ModuleImage,
    Ownership, PointerAttributes, Result, StreamFlags,
};
use gpuport_vendor_kit::{VendorCalls, VendorDevice, VendorEvent, VendorStream};

use super::calls::PluginCalls;
use crate::dynamic::{AnyDevice, AnyEvent, AnyStream, DynDevice, DynEvent, DynStream};

/// A device of a plugin loaded from a shared library.
#[derive(Clone)]
pub struct LoadedDevice {
    pub(crate) dev: Arc<VendorDevice<PluginCalls>>,
    pub(crate) dlpack: DlpackDevices,
}

/// A stream of a plugin loaded from a shared library.
#[derive(Clone)]
pub struct LoadedStream(VendorStream<PluginCalls>);

/// An event of a plugin loaded from a shared library.
#[derive(Clone)]
pub struct LoadedEvent(VendorEvent<PluginCalls>);

pub(crate) fn device_into_any(dev: LoadedDevice) -> AnyDevice {
    AnyDevice::Loaded(dev)
}

fn stream_into_any(stream: VendorStream<PluginCalls>) -> AnyStream {
    AnyStream::Loaded(LoadedStream(stream))
}

fn event_into_any(event: VendorEvent<PluginCalls>) -> AnyEvent {
    AnyEvent::Loaded(LoadedEvent(event))
}

/// The handle of this plugin inside `any`: of this type and of this backend, or
/// `BackendMismatch`.
fn ours<'a, T: 'static>(
    any: &'a dyn Any,
    kind_of: impl Fn(&T) -> DeviceId,
    operation: &'static str,
    expected: DeviceId,
    found: DeviceId,
) -> Result<&'a T> {
    any.downcast_ref::<T>()
        .filter(|t| kind_of(t).kind == expected.kind)
        .ok_or_else(|| Error::mismatch(operation, expected.kind, found))
}

fn stream_of<'a>(s: &'a AnyStream, op: &'static str, me: DeviceId) -> Result<&'a VendorStream<PluginCalls>> {
    ours::<LoadedStream>(s.as_any(), |x| x.0.device_id(), op, me, s.device_id()).map(|x| &x.0)
}

fn event_of<'a>(e: &'a AnyEvent, op: &'static str, me: DeviceId) -> Result<&'a VendorEvent<PluginCalls>> {
    ours::<LoadedEvent>(e.as_any(), |x| x.0.device_id(), op, me, e.device_id()).map(|x| &x.0)
}

impl DynDevice for LoadedDevice {
    fn id(&self) -> DeviceId {
        self.dev.device_id()
    }
    #[inline(never)]
    fn info(&self) -> Result<DeviceInfo> {
        self.dev.info()
    }
    fn dlpack_devices(&self) -> DlpackDevices {
        self.dlpack
    }
    #[inline(never)]
    fn alloc(&self, bytes: usize) -> Result<Buffer> {
        self.dev.alloc(bytes)
    }
    #[inline(never)]
    fn alloc_async(&self, bytes: usize, stream: &AnyStream) -> Result<Buffer> {
        self.dev.alloc_async(bytes, stream_of(stream, "alloc_async", self.id())?)
    }
    #[inline(never)]
    fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer> {
        self.dev.alloc_pinned(bytes, flags)
    }
    #[inline(never)]
    fn alloc_managed(&self, bytes: usize) -> Result<Buffer> {
        self.dev.alloc_managed(bytes)
    }
    #[inline(never)]
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.dev.memset(dst, offset, len, value)
    }
    #[inline(never)]
    fn create_stream(&self, flags: StreamFlags, priority: i32) -> Result<AnyStream> {
        self.dev.create_stream(flags, priority).map(stream_into_any)
    }
    #[inline(never)]
    fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.dev.stream_priority_range()
    }
    #[inline(never)]
    fn default_stream(&self, which: DefaultStream) -> Result<AnyStream> {
        self.dev.default_stream(which).map(stream_into_any)
    }
    #[inline(never)]
    unsafe fn wrap_stream(&self, raw: usize) -> Result<AnyStream> {
        // SAFETY: the caller upholds `Device::wrap_stream`'s contract.
        unsafe { self.dev.wrap_stream(raw) }.map(stream_into_any)
    }
    #[inline(never)]
    fn create_event(&self, flags: EventFlags) -> Result<AnyEvent> {
        self.dev.create_event(flags).map(event_into_any)
    }
    #[inline(never)]
    unsafe fn wrap_event(&self, raw: usize) -> Result<AnyEvent> {
        // SAFETY: the caller upholds `Device::wrap_event`'s contract.
        unsafe { self.dev.wrap_event(raw) }.map(event_into_any)
    }
    #[inline(never)]
    fn synchronize(&self) -> Result<()> {
        self.dev.synchronize()
    }
    #[inline(never)]
    fn can_access_peer(&self, peer: &AnyDevice) -> Result<bool> {
        match ours::<LoadedDevice>(peer.as_any(), |p| p.id(), "can_access_peer", self.id(), peer.id()) {
            Ok(p) => self.dev.can_access_peer(&p.dev),
            Err(_) => Ok(false), // another backend: never directly
        }
    }
    #[inline(never)]
    fn enable_peer_access(&self, peer: &AnyDevice) -> Result<()> {
        let p = ours::<LoadedDevice>(peer.as_any(), |p| p.id(), "enable_peer_access", self.id(), peer.id())?;
        self.dev.enable_peer_access(&p.dev)
    }
    #[inline(never)]
    fn pointer_attributes(&self, addr: u64) -> Result<PointerAttributes> {
        self.dev.pointer_attributes(addr)
    }
    #[inline(never)]
    fn load_module(&self, image: ModuleImage<'_>) -> Result<Module> {
        self.dev.load_module(image)
    }
    #[inline(never)]
    fn kernel(&self, module: &Module, name: &str) -> Result<Kernel> {
        self.dev.kernel(module, name)
    }
    #[inline(never)]
    fn compile(&self, source: &KernelSource, options: &CompileOptions) -> Result<Module> {
        self.dev.compile(source, options)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl DynStream for LoadedStream {
    fn device_id(&self) -> DeviceId {
        self.0.device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.raw_value()
    }
    fn flags(&self) -> StreamFlags {
        self.0.flags()
    }
    fn priority(&self) -> i32 {
        self.0.priority()
    }
    #[inline(never)]
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        self.0.copy(src, src_offset, dst, dst_offset, len)
    }
    #[inline(never)]
    fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()> {
        self.0.copy_2d(src, dst, copy)
    }
    #[inline(never)]
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.0.memset(dst, offset, len, value)
    }
    #[inline(never)]
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.0.write(src, dst, dst_offset)
    }
    #[inline(never)]
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.0.read(src, src_offset, dst)
    }
    #[inline(never)]
    fn record(&self, event: &AnyEvent) -> Result<()> {
        self.0.record(event_of(event, "record", self.device_id())?)
    }
    #[inline(never)]
    fn wait(&self, event: &AnyEvent) -> Result<()> {
        self.0.wait(event_of(event, "wait", self.device_id())?)
    }
    #[inline(never)]
    fn host_callback(&self, f: HostCallback) -> Result<()> {
        self.0.host_callback(f)
    }
    #[inline(never)]
    unsafe fn host_function(&self, func: HostFunction, user: *mut c_void) -> Result<()> {
        // SAFETY: forwarded: the caller's contract is the closure's.
        self.0.host_callback(unsafe { gpuport_core::host_function_callback(func, user) })
    }
    #[inline(never)]
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        self.0.launch(kernel, config, args)
    }
    #[inline]
    fn query(&self) -> Result<bool> {
        self.0.query()
    }
    fn progress(&self) -> Option<gpuport_core::StreamProgress<'_>> {
        // The plugin's counters are read by the query above; they are not handed on.
        None
    }
    #[inline(never)]
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl DynEvent for LoadedEvent {
    fn device_id(&self) -> DeviceId {
        self.0.device_id()
    }
    fn ownership(&self) -> Ownership {
        self.0.ownership()
    }
    fn raw_handle(&self) -> usize {
        self.0.raw_handle()
    }
    fn flags(&self) -> EventFlags {
        self.0.flags()
    }
    #[inline(never)]
    fn query(&self) -> Result<bool> {
        self.0.query()
    }
    #[inline(never)]
    fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }
    #[inline(never)]
    fn elapsed_ms(&self, end: &AnyEvent) -> Result<f32> {
        self.0.elapsed_ms(event_of(end, "elapsed_ms", self.device_id())?)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
