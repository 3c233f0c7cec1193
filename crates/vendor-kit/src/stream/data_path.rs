//! The `Stream` data path of a vendor stream, written once over [`VendorCalls`]: copies
//! (peer copies between two devices of the backend), memsets, blocking reads and writes,
//! event records and waits, kernel launches. Every range is checked against its buffer
//! before the driver sees it, and every buffer and kernel the queued work touches is
//! parked until that work has run.

use gpuport_core::{check_copy, check_copy_2d, Buffer, Copy2d, DeviceId, Kernel, KernelArg, LaunchConfig, Result};

use super::{refuse_in_callback, VendorCalls, VendorStream, MAX_PITCH};
use crate::event::VendorEvent;
use crate::kernel_args::{pack_kernel_args, PackedArgs};
use crate::module;
use crate::parking::Keep;

/// A host slice's address, as the driver's unified addressing takes it.
fn host_addr<T>(p: *const T) -> u64 {
    p as usize as u64
}

impl<V: VendorCalls> VendorStream<V> {
    /// `Stream::copy`: memory of any device of the backend or host-accessible memory, both
    /// ranges checked; between two devices of the backend, a peer copy.
    pub fn copy(&self, src: &Buffer, src_offset: usize, dst: &Buffer, dst_offset: usize, len: usize) -> Result<()> {
        check_copy(src, src_offset, dst, dst_offset, len)?;
        let s = self.reachable_addr(src, src_offset, len, "copy")?;
        let d = self.reachable_addr(dst, dst_offset, len, "copy")?;
        if len == 0 {
            return Ok(());
        }
        let raw = self.raw()?;
        // SAFETY: both ranges were checked against their buffers, which are parked below
        // until the copy has run; each buffer keeps its device open.
        unsafe { self.queue_copy(src, dst, d, s, len, raw) }?;
        self.park([Keep::Buffer(src.clone()), Keep::Buffer(dst.clone())])
    }

    /// `Stream::copy_2d`: the memory `copy` reaches, both spans checked; one driver call
    /// (a runtime without a 2D copy queues the rows one by one), except between two
    /// devices of the backend or with a pitch above [`MAX_PITCH`], which go row by row.
    pub fn copy_2d(&self, src: &Buffer, dst: &Buffer, copy: &Copy2d) -> Result<()> {
        check_copy_2d(src, dst, copy)?;
        let copy = copy.normalized();
        let s = self.reachable_addr(src, copy.src_offset, copy.src_span()?, "copy_2d")?;
        let d = self.reachable_addr(dst, copy.dst_offset, copy.dst_span()?, "copy_2d")?;
        if copy.is_empty() {
            return Ok(());
        }
        let raw = self.raw()?;
        let (sp, dp) = (copy.src_pitch, copy.dst_pitch);
        if self.peer(src, dst).is_some() || sp > MAX_PITCH || dp > MAX_PITCH {
            for row in 0..copy.height as u64 {
                let (rs, rd) = (s + row * sp as u64, d + row * dp as u64);
                // SAFETY: every row lies inside a span checked against its buffer; the
                // buffers are parked below.
                unsafe { self.queue_copy(src, dst, rd, rs, copy.width, raw) }?;
            }
        } else {
            // SAFETY: both spans were checked against their buffers (parked below), hold
            // every row, and the pitches are within what the kit promises the driver.
            unsafe { self.dev().memcpy_2d_async(d, dp, s, sp, copy.width, copy.height, raw) }?;
        }
        self.park([Keep::Buffer(src.clone()), Keep::Buffer(dst.clone())])
    }

    /// The two devices of a copy between devices of this backend (a peer copy, which
    /// names both), or `None`.
    fn peer(&self, src: &Buffer, dst: &Buffer) -> Option<(DeviceId, DeviceId)> {
        let (sd, dd) = (src.device(), dst.device());
        let kind = self.inner.dev.kind();
        let peer =
            sd.kind == kind && dd.kind == kind && sd != dd && !src.is_host_accessible() && !dst.is_host_accessible();
        peer.then_some((sd, dd))
    }

    /// Queues one copy of `len` bytes from `s` (in `src`) to `d` (in `dst`): a peer copy
    /// between two devices of the backend, else a unified-addressing copy.
    ///
    /// # Safety
    /// Both ranges are inside their buffers, which the caller parks after queuing.
    unsafe fn queue_copy(&self, src: &Buffer, dst: &Buffer, d: u64, s: u64, len: usize, raw: V::Stream) -> Result<()> {
        match self.peer(src, dst) {
            // SAFETY: forwarded; each buffer keeps its device open.
            Some((sd, dd)) => unsafe { self.dev().memcpy_peer_async(d, dd, s, sd, len, raw) },
            // SAFETY: forwarded.
            None => unsafe { self.dev().memcpy_async(d, s, len, raw) },
        }
    }

    /// `Stream::memset`: this backend's memory only.
    pub fn memset(&self, dst: &Buffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.own_memory(dst, "memset")?;
        let d = dst.range_addr(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let raw = self.raw()?;
        // SAFETY: the range was checked against a live allocation of this backend, parked
        // below until the memset has run.
        unsafe { self.dev().memset_async(d, value, len, raw) }?;
        self.park([Keep::Buffer(dst.clone())])
    }

    /// `Stream::write`: copies `src` into the buffer and waits for it (the slice is only
    /// borrowed). Refused inside a host callback of this backend.
    pub fn write(&self, src: &[u8], dst: &Buffer, dst_offset: usize) -> Result<()> {
        refuse_in_callback(self.inner.dev.kind(), "a blocking Stream::write")?;
        let d = self.reachable_addr(dst, dst_offset, src.len(), "write")?;
        if src.is_empty() {
            return Ok(());
        }
        let raw = self.raw()?;
        // SAFETY: `src` stays borrowed until the synchronize below has seen the copy finish;
        // the destination range was checked.
        unsafe { self.dev().memcpy_async(d, host_addr(src.as_ptr()), src.len(), raw) }?;
        self.synchronize()
    }

    /// `Stream::read`: copies from the buffer into `dst` and waits for it. Refused inside a
    /// host callback of this backend.
    pub fn read(&self, src: &Buffer, src_offset: usize, dst: &mut [u8]) -> Result<()> {
        refuse_in_callback(self.inner.dev.kind(), "a blocking Stream::read")?;
        let s = self.reachable_addr(src, src_offset, dst.len(), "read")?;
        if dst.is_empty() {
            return Ok(());
        }
        let raw = self.raw()?;
        // SAFETY: `dst` stays borrowed until the synchronize below has seen the copy finish;
        // the source range was checked.
        unsafe { self.dev().memcpy_async(host_addr(dst.as_mut_ptr()), s, dst.len(), raw) }?;
        self.synchronize()
    }

    /// `Stream::record`.
    pub fn record(&self, event: &VendorEvent<V>) -> Result<()> {
        crate::same_backend("record", self.device_id(), event.device_id())?;
        let raw = self.raw()?;
        self.dev().event_record(event.raw(), raw)
    }

    /// `Stream::wait`.
    pub fn wait(&self, event: &VendorEvent<V>) -> Result<()> {
        crate::same_backend("wait", self.device_id(), event.device_id())?;
        let raw = self.raw()?;
        self.dev().stream_wait_event(raw, event.raw())
    }

    /// `Stream::launch`: a kernel of this device (another device's or backend's is
    /// `BackendMismatch`), the geometry checked, the arguments packed (this backend's
    /// memory only); the buffers and the kernel are parked until the launch has run.
    pub fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let function = module::function::<V>(kernel, self.device_id())?;
        config.validate()?;
        let PackedArgs { mut values, mut keep } = pack_kernel_args(args, |b| self.own_memory(b, "launch"))?;
        keep.push(Keep::Kernel(kernel.clone()));
        let raw = self.raw()?;
        // SAFETY: the arguments are packed from checked buffers and scalars; the kernel
        // keeps its module loaded and is parked below until the launch has run.
        unsafe { self.dev().launch_kernel(function, config, raw, &mut values) }?;
        self.park(keep)
    }
}

/// Implements `gpuport_core::Stream` for a newtype over [`VendorStream`]
/// (`struct MyStream(VendorStream<MyDeviceCtx>)`) whose backend's event type is a newtype
/// over [`VendorEvent`]: every method forwards to the vendor kit, which makes the checked
/// calls of [`VendorCalls`]. `impl_vendor_stream!(MyStream, MyBackend)`.
#[macro_export]
macro_rules! impl_vendor_stream {
    ($stream:ty, $backend:ty) => {
        impl $crate::__core::Stream for $stream {
            type Backend = $backend;

            fn device_id(&self) -> $crate::__core::DeviceId {
                self.0.device_id()
            }
            fn ownership(&self) -> $crate::__core::Ownership {
                self.0.ownership()
            }
            fn raw_handle(&self) -> usize {
                self.0.raw_value()
            }
            fn flags(&self) -> $crate::__core::StreamFlags {
                self.0.flags()
            }
            fn priority(&self) -> i32 {
                self.0.priority()
            }
            fn copy(
                &self,
                src: &$crate::__core::Buffer,
                src_offset: usize,
                dst: &$crate::__core::Buffer,
                dst_offset: usize,
                len: usize,
            ) -> $crate::__core::Result<()> {
                self.0.copy(src, src_offset, dst, dst_offset, len)
            }
            fn copy_2d(
                &self,
                src: &$crate::__core::Buffer,
                dst: &$crate::__core::Buffer,
                copy: &$crate::__core::Copy2d,
            ) -> $crate::__core::Result<()> {
                self.0.copy_2d(src, dst, copy)
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
            fn write(&self, src: &[u8], dst: &$crate::__core::Buffer, dst_offset: usize) -> $crate::__core::Result<()> {
                self.0.write(src, dst, dst_offset)
            }
            fn read(
                &self,
                src: &$crate::__core::Buffer,
                src_offset: usize,
                dst: &mut [u8],
            ) -> $crate::__core::Result<()> {
                self.0.read(src, src_offset, dst)
            }
            fn record(&self, event: &<$backend as $crate::__core::Backend>::Event) -> $crate::__core::Result<()> {
                self.0.record(&event.0)
            }
            fn wait(&self, event: &<$backend as $crate::__core::Backend>::Event) -> $crate::__core::Result<()> {
                self.0.wait(&event.0)
            }
            fn host_callback(&self, f: $crate::__core::HostCallback) -> $crate::__core::Result<()> {
                self.0.host_callback(f)
            }
            fn launch(
                &self,
                kernel: &$crate::__core::Kernel,
                config: &$crate::__core::LaunchConfig,
                args: &[$crate::__core::KernelArg],
            ) -> $crate::__core::Result<()> {
                self.0.launch(kernel, config, args)
            }
            fn query(&self) -> $crate::__core::Result<bool> {
                self.0.query()
            }
            fn synchronize(&self) -> $crate::__core::Result<()> {
                self.0.synchronize()
            }
        }
    };
}
