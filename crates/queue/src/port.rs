//! The data path of a software device's stream, as methods a port overrides one at a time.
//!
//! `impl_queue_stream!` implements `gpuport_core::Stream` by forwarding to a
//! [`QueueStream`]; the five operations that touch memory (copy, memset, write, read,
//! launch) go through this trait, whose provided methods are the forwarding. A port that
//! wants one of them done its own way (a memset its hardware does natively, a launch that
//! checks something first) writes that one method in the macro's `override` block and
//! keeps the rest:
//!
//! ```text
//! gpuport_queue::impl_queue_stream!(MyStream, MyBackend, 0, |_this, op| host_translator(op), override {
//!     fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
//!         // ... the device's own fill, or the queue's for what it cannot do:
//!         self.queue().memset(dst, offset, len, value, self.translator("memset"))
//!     }
//! });
//! ```

use gpuport_core::{Buffer, Copy2d, Kernel, KernelArg, LaunchConfig, Result};

use crate::stream::{QueueStream, Translate};

/// A stream built on a [`QueueStream`]: how to reach it and how the port translates its
/// buffers, and the data path over them (each provided method forwards; override one to
/// replace it).
pub trait QueueStreamPort {
    /// The queue-backed stream underneath.
    fn queue(&self) -> &QueueStream;

    /// The port's address resolution for `operation` (named in errors).
    fn translator(&self, operation: &'static str) -> impl Translate;

    /// `Stream::copy`.
    fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        self.queue().copy(src, src_offset, dst, dst_offset, len, self.translator("copy"))
    }

    /// `Stream::copy_2d`: every row in one queued operation.
    fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()> {
        self.queue().copy_2d(src, dst, copy, self.translator("copy_2d"))
    }

    /// `Stream::memset`.
    fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.queue().memset(dst, offset, len, value, self.translator("memset"))
    }

    /// `Stream::write`.
    fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        self.queue().write(src, dst, dst_offset, self.translator("write"))
    }

    /// `Stream::read`.
    fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.queue().read(src, src_offset, dst, self.translator("read"))
    }

    /// `Stream::launch`.
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        self.queue().launch(kernel, config, args, self.translator("launch"))
    }
}
