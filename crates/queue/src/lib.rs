//! # gpuport-queue
//!
//! The machinery of a software device, for any port that runs its work on the CPU (the
//! host backend and the ext device are built from it; so is `examples/port-template`):
//!
//! - [`WorkQueue`]: an ordered asynchronous queue, drained by a thread of a process-wide
//!   elastic pool while it has work (no thread per stream); errors of queued work are kept
//!   for the next `synchronize`;
//! - [`affinity`]: `GPUPORT_WORKER_CPUS`, the pool threads' placement;
//! - [`EventState`] / [`QueueEvent`]: real completion markers with generations and
//!   timestamps, raw handles and ownership;
//! - [`QueueStream`]: a stream handle with every stream operation written once over the
//!   backend's address resolution;
//! - [`LazyStream`]: the legacy default stream, created on first use;
//! - [`DeviceQueues`]: every queue of a device, for a device-wide synchronize that also
//!   waits for dropped streams' work;
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
mod queue;
mod stream;

pub use device::DeviceQueues;
pub use event::{EventState, QueueEvent};
pub use kernels::{register_kernel, HostKernelArgs, HostKernelFn};
pub use lazy::LazyStream;
pub use queue::{copy_bytes, synchronize_all, QueueTracker, SendPtr, Work, WorkQueue};
pub use stream::{host_range, host_resolver, QueueStream, Resolve};

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
/// `$field`, whose event type wraps [`QueueEvent`] in field `0`: every method forwards,
/// passing `$resolve` (an expression of `self` and the operation's name `$op`, giving the
/// backend's [`Resolve`] function).
/// `impl_queue_stream!(MyStream, MyBackend, 0, |_this, op| host_resolver(op))` (`_this`: the
/// resolver here does not need the stream).
#[macro_export]
macro_rules! impl_queue_stream {
    ($stream:ty, $backend:ty, $field:tt, |$this:ident, $op:ident| $resolve:expr) => {
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
                let ($this, $op) = (self, "copy");
                self.$field.copy(src, src_offset, dst, dst_offset, len, $resolve)
            }
            fn memset(
                &self,
                dst: &$crate::__core::Buffer,
                offset: usize,
                len: usize,
                value: u8,
            ) -> $crate::__core::Result<()> {
                let ($this, $op) = (self, "memset");
                self.$field.memset(dst, offset, len, value, $resolve)
            }
            fn write(&self, src: &[u8], dst: &$crate::__core::Buffer, dst_offset: usize) -> $crate::__core::Result<()> {
                let ($this, $op) = (self, "write");
                self.$field.write(src, dst, dst_offset, $resolve)
            }
            fn read(
                &self,
                src: &$crate::__core::Buffer,
                src_offset: usize,
                dst: &mut [u8],
            ) -> $crate::__core::Result<()> {
                let ($this, $op) = (self, "read");
                self.$field.read(src, src_offset, dst, $resolve)
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
            fn launch(
                &self,
                kernel: &$crate::__core::Kernel,
                config: &$crate::__core::LaunchConfig,
                args: &[$crate::__core::KernelArg],
            ) -> $crate::__core::Result<()> {
                let ($this, $op) = (self, "launch");
                self.$field.launch(kernel, config, args, $resolve)
            }
            #[inline]
            fn query(&self) -> $crate::__core::Result<bool> {
                self.$field.query()
            }
            fn synchronize(&self) -> $crate::__core::Result<()> {
                self.$field.synchronize()
            }
        }
    };
}
