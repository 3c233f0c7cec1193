//! [`DynStream`], the object-safe twin of [`Stream`]: the trait, its blanket impl for every
//! typed stream, and its forwarding for plugin streams and [`AnyStream`].

use std::any::Any;
use std::ffi::c_void;

use gpuport_core::{
    Backend, Buffer, Copy2d, DeviceId, HostCallback, HostFunction, Kernel, KernelArg, LaunchConfig, Ownership, Result,
    Stream, StreamFlags, StreamProgress,
};

use super::forward::twin_trait;
use super::{typed, AnyEvent, AnyStream, DynEvent, RegisteredStream};

type EventOf<S> = <<S as Stream>::Backend as Backend>::Event;

twin_trait! {
    /// Object-safe twin of [`Stream`].
    pub trait DynStream, forwarded by RegisteredStream, inherent on AnyStream {
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
        /// See [`Stream::copy_2d`].
        fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()>;
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
        /// See [`Stream::host_function`].
        ///
        /// # Safety
        /// As for [`Stream::host_function`].
        @unsafe fn host_function(&self, func: HostFunction, user: *mut c_void) -> Result<()>;
        /// See [`Stream::launch`].
        fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()>;
        /// See [`Stream::run_if_idle`].
        fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool;
        /// See [`Stream::query`].
        fn query(&self) -> Result<bool>;
        /// See [`Stream::progress`]. `None` for a loaded plugin's stream: its counters
        /// are the plugin's, read by its own query.
        fn progress(&self) -> Option<::gpuport_core::StreamProgress<'_>>;
        /// See [`Stream::synchronize`].
        fn synchronize(&self) -> Result<()>;
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
    fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()> {
        Stream::copy_2d(self, src, dst, copy)
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
    unsafe fn host_function(&self, func: HostFunction, user: *mut c_void) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { Stream::host_function(self, func, user) }
    }
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        Stream::launch(self, kernel, config, args)
    }
    fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool {
        Stream::run_if_idle(self, f)
    }
    fn query(&self) -> Result<bool> {
        Stream::query(self)
    }
    fn progress(&self) -> Option<StreamProgress<'_>> {
        Stream::progress(self)
    }
    fn synchronize(&self) -> Result<()> {
        Stream::synchronize(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
