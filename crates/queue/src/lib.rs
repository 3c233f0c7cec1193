//! # gpuport-queue
//!
//! The machinery of a software device, for any port that runs its work on the CPU (the
//! host backend and the ext device are built from it; so is `examples/port-template`):
//!
//! - [`WorkQueue`]: an ordered asynchronous queue, drained by a thread of a process-wide
//!   elastic pool while it has work (no thread per stream); errors of queued work are kept
//!   for the next `synchronize`; [`ImplicitSync`]: the legacy default stream's implicit
//!   synchronisation with blocking streams, as on CUDA and ROCm;
//! - [`affinity`]: `GPUPORT_WORKER_CPUS`, the pool threads' placement;
//! - [`EventState`] / [`QueueEvent`]: real completion markers with generations and
//!   timestamps, raw handles and ownership;
//! - [`QueueStream`]: a stream handle with every stream operation written once over the
//!   backend's address resolution;
//! - [`LazyStream`]: the legacy default stream, created on first use;
//! - [`DeviceQueues`]: every queue of a device, for a device-wide synchronize that also
//!   waits for dropped streams' work;
//! - [`QueueDevice`]: the part of `Device` every software device shares (its queues, the
//!   legacy default stream, streams, events, the synchronous memset, modules), written
//!   once; [`QueueStreamPort`]: the data path of its streams, one method overridable at a
//!   time;
//! - [`kernels`]: Rust functions registered by module and name, launched like kernels;
//! - [`memory`]: aligned host allocations through a cache of freed blocks, and a pointer
//!   registry;
//! - [`handles`]: raw handle numbers that map back to live objects.
//!
//! A port implements `gpuport-core`'s traits by wrapping these types and forwarding.

pub mod affinity;
mod device;
mod event;
pub mod handles;
pub mod kernels;
mod lazy;
pub mod memory;
mod pool;
mod port;
mod queue;
mod queue_device;
mod stream;
mod wait;

pub use device::DeviceQueues;
pub use event::{EventState, QueueEvent};
pub use kernels::{register_kernel, HostKernelArgs, HostKernelFn};
pub use lazy::LazyStream;
pub use port::QueueStreamPort;
pub use queue::{
    copy_bytes, synchronize_all, ImplicitRole, ImplicitSync, QueueTracker, Rows, SendPtr, Work, WorkQueue,
};
pub use queue_device::QueueDevice;
pub use stream::{host_range, host_translator, QueueStream, Translate};

#[doc(hidden)]
pub use gpuport_core as __core;

/// Implements `gpuport_core::Event` for a newtype over [`QueueEvent`]
/// (`struct MyEvent(QueueEvent)`): every method forwards (`gpuport_core::forward_event!`).
/// `impl_queue_event!(MyEvent, MyBackend)`.
#[macro_export]
macro_rules! impl_queue_event {
    ($event:ty, $backend:ty) => {
        $crate::__core::forward_event!($event, $backend);
    };
}

/// Implements `gpuport_core::Stream` for a type holding a [`QueueStream`] in field
/// `$field`, whose event type wraps [`QueueEvent`] in field `0`: every method forwards.
/// `$translate` is an expression of the stream (`$this`) and the operation's name (`$op`)
/// giving the backend's [`Translate`] function. The data path (copy, memset, write, read,
/// launch) goes through [`QueueStreamPort`], which the macro implements too; an optional
/// `overrides { … }` block holds `QueueStreamPort` methods written by the port instead of
/// forwarded:
///
/// `impl_queue_stream!(MyStream, MyBackend, 0, |_this, op| host_translator(op))`, or
/// `impl_queue_stream!(MyStream, MyBackend, 0, |_this, op| host_translator(op), overrides { fn memset(…) {…} })`.
#[macro_export]
macro_rules! impl_queue_stream {
    ($stream:ty, $backend:ty, $field:tt, |$this:ident, $op:ident| $translate:expr $(, overrides { $($overrides:tt)* })?) => {
        impl $crate::QueueStreamPort for $stream {
            fn queue(&self) -> &$crate::QueueStream {
                &self.$field
            }
            fn translator(&self, operation: &'static str) -> impl $crate::Translate {
                let ($this, $op) = (self, operation);
                $translate
            }
            $($($overrides)*)?
        }

        impl $crate::__core::Stream for $stream {
            type Backend = $backend;

            fn device_id(&self) -> $crate::__core::DeviceId {
                self.$field.device_id()
            }
            fn ownership(&self) -> $crate::__core::Ownership {
                self.$field.ownership()
            }
            fn raw_handle(&self) -> usize {
                self.$field.raw_handle()
            }
            fn flags(&self) -> $crate::__core::StreamFlags {
                self.$field.flags()
            }
            fn priority(&self) -> i32 {
                0
            }
            fn copy(
                &self,
                src: &$crate::__core::Buffer,
                src_offset: usize,
                dst: &$crate::__core::Buffer,
                dst_offset: usize,
                len: usize,
            ) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::copy(self, src, src_offset, dst, dst_offset, len)
            }
            fn copy_2d(
                &self,
                src: &$crate::__core::Buffer,
                dst: &$crate::__core::Buffer,
                copy: &$crate::__core::Copy2d,
            ) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::copy_2d(self, src, dst, copy)
            }
            fn memset(
                &self,
                dst: &$crate::__core::Buffer,
                offset: usize,
                len: usize,
                value: u8,
            ) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::memset(self, dst, offset, len, value)
            }
            fn write(&self, src: &[u8], dst: &$crate::__core::Buffer, dst_offset: usize) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::write(self, src, dst, dst_offset)
            }
            fn read(
                &self,
                src: &$crate::__core::Buffer,
                src_offset: usize,
                dst: &mut [u8],
            ) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::read(self, src, src_offset, dst)
            }
            fn record(&self, event: &<$backend as $crate::__core::Backend>::Event) -> $crate::__core::Result<()> {
                self.$field.record(&event.0)
            }
            fn wait(&self, event: &<$backend as $crate::__core::Backend>::Event) -> $crate::__core::Result<()> {
                self.$field.wait(&event.0)
            }
            fn host_callback(&self, f: $crate::__core::HostCallback) -> $crate::__core::Result<()> {
                self.$field.host_callback(f)
            }
            unsafe fn host_function(
                &self,
                func: $crate::__core::HostFunction,
                user: *mut ::std::ffi::c_void,
            ) -> $crate::__core::Result<()> {
                // SAFETY: forwarded.
                unsafe { self.$field.host_function(func, user) }
            }
            fn launch(
                &self,
                kernel: &$crate::__core::Kernel,
                config: &$crate::__core::LaunchConfig,
                args: &[$crate::__core::KernelArg],
            ) -> $crate::__core::Result<()> {
                $crate::QueueStreamPort::launch(self, kernel, config, args)
            }
            fn run_if_idle(&self, f: &mut dyn FnMut()) -> bool {
                self.$field.run_if_idle(f)
            }
            #[inline]
            fn query(&self) -> $crate::__core::Result<bool> {
                self.$field.query()
            }
            fn progress(&self) -> Option<$crate::__core::StreamProgress<'_>> {
                Some(self.$field.progress())
            }
            fn synchronize(&self) -> $crate::__core::Result<()> {
                self.$field.synchronize()
            }
        }
    };
}
