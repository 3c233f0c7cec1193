//! `impl_vendor_device!`: a backend's `Device` impl, forwarded to [`VendorDevice`].
//!
//! [`VendorDevice`]: super::VendorDevice

/// Implements `gpuport_core::Device` for a newtype over an opened vendor device
/// (`struct MyDevice(Arc<VendorDevice<MyCtx>>)`) whose backend's stream and event types are
/// newtypes over [`VendorStream`](crate::stream::VendorStream) and
/// [`VendorEvent`](crate::event::VendorEvent): every method forwards to the vendor
/// kit, which makes the checked calls of [`VendorCalls`](crate::calls::VendorCalls).
/// `impl_vendor_device!(MyDevice, MyBackend, MyStream, MyEvent)`.
#[macro_export]
macro_rules! impl_vendor_device {
    ($device:ty, $backend:ty, $stream:ident, $event:ident) => {
        impl $crate::__core::Device for $device {
            type Backend = $backend;

            fn id(&self) -> $crate::__core::DeviceId {
                $crate::VendorCalls::device_id(&**self.0)
            }
            fn info(&self) -> $crate::__core::Result<$crate::__core::DeviceInfo> {
                self.0.info()
            }
            fn dlpack_devices(&self) -> $crate::__core::DlpackDevices {
                $crate::VendorCalls::dlpack_devices(&**self.0).unwrap_or(<$backend as $crate::__core::Backend>::DLPACK)
            }
            fn alloc(&self, bytes: usize) -> $crate::__core::Result<$crate::__core::Buffer> {
                self.0.alloc(bytes)
            }
            fn alloc_async(&self, bytes: usize, stream: &$stream) -> $crate::__core::Result<$crate::__core::Buffer> {
                self.0.alloc_async(bytes, &stream.0)
            }
            fn alloc_pinned(
                &self,
                bytes: usize,
                flags: $crate::__core::HostAllocFlags,
            ) -> $crate::__core::Result<$crate::__core::Buffer> {
                self.0.alloc_pinned(bytes, flags)
            }
            fn alloc_managed(&self, bytes: usize) -> $crate::__core::Result<$crate::__core::Buffer> {
                self.0.alloc_managed(bytes)
            }
            fn register_host(&self, host: &$crate::__core::Buffer) -> $crate::__core::Result<$crate::__core::Buffer> {
                self.0.register_host(host)
            }
            fn memset(
                &self,
                dst: &$crate::__core::Buffer,
                offset: usize,
                len: usize,
                value: u8,
            ) -> $crate::__core::Result<()> {
                self.0.memset(dst, offset, len, value)
            }
            fn create_stream(
                &self,
                flags: $crate::__core::StreamFlags,
                priority: i32,
            ) -> $crate::__core::Result<$stream> {
                self.0.create_stream(flags, priority).map($stream)
            }
            fn stream_priority_range(&self) -> $crate::__core::Result<(i32, i32)> {
                self.0.stream_priority_range()
            }
            fn default_stream(&self, which: $crate::__core::DefaultStream) -> $crate::__core::Result<$stream> {
                self.0.default_stream(which).map($stream)
            }
            unsafe fn wrap_stream(&self, raw: usize) -> $crate::__core::Result<$stream> {
                // SAFETY: forwarded: the caller's promise about `raw`.
                unsafe { self.0.wrap_stream(raw) }.map($stream)
            }
            fn create_event(&self, flags: $crate::__core::EventFlags) -> $crate::__core::Result<$event> {
                self.0.create_event(flags).map($event)
            }
            unsafe fn wrap_event(&self, raw: usize) -> $crate::__core::Result<$event> {
                // SAFETY: forwarded: the caller's promise about `raw`.
                unsafe { self.0.wrap_event(raw) }.map($event)
            }
            fn synchronize(&self) -> $crate::__core::Result<()> {
                self.0.synchronize()
            }
            fn make_current(&self) -> $crate::__core::Result<()> {
                self.0.make_current()
            }
            fn can_access_peer(&self, peer: &Self) -> $crate::__core::Result<bool> {
                self.0.can_access_peer(&peer.0)
            }
            fn enable_peer_access(&self, peer: &Self) -> $crate::__core::Result<()> {
                self.0.enable_peer_access(&peer.0)
            }
            fn pointer_attributes(&self, addr: u64) -> $crate::__core::Result<$crate::__core::PointerAttributes> {
                self.0.pointer_attributes(addr)
            }
            fn load_module(
                &self,
                image: $crate::__core::ModuleImage<'_>,
            ) -> $crate::__core::Result<$crate::__core::Module> {
                self.0.load_module(image)
            }
            fn kernel(
                &self,
                module: &$crate::__core::Module,
                name: &str,
            ) -> $crate::__core::Result<$crate::__core::Kernel> {
                self.0.kernel(module, name)
            }
            fn compile(
                &self,
                source: &$crate::__core::KernelSource,
                options: &$crate::__core::CompileOptions,
            ) -> $crate::__core::Result<$crate::__core::Module> {
                self.0.compile(source, options)
            }
        }
    };
}
