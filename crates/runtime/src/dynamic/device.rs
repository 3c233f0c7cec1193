//! [`DynDevice`], the object-safe twin of [`Device`]: the trait, its blanket impl for every
//! typed device, and its forwarding for plugin devices and [`AnyDevice`].

use std::any::Any;

use gpuport_core::{
    Backend, Buffer, CompileOptions, DefaultStream, Device, DeviceId, DeviceInfo, DlpackDevices, EventFlags,
    HostAllocFlags, Kernel, KernelSource, Module, ModuleImage, PointerAttributes, Result, StreamFlags,
};

use super::forward::twin_trait;
use super::{event_into_any, stream_into_any, typed, AnyDevice, AnyEvent, AnyStream, DynStream, RegisteredDevice};

type StreamOf<D> = <<D as Device>::Backend as Backend>::Stream;

twin_trait! {
    /// Object-safe twin of [`Device`]: handles of other kinds are taken and returned as
    /// `Any*` enums, and a handle of the wrong backend is [`Error::BackendMismatch`](gpuport_core::Error::BackendMismatch).
    pub trait DynDevice, forwarded by RegisteredDevice, inherent on AnyDevice {
        /// See [`Device::id`].
        fn id(&self) -> DeviceId;
        /// See [`Device::info`].
        fn info(&self) -> Result<DeviceInfo>;
        /// See [`Device::dlpack_devices`].
        fn dlpack_devices(&self) -> DlpackDevices;
        /// See [`Device::alloc`].
        fn alloc(&self, bytes: usize) -> Result<Buffer>;
        /// See [`Device::alloc_async`].
        fn alloc_async(&self, bytes: usize, stream: &AnyStream) -> Result<Buffer>;
        /// See [`Device::alloc_pinned`].
        fn alloc_pinned(&self, bytes: usize, flags: HostAllocFlags) -> Result<Buffer>;
        /// See [`Device::alloc_managed`].
        fn alloc_managed(&self, bytes: usize) -> Result<Buffer>;
        /// See [`Device::register_host`].
        fn register_host(&self, host: &Buffer) -> Result<Buffer>;
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
        @unsafe fn wrap_stream(&self, raw: usize) -> Result<AnyStream>;
        /// See [`Device::create_event`].
        fn create_event(&self, flags: EventFlags) -> Result<AnyEvent>;
        /// See [`Device::wrap_event`].
        ///
        /// # Safety
        /// As for [`Device::wrap_event`].
        @unsafe fn wrap_event(&self, raw: usize) -> Result<AnyEvent>;
        /// See [`Device::synchronize`].
        fn synchronize(&self) -> Result<()>;
        /// See [`Device::make_current`].
        fn make_current(&self) -> Result<()>;
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
        /// See [`Device::compile`].
        fn compile(&self, source: &KernelSource, options: &CompileOptions) -> Result<Module>;
    }
}

impl<D: Device> DynDevice for D {
    fn id(&self) -> DeviceId {
        Device::id(self)
    }
    fn info(&self) -> Result<DeviceInfo> {
        Device::info(self)
    }
    fn dlpack_devices(&self) -> DlpackDevices {
        Device::dlpack_devices(self)
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
    fn register_host(&self, host: &Buffer) -> Result<Buffer> {
        Device::register_host(self, host)
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
    fn make_current(&self) -> Result<()> {
        Device::make_current(self)
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
    fn compile(&self, source: &KernelSource, options: &CompileOptions) -> Result<Module> {
        Device::compile(self, source, options)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
