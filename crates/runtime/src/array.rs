//! [`Array`]: a shared storage (an allocation and its pending work) plus byte offset,
//! dtype, layout, device and read-only flag. Views and clones share the storage, so they
//! share its pending work.

use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::Arc;

use gpuport_core::{
    as_bytes, Buffer, BufferDesc, DType, DefaultStream, DeviceId, Element, Error, EventFlags, Layout, Result,
};

use crate::dynamic::{AnyDevice, AnyStream};
use crate::foreign::{check_span, ForeignElements};
use crate::fresh_memory::{zeroed_bytes, zeroed_elements};
use crate::host_copy::{host_copy, host_zeroed};
use crate::pending::{Access, PendingWork};
use crate::strided::{self, Side};

/// An allocation and the work pending on it, shared by every view.
struct Storage {
    buffer: Buffer,
    pending: PendingWork,
}

/// An n-dimensional array on any device.
///
/// Work queued through an array is ordered by the allocation's pending work (see
/// [`Array::wait_pending`] and [`Array::record_access`]): `Array`'s own methods, the copy
/// engine and the interchange layers use it, so a view taken before work was queued on its
/// parent still orders after that work.
#[derive(Clone)]
pub struct Array {
    storage: Arc<Storage>,
    offset: usize,
    dtype: DType,
    layout: Layout,
    device: AnyDevice,
    read_only: bool,
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array")
            .field("device", &self.device.id())
            .field("dtype", &self.dtype.to_string())
            .field("shape", &self.layout.shape())
            .field("strides", &self.layout.strides())
            .field("offset", &self.offset)
            .field("read_only", &self.read_only)
            .finish()
    }
}

fn nbytes(layout: &Layout, dtype: DType) -> Result<usize> {
    layout.numel().checked_mul(dtype.itemsize()?).ok_or_else(|| Error::invalid_layout("the byte size overflows"))
}

impl Array {
    /// An uninitialised-content (backend-defined) C-contiguous array on `device`.
    pub fn empty(device: &AnyDevice, shape: &[usize], dtype: DType) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        let buffer = device.alloc(nbytes(&layout, dtype)?)?;
        Self::from_buffer(device, buffer, 0, dtype, layout)
    }

    /// A zero-filled C-contiguous array on `device`.
    pub fn zeros(device: &AnyDevice, shape: &[usize], dtype: DType) -> Result<Self> {
        let a = Self::empty(device, shape, dtype)?;
        device.memset(a.buffer(), 0, a.buffer().len(), 0)?;
        Ok(a)
    }

    /// A C-contiguous array on `device` holding `data` (row-major for `shape`), uploaded
    /// on the device's legacy default stream.
    pub fn from_slice<T: Element>(device: &AnyDevice, data: &[T], shape: &[usize]) -> Result<Self> {
        Self::from_slice_on(device, data, shape, &device.default_stream(DefaultStream::Legacy)?)
    }

    /// [`Array::from_slice`], uploaded on `stream` (a stream of `device`): the upload is
    /// ordered after the work already queued there and has completed on return.
    pub fn from_slice_on<T: Element>(
        device: &AnyDevice,
        data: &[T],
        shape: &[usize],
        stream: &AnyStream,
    ) -> Result<Self> {
        let layout = Layout::contiguous(shape)?;
        if layout.numel() != data.len() {
            return Err(Error::invalid_argument(format!(
                "{} values for shape {shape:?} ({} elements)",
                data.len(),
                layout.numel()
            )));
        }
        let a = Self::empty(device, shape, T::DTYPE)?;
        stream.write(as_bytes(data), a.buffer(), 0)?;
        Ok(a)
    }

    /// An array over an existing buffer, with a storage (and so pending work) of its own:
    /// make views of one array rather than two arrays over one buffer. The elements must
    /// fit inside it.
    pub fn from_buffer(
        device: &AnyDevice,
        buffer: Buffer,
        offset: usize,
        dtype: DType,
        layout: Layout,
    ) -> Result<Self> {
        if buffer.device() != device.id() {
            return Err(Error::invalid_argument(format!(
                "buffer of {} given for an array on {}",
                buffer.device(),
                device.id()
            )));
        }
        layout.check_fits(offset, dtype.itemsize()?, buffer.len())?;
        Ok(Self::over(device.clone(), buffer, offset, dtype, layout))
    }

    /// An array over `buffer`, whose device is `device`'s and which holds every element
    /// (the callers' checks).
    fn over(device: AnyDevice, buffer: Buffer, offset: usize, dtype: DType, layout: Layout) -> Self {
        let storage = Arc::new(Storage { buffer, pending: PendingWork::default() });
        Array { storage, offset, dtype, layout, device, read_only: false }
    }

    /// An array over memory someone else owns (an interchange import): the buffer spans
    /// exactly the bytes `layout` reaches from element 0 — below it too, for negative
    /// strides — with overflow checked, and holds `keep` (what keeps the memory alive, in
    /// the buffer's own allocation) until the last view drops. An array with no elements
    /// describes no memory. Two heap allocations: the buffer's and the array's storage.
    /// `device` is taken, not borrowed: the array keeps that handle, so an import that
    /// resolved the device for itself hands it over without counting it twice.
    ///
    /// The span is checked against what `device` knows of the memory first (one
    /// `pointer_attributes` call, unless `at.attributes` carries the answer): device memory
    /// the device does not own, or a span reaching outside the allocation it lies in, is an
    /// [`Error::Interchange`] naming both (the `foreign` module's documentation says what
    /// is checked where the device knows no allocation). On any error `keep` is dropped
    /// before this returns.
    ///
    /// # Safety
    /// Those bytes are live memory of `at.memory`'s kind on `device` and stay so while
    /// `keep` lives (the check above refuses the claims the device can disprove; it cannot
    /// prove the rest).
    pub unsafe fn from_foreign<K: Send + Sync + 'static>(
        device: AnyDevice,
        at: ForeignElements,
        dtype: DType,
        layout: Layout,
        keep: K,
    ) -> Result<Self> {
        let span = layout.span(dtype.itemsize()?)?;
        let (start, len, element0) = if layout.numel() == 0 {
            (0, 0, 0)
        } else {
            let start = at
                .element0
                .checked_add_signed(span.start as i64)
                .ok_or_else(|| Error::invalid_layout("the elements' address range overflows"))?;
            (start, span.len(), span.start.unsigned_abs())
        };
        if len > 0 {
            check_span(&device, &at, start, len)?;
        }
        let desc = BufferDesc {
            addr: start,
            len,
            device: device.id(),
            memory: at.memory,
            host_accessible: at.host_accessible,
        };
        // The pointer to the lowest byte, derived from the producer's (element 0 less the
        // bytes below it), where there is one and the host may use it.
        let base = at
            .pointer
            .filter(|_| at.host_accessible && len > 0)
            .and_then(|p| NonNull::new(p.as_ptr().wrapping_sub(element0)));
        // SAFETY: `desc` covers exactly the bytes the layout reaches, which the caller
        // promises live while `keep` (held by the buffer) lives; `base`, where given,
        // points at the first of them (checked against `desc`).
        let buffer = unsafe {
            match base {
                Some(base) => Buffer::from_borrowed_host_owned_by(base, desc, keep),
                None => Buffer::from_borrowed_owned_by(desc, keep),
            }
        }?;
        // The buffer was cut to the layout's span from element 0: the elements fit it.
        Ok(Self::over(device, buffer, element0, dtype, layout))
    }

    /// The allocation.
    #[inline]
    pub fn buffer(&self) -> &Buffer {
        &self.storage.buffer
    }

    /// True when both arrays are views of one storage (and so share pending work).
    pub fn shares_storage_with(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }
    /// Byte offset of element `[0, …, 0]` in the buffer.
    #[inline]
    pub fn byte_offset(&self) -> usize {
        self.offset
    }
    /// The buffer and element 0's offset, as a strided copy reads or writes them.
    pub(crate) fn side(&self) -> Side<'_> {
        Side { buffer: self.buffer(), offset: self.offset }
    }
    /// Address of element `[0, …, 0]`.
    #[inline]
    pub fn data_addr(&self) -> u64 {
        self.buffer().addr() + self.offset as u64
    }
    /// Element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Shape and element strides.
    #[inline]
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Extents.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }
    /// Element strides.
    #[inline]
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }
    /// The device handle.
    #[inline]
    pub fn device(&self) -> &AnyDevice {
        &self.device
    }
    /// The device id.
    #[inline]
    pub fn device_id(&self) -> DeviceId {
        self.device.id()
    }
    /// True when writes through this array are refused.
    #[inline]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    /// Number of elements.
    #[inline]
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    /// Bytes of the elements (numel × itemsize).
    pub fn nbytes(&self) -> usize {
        // Checked at construction: the layout fits its buffer.
        self.layout.numel() * self.dtype.itemsize().unwrap_or(0)
    }
    /// Makes `stream` wait for the allocation's pending work that an `access` conflicts
    /// with: earlier writes for a read; earlier writes and reads for a write. On one backend
    /// this is an event wait on `stream`; across backends a host callback on `stream` waits
    /// (blocking that stream's worker, never the calling thread). Call it before queuing
    /// work that touches the array on `stream`, and [`Array::record_access`] after.
    pub fn wait_pending(&self, stream: &AnyStream, access: Access) -> Result<()> {
        self.storage.pending.wait(stream, access)
    }

    /// Notes that work just queued on `stream` (a stream of this array's device) read or
    /// wrote the array, so later users of any view order after it. Work recorded on two
    /// streams without a wait between them is kept as two pending writes; a reader then
    /// waits for both.
    pub fn record_access(&self, stream: &AnyStream, access: Access) -> Result<()> {
        self.storage.pending.record(&self.device, stream, access)
    }

    /// [`Array::record_access`] for a stream of another device (`device`), such as a peer
    /// copy's stream on the destination device reading this array.
    pub fn record_access_on(&self, device: &AnyDevice, stream: &AnyStream, access: Access) -> Result<()> {
        self.storage.pending.record(device, stream, access)
    }

    /// Blocks until all pending work on the allocation has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.storage.pending.synchronize()
    }

    /// True while some recorded work on the allocation has not completed.
    pub fn has_pending_work(&self) -> Result<bool> {
        self.storage.pending.is_pending()
    }

    fn default_stream(&self) -> Result<AnyStream> {
        self.device.default_stream(DefaultStream::Legacy)
    }

    fn view(&self, layout: Layout, element_offset: isize) -> Result<Array> {
        let item = self.dtype.itemsize()? as isize;
        let offset = element_offset
            .checked_mul(item)
            .and_then(|b| (self.offset as isize).checked_add(b))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| Error::invalid_layout("view offset out of range"))?;
        layout.check_fits(offset, item as usize, self.buffer().len())?;
        Ok(Array { layout, offset, ..self.clone() })
    }

    /// A strided slice along `axis`, as Python's `start:stop:step` with `start` given:
    /// elements `start, start+step, …` before `stop`; `stop = None` runs to the end in the
    /// step's direction, so `slice(axis, 2, None, -1)` is `2::-1` (elements 2, 1, 0). For
    /// Python's `::-1` — start omitted, which for a negative step means the last element —
    /// use [`Array::reverse`]. See [`Layout::slice`].
    pub fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> Result<Array> {
        let (layout, first) = self.layout.slice(axis, start, stop, step)?;
        self.view(layout, first)
    }

    /// The view with `axis` reversed: Python's `a[..., ::-1, ...]` (a view, no copy).
    pub fn reverse(&self, axis: usize) -> Result<Array> {
        let extent = *self.shape().get(axis).ok_or_else(|| {
            Error::invalid_argument(format!("axis {axis} out of range for {} dims", self.shape().len()))
        })?;
        match extent {
            0 => Ok(self.clone()),
            n => self.slice(axis, n - 1, None, -1),
        }
    }

    /// The view at `index` along `axis`, with that axis removed (NumPy's `a[i]`).
    pub fn index_axis(&self, axis: usize, index: usize) -> Result<Array> {
        let (layout, first) = self.layout.index_axis(axis, index)?;
        self.view(layout, first)
    }

    /// `a.range(axis, 2..5)`, `a.range(axis, ..3)`, `a.range(axis, 4..)`: a slice with
    /// step 1 along `axis`, written as a Rust range.
    pub fn range(&self, axis: usize, range: impl RangeBounds<usize>) -> Result<Array> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1).ok_or_else(|| Error::invalid_argument("range start overflows"))?,
            Bound::Unbounded => 0,
        };
        let stop = match range.end_bound() {
            Bound::Included(&e) => {
                Some(e.checked_add(1).ok_or_else(|| Error::invalid_argument("range end overflows"))?)
            }
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => None,
        };
        self.slice(axis, start, stop, 1)
    }

    /// The array with its axes reordered.
    pub fn permute(&self, axes: &[usize]) -> Result<Array> {
        self.view(self.layout.permute(axes)?, 0)
    }

    /// The same elements with another shape; the array must be C-contiguous.
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let layout = Layout::contiguous(shape)?;
        if layout.numel() != self.numel() {
            return Err(Error::invalid_argument(format!("cannot reshape {} elements into {shape:?}", self.numel())));
        }
        if !self.layout.is_c_contiguous() {
            return Err(Error::invalid_layout("reshape needs a C-contiguous array"));
        }
        self.view(layout, 0)
    }

    /// A read-only view.
    pub fn to_read_only(&self) -> Array {
        self.clone().into_read_only()
    }

    /// This array, read-only (what [`Array::to_read_only`] gives, without a second handle
    /// to the storage and device).
    pub fn into_read_only(self) -> Array {
        Array { read_only: true, ..self }
    }

    /// Copies the elements to the host in row-major order (gathering strided layouts),
    /// after pending writes, on the device's legacy default stream.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.to_vec_on(&self.default_stream()?)
    }

    /// [`Array::to_vec`] on `stream` (a stream of the array's device), ordered after the
    /// array's pending writes and the stream's own work.
    pub fn to_vec_on<T: Element>(&self, stream: &AnyStream) -> Result<Vec<T>> {
        self.check_dtype::<T>()?;
        if self.layout.is_c_contiguous() {
            // Read straight into the typed vector: no byte buffer, no element-wise pass.
            self.wait_pending(stream, Access::Read)?;
            let mut out = zeroed_elements::<T>(self.numel());
            let bytes = gpuport_core::as_bytes_mut(&mut out);
            if !bytes.is_empty() {
                stream.read(self.buffer(), self.offset, bytes)?;
            }
            return Ok(out);
        }
        let bytes = self.to_bytes_on(stream)?;
        Ok(bytes
            .chunks_exact(std::mem::size_of::<T>())
            // SAFETY: each chunk holds exactly one `T`, which is plain old data; read unaligned.
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
            .collect())
    }

    /// The elements' bytes in row-major order (gathering strided layouts), after pending
    /// writes.
    ///
    /// A strided view of a CUDA or ROCm device's memory whose runs are short is packed on
    /// the device by one launch of a copy kernel (see
    /// [`strided_copy_kernels`](crate::strided_copy_kernels)) into a stream-ordered
    /// scratch buffer, read in one piece. Otherwise a strided view is read whole — one read of its span (the bytes from its first element
    /// to its last), the elements picked out on the host — unless the bytes between its
    /// elements outweigh the cost of copying the elements alone: a column of a large
    /// matrix is then one 2D copy of its elements (its runs joined as the copy engine joins
    /// them), where reading the span would bring the whole matrix over. Device memory the
    /// host cannot reach is packed on the device — the 2D copies fill a scratch buffer
    /// allocated on `stream`, which is then read in one piece — because a driver's 2D copy
    /// into pageable host memory goes row by row through its staging buffers: on an H100,
    /// every 8th `f32` of 64 MiB took 67 ms that way and 1.7 ms packed on the device.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.to_bytes_on(&self.default_stream()?)
    }

    /// [`Array::to_bytes`] on `stream` (a stream of the array's device).
    pub fn to_bytes_on(&self, stream: &AnyStream) -> Result<Vec<u8>> {
        self.wait_pending(stream, Access::Read)?;
        if self.layout.is_c_contiguous() {
            // The elements are the span, in order: read them straight into the result.
            let mut out = zeroed_bytes(self.nbytes());
            if !out.is_empty() {
                stream.read(self.buffer(), self.offset, &mut out)?;
            }
            return Ok(out);
        }
        let item = self.dtype.itemsize()?;
        if let Some(out) = self.pack_with_kernel(stream, item)? {
            return Ok(out);
        }
        if strided::gather_beats_span(&self.layout, item, self.layout.span(item)?.len()) {
            if let Some(plan) = strided::plan(&self.layout, &Layout::contiguous(self.shape())?, item)? {
                if !self.buffer().is_host_accessible() {
                    return self.pack_on_device(stream, &plan);
                }
                return self.gather_on(stream, &plan);
            }
        }
        let (span_start, raw) = self.read_span_on(stream)?;
        let mut out = Vec::with_capacity(self.nbytes());
        // The runs come in row-major order: each one extends the packed bytes.
        strided::for_each_run(&self.layout, item, |_, at, len| {
            let at = (at - span_start) as usize;
            out.extend_from_slice(&raw[at..at + len]);
        })?;
        Ok(out)
    }

    /// Overwrites the elements from row-major bytes, scattering into strided layouts (bytes
    /// of the span that are not elements of this view are preserved). Ordered after pending
    /// reads and writes; the write has completed on return.
    ///
    /// A strided view of a CUDA or ROCm device's memory whose runs are short is written in
    /// one piece into a scratch buffer of the device and put in place there by one launch
    /// of a copy kernel (see [`strided_copy_kernels`](crate::strided_copy_kernels)).
    /// Otherwise:
    ///
    /// A view whose elements fill their span — every byte from its first element to its
    /// last is one of its elements: a transposed matrix, reversed rows — is arranged on the
    /// host and written as one write of that span; nothing is read. Another strided view
    /// is written as the copy engine writes one: its runs of contiguous
    /// elements joined into 2D copies (a sliced matrix is one `cuMemcpy2DAsync`), from a
    /// host copy of `bytes` — or, for device memory the host cannot reach, from a scratch
    /// buffer of the device that `bytes` is first written into in one piece (a driver's 2D
    /// copy from pageable host memory goes row by row); the bytes between the elements are
    /// not touched. A view whose
    /// elements are thousands of short, unevenly spaced runs is written instead as one
    /// read-modify-write of its span (the bytes from its first element to its last): one
    /// read and one write of the device, not one per run. The span's other bytes are then
    /// written back as they were read, so another thread's write to them between the two —
    /// through another view of the allocation, or work it queues meanwhile — is lost:
    /// order writes to views of one allocation from several threads, as for any
    /// read-modify-write.
    pub fn copy_from_bytes(&self, bytes: &[u8]) -> Result<()> {
        self.copy_from_bytes_on(bytes, &self.default_stream()?)
    }

    /// [`Array::copy_from_bytes`] on `stream` (a stream of the array's device).
    pub fn copy_from_bytes_on(&self, bytes: &[u8], stream: &AnyStream) -> Result<()> {
        if self.read_only {
            return Err(Error::invalid_argument("the array is read-only"));
        }
        if bytes.len() != self.nbytes() {
            return Err(Error::invalid_argument(format!(
                "{} bytes for an array of {} bytes",
                bytes.len(),
                self.nbytes()
            )));
        }
        self.wait_pending(stream, Access::Write)?;
        if self.layout.is_c_contiguous() {
            return stream.write(bytes, self.buffer(), self.offset);
        }
        let item = self.dtype.itemsize()?;
        if self.scatter_with_kernel(bytes, stream, item)? {
            return self.wait_queued(stream);
        }
        if self.layout.is_dense() {
            // Every byte of the span is an element (a transposed matrix, reversed rows):
            // arranged on the host, the span is written whole, and nothing is read.
            let span = self.layout.span(item)?;
            let mut raw = vec![0u8; span.len()];
            self.scatter(bytes, &mut raw, span.start)?;
            return stream.write(&raw, self.buffer(), (self.offset as isize + span.start) as usize);
        }
        if let Some(plan) = strided::plan(&Layout::contiguous(self.shape())?, &self.layout, item)? {
            let packed = self.packed_source(bytes, stream)?;
            strided::queue(stream, Side { buffer: &packed, offset: 0 }, self.side(), &plan)?;
            return self.wait_queued(stream);
        }
        let (span_start, mut raw) = self.read_span_on(stream)?;
        self.scatter(bytes, &mut raw, span_start)?;
        stream.write(&raw, self.buffer(), (self.offset as isize + span_start) as usize)
    }

    /// Puts `bytes` (the elements packed row-major) where the view has them in `span`, a
    /// host copy of the span that starts `span_start` bytes from element 0.
    fn scatter(&self, bytes: &[u8], span: &mut [u8], span_start: isize) -> Result<()> {
        strided::for_each_run(&self.layout, self.dtype.itemsize()?, |packed, at, len| {
            let at = (at - span_start) as usize;
            span[at..at + len].copy_from_slice(&bytes[packed..packed + len]);
        })
    }

    /// [`Array::to_bytes_on`] for a strided view of a GPU's memory with a copy kernel: the
    /// kernel packs the elements into a scratch buffer of the device, allocated on
    /// `stream`, and one read brings them over. `None` where the device has no kernel for
    /// this view, or no stream-ordered scratch memory.
    fn pack_with_kernel(&self, stream: &AnyStream, item: usize) -> Result<Option<Vec<u8>>> {
        let packed_layout = Layout::contiguous(self.shape())?;
        let buffers = [self.buffer()];
        let Some(copy) = strided::kernel_plan(&self.device, &buffers, &self.layout, &packed_layout, item) else {
            return Ok(None);
        };
        let len = self.nbytes();
        let Some(packed) = self.scratch_on(len, stream)? else { return Ok(None) };
        copy.queue(stream, self.side(), Side { buffer: &packed, offset: 0 })?;
        let mut out = zeroed_bytes(len);
        stream.read(&packed, 0, &mut out)?;
        Ok(Some(out))
    }

    /// [`Array::copy_from_bytes_on`] for a strided view of a GPU's memory with a copy
    /// kernel: `bytes` written in one piece into a scratch buffer of the device, and the
    /// kernel puts each element in its place (the bytes between them untouched). `false`
    /// (nothing done) where the device has no kernel for this view, or no stream-ordered
    /// scratch memory; else the scatter is queued on `stream`.
    fn scatter_with_kernel(&self, bytes: &[u8], stream: &AnyStream, item: usize) -> Result<bool> {
        let packed_layout = Layout::contiguous(self.shape())?;
        let buffers = [self.buffer()];
        let Some(copy) = strided::kernel_plan(&self.device, &buffers, &packed_layout, &self.layout, item) else {
            return Ok(false);
        };
        let Some(packed) = self.scratch_on(bytes.len(), stream)? else { return Ok(false) };
        stream.write(bytes, &packed, 0)?;
        copy.queue(stream, Side { buffer: &packed, offset: 0 }, self.side())?;
        Ok(true)
    }

    /// [`Array::to_bytes_on`] for a view whose elements are a small part of their span (a
    /// column of a matrix): the elements alone are copied, in the blocks of `plan`, into a
    /// host buffer the queued work keeps alive, then out of it once that work has run.
    fn gather_on(&self, stream: &AnyStream, plan: &strided::Plan) -> Result<Vec<u8>> {
        let len = self.nbytes();
        let host = host_zeroed(len)?;
        strided::queue(stream, self.side(), Side { buffer: &host, offset: 0 }, plan)?;
        self.wait_queued(stream)?;
        let at = host.host_ptr(0, len)?;
        // SAFETY: `host` owns `len` initialised bytes at `at` and lives to the end of this
        // function; the copies into them have run (waited for above), and no queued work
        // writes them any more.
        Ok(unsafe { std::slice::from_raw_parts(at, len) }.to_vec())
    }

    /// [`Array::gather_on`] for device memory the host cannot reach: the blocks of `plan`
    /// pack the elements into a scratch buffer of the device, allocated on `stream` (so
    /// freed in its order once the read is done), and one read brings them over.
    fn pack_on_device(&self, stream: &AnyStream, plan: &strided::Plan) -> Result<Vec<u8>> {
        let len = self.nbytes();
        let Some(packed) = self.scratch_on(len, stream)? else { return self.gather_on(stream, plan) };
        strided::queue(stream, self.side(), Side { buffer: &packed, offset: 0 }, plan)?;
        let mut out = zeroed_bytes(len);
        stream.read(&packed, 0, &mut out)?;
        Ok(out)
    }

    /// `bytes` where the 2D copies of a strided write read them from: for device memory
    /// the host cannot reach, a scratch buffer of the device that they are written into in
    /// one piece (as [`Array::pack_on_device`] reads); else a host copy (`bytes` is only
    /// borrowed, the queued work keeps its copy alive itself).
    fn packed_source(&self, bytes: &[u8], stream: &AnyStream) -> Result<Buffer> {
        if !self.buffer().is_host_accessible() {
            if let Some(packed) = self.scratch_on(bytes.len(), stream)? {
                stream.write(bytes, &packed, 0)?;
                return Ok(packed);
            }
        }
        host_copy(bytes)
    }

    /// A stream-ordered scratch buffer of `len` bytes on the array's device, or `None`
    /// where the device has none (`alloc_async` is `Unsupported`: a CUDA driver before
    /// 11.2, a device without memory pools), whose callers then go through host memory.
    /// Stream-ordered, because a synchronous free may wait for all of the device's work.
    fn scratch_on(&self, len: usize, stream: &AnyStream) -> Result<Option<Buffer>> {
        match self.device.alloc_async(len, stream) {
            Ok(buffer) => Ok(Some(buffer)),
            Err(Error::Unsupported { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits for the work queued on `stream` so far (and no later work of other threads).
    fn wait_queued(&self, stream: &AnyStream) -> Result<()> {
        let done = self.device.create_event(EventFlags::DISABLE_TIMING)?;
        stream.record(&done)?;
        done.synchronize()
    }

    /// Reads the span on `stream` (already ordered after pending work); the read has
    /// completed on return. Returns the span's start relative to element 0.
    fn read_span_on(&self, stream: &AnyStream) -> Result<(isize, Vec<u8>)> {
        let span = self.layout.span(self.dtype.itemsize()?)?;
        let mut raw = zeroed_bytes(span.len());
        if !raw.is_empty() {
            let start = (self.offset as isize + span.start) as usize;
            stream.read(self.buffer(), start, &mut raw)?;
        }
        Ok((span.start, raw))
    }

    /// Overwrites the elements from `data` (row-major), scattering into strided layouts.
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.copy_from_slice_on(data, &self.default_stream()?)
    }

    /// [`Array::copy_from_slice`] on `stream` (a stream of the array's device).
    pub fn copy_from_slice_on<T: Element>(&self, data: &[T], stream: &AnyStream) -> Result<()> {
        self.check_dtype::<T>()?;
        self.copy_from_bytes_on(as_bytes(data), stream)
    }

    fn check_dtype<T: Element>(&self) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid_argument(format!("array holds {} but {} was asked for", self.dtype, T::DTYPE)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;

    fn host() -> AnyDevice {
        Runtime::discover_with(&Default::default()).device("host").unwrap()
    }

    /// The host, and a device whose memory the host cannot reach (the ext device): the
    /// strided paths differ between the two.
    fn both_memories() -> [AnyDevice; 2] {
        static EXT: std::sync::Once = std::sync::Once::new();
        EXT.call_once(|| {
            let ext = <gpuport_ext::ExtBackend as gpuport_core::Backend>::load(&Default::default())
                .expect("the ext device loads");
            Runtime::register_plugin(ext).expect("ext registers once");
        });
        let rt = Runtime::discover_with(&Default::default());
        let ext = rt.device("ext:0").unwrap();
        assert!(!ext.alloc(1).unwrap().is_host_accessible(), "the ext device's memory is its own");
        [rt.device("host").unwrap(), ext]
    }

    #[test]
    fn round_trip_and_views() {
        let dev = host();
        let data: Vec<i32> = (0..20).collect();
        let a = Array::from_slice(&dev, &data, &[4, 5]).unwrap();
        assert_eq!(a.to_vec::<i32>().unwrap(), data);
        let t = a.permute(&[1, 0]).unwrap();
        assert_eq!(t.shape(), &[5, 4]);
        assert_eq!(&t.to_vec::<i32>().unwrap()[..4], &[0, 5, 10, 15]);
        let rev = a.slice(1, 4, Some(0), -2).unwrap();
        assert_eq!(rev.to_vec::<i32>().unwrap(), vec![4, 2, 9, 7, 14, 12, 19, 17]);
        assert!(rev.buffer().same_allocation(a.buffer()));
        let r = a.reshape(&[2, 10]).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), data);
        assert!(t.reshape(&[20]).is_err());
        let row = a.index_axis(0, 2).unwrap();
        assert_eq!(row.to_vec::<i32>().unwrap(), vec![10, 11, 12, 13, 14]);
        assert_eq!(a.index_axis(1, 4).unwrap().to_vec::<i32>().unwrap(), vec![4, 9, 14, 19]);
        assert_eq!(row.index_axis(0, 3).unwrap().to_vec::<i32>().unwrap(), vec![13], "0-d");
        assert!(a.index_axis(0, 4).is_err() && a.index_axis(2, 0).is_err());
        assert!(a.to_vec::<f32>().is_err());
        assert!(Array::from_slice(&dev, &data, &[3, 5]).is_err());
    }

    #[test]
    fn writes_respect_read_only_and_layout() {
        let dev = host();
        let a = Array::zeros(&dev, &[3], DType::F64).unwrap();
        a.copy_from_slice(&[1.0f64, 2.0, 3.0]).unwrap();
        assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
        let ro = a.to_read_only();
        assert!(ro.copy_from_slice(&[0.0f64; 3]).is_err());
        assert!(ro.shares_storage_with(&a) && !a.is_read_only());
        // The same view without a second handle: the original is consumed.
        let ro = a.clone().into_read_only();
        assert!(ro.is_read_only() && ro.shares_storage_with(&a));
        assert!(ro.copy_from_slice(&[0.0f64; 3]).is_err());
        assert_eq!(ro.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
        let rev = a.slice(0, 2, None, -2).unwrap();
        rev.copy_from_slice(&[30.0f64, 10.0]).unwrap();
        assert_eq!(a.to_vec::<f64>().unwrap(), vec![10.0, 2.0, 30.0], "scatter keeps the gap");
        let empty = Array::zeros(&dev, &[0, 4], DType::F32).unwrap();
        assert_eq!(empty.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    }

    /// Writes `n` distinct bytes through `view` of `base`'s bytes and checks them against
    /// a model: each element where the view puts it, every other byte as it was.
    fn write_through(base: &Array, view: &Array, old: &[u8]) {
        let n = view.numel();
        let new: Vec<u8> = (0..n).map(|i| (i % 251) as u8 + 1).collect();
        view.copy_from_bytes(&new).unwrap();
        let mut model = old.to_vec();
        let mut next = new.iter();
        view.layout().for_each_offset(|o| model[(view.byte_offset() as isize + o) as usize] = *next.next().unwrap());
        assert_eq!(base.to_bytes().unwrap(), model);
    }

    #[test]
    fn strided_writes_in_blocks_and_through_the_span() {
        for dev in both_memories() {
            strided_writes_on(&dev);
        }
    }

    fn strided_writes_on(dev: &AnyDevice) {
        // Dense views of the middle rows (each written as one write of its span): the
        // rows transposed, and the rows backwards; the rows around them untouched.
        let old: Vec<u8> = (0..8 * 6).map(|i| (i % 9) as u8 + 50).collect();
        let base = Array::from_slice(dev, &old, &[8, 6]).unwrap();
        let middle = base.slice(0, 2, Some(6), 1).unwrap();
        write_through(&base, &middle.permute(&[1, 0]).unwrap(), &old);
        write_through(&base, &base.slice(0, 5, Some(1), -1).unwrap(), &old);
        let cube = Array::from_slice(dev, &old, &[2, 4, 6]).unwrap();
        write_through(&cube, &cube.permute(&[2, 0, 1]).unwrap().slice(1, 1, None, -1).unwrap(), &old);
        // A transposed matrix's columns 1..3: evenly spaced runs, written as 2D blocks.
        let old: Vec<u8> = (0..64 * 8).map(|i| (i % 7) as u8 + 100).collect();
        let base = Array::from_slice(dev, &old, &[64, 8]).unwrap();
        let view = base.slice(1, 1, Some(3), 1).unwrap().permute(&[1, 0]).unwrap();
        write_through(&base, &view, &old);
        // Steps alternating 3 and 4 bytes: 4,100 blocks of two one-byte runs, too many and
        // too short for a copy each, written through the span.
        let n = 4100;
        let old: Vec<u8> = (0..7 * n).map(|i| (i % 5) as u8 + 200).collect();
        let base = Array::from_slice(dev, &old, &[7 * n]).unwrap();
        let layout = Layout::new(&[n, 2], &[7, 3]).unwrap();
        let view = Array::from_buffer(dev, base.buffer().clone(), 0, DType::U8, layout).unwrap();
        write_through(&base, &view, &old);
    }

    /// Checks `view.to_bytes()` against its elements gathered from `bytes`, the bytes of
    /// the whole allocation.
    fn read_through(view: &Array, bytes: &[u8]) {
        let item = view.dtype().itemsize().unwrap() as isize;
        let mut model = Vec::new();
        view.layout().for_each_offset(|o| {
            let at = (view.byte_offset() as isize + o * item) as usize;
            model.extend_from_slice(&bytes[at..at + item as usize]);
        });
        assert_eq!(view.to_bytes().unwrap(), model);
    }

    #[test]
    fn strided_reads_gather_sparse_views_and_read_dense_spans() {
        for dev in both_memories() {
            strided_reads_on(&dev);
        }
    }

    fn strided_reads_on(dev: &AnyDevice) {
        let data: Vec<u16> = (0..512 * 256).map(|i| (i * 3 + 1) as u16).collect();
        let bytes = as_bytes(&data).to_vec();
        let base = Array::from_slice(dev, &data, &[512, 256]).unwrap();
        // Sparse (gathered): a column (one 2D copy of one-element rows), the same column
        // backwards, and two columns of a 3D view (runs of two elements).
        let column = base.index_axis(1, 5).unwrap();
        read_through(&column, &bytes);
        read_through(&column.slice(0, 511, None, -1).unwrap(), &bytes);
        let cube = base.reshape(&[64, 8, 256]).unwrap();
        read_through(&cube.index_axis(1, 2).unwrap().slice(1, 3, Some(5), 1).unwrap(), &bytes);
        // Dense (read through the span): the transposed matrix, every other column, and a
        // small matrix's column.
        read_through(&base.permute(&[1, 0]).unwrap(), &bytes);
        read_through(&base.slice(1, 0, None, 2).unwrap(), &bytes);
        read_through(&base.slice(0, 0, Some(8), 1).unwrap().index_axis(1, 9).unwrap(), &bytes);
        // Sparse, but thousands of one-byte runs unevenly spaced: too many blocks, read
        // through the span.
        let n = 4100;
        let raw: Vec<u8> = (0..200 * n).map(|i| (i % 13) as u8).collect();
        let base = Array::from_slice(dev, &raw, &[200 * n]).unwrap();
        let layout = Layout::new(&[n, 2], &[200, 3]).unwrap();
        read_through(&Array::from_buffer(dev, base.buffer().clone(), 0, DType::U8, layout).unwrap(), &raw);
    }

    /// Python's `slice.indices`, for checking [`Array::slice`] and [`Array::reverse`]
    /// against the language whose notation they follow.
    fn python_indices(len: usize, start: Option<isize>, stop: Option<isize>, step: isize) -> Vec<usize> {
        let len = len as isize;
        let clamp = |v: isize, lo: isize, hi: isize| v.clamp(lo, hi);
        let (lo, hi) = if step > 0 { (0, len) } else { (-1, len - 1) };
        let norm = |v: Option<isize>, default: isize| match v {
            None => default,
            Some(v) if v < 0 => clamp(v + len, lo, hi),
            Some(v) => clamp(v, lo, hi),
        };
        let (start, stop) =
            if step > 0 { (norm(start, 0), norm(stop, len)) } else { (norm(start, len - 1), norm(stop, -1)) };
        let mut out = Vec::new();
        let mut i = start;
        while (step > 0 && i < stop) || (step < 0 && i > stop) {
            out.push(i as usize);
            i += step;
        }
        out
    }

    #[test]
    fn slices_and_reversal_pick_what_python_picks() {
        let host = crate::Runtime::discover().device("host").unwrap();
        for len in 0..6usize {
            let values: Vec<u32> = (0..len as u32).collect();
            let a = Array::from_slice(&host, &values, &[len]).unwrap();
            let reversed: Vec<u32> = values.iter().rev().copied().collect();
            assert_eq!(a.reverse(0).unwrap().to_vec::<u32>().unwrap(), reversed, "len {len}");
            for step in [-3isize, -2, -1, 1, 2, 3] {
                for start in 0..len {
                    for stop in (0..=len).map(Some).chain([None]) {
                        let want = python_indices(len, Some(start as isize), stop.map(|s| s as isize), step);
                        // A stop on the wrong side of start is an empty slice in Python and
                        // an error here; every slice gpuport accepts picks Python's elements.
                        if let Ok(view) = a.slice(0, start, stop, step) {
                            let got = view.to_vec::<u32>().unwrap();
                            let want: Vec<u32> = want.iter().map(|&i| values[i]).collect();
                            assert_eq!(got, want, "{start}:{stop:?}:{step} of {len}");
                        } else {
                            assert!(want.is_empty(), "{start}:{stop:?}:{step} of {len} refused, Python picks {want:?}");
                        }
                    }
                }
            }
        }
        let m = Array::from_slice(&host, &(0..6u32).collect::<Vec<_>>(), &[2, 3]).unwrap();
        assert_eq!(m.reverse(1).unwrap().to_vec::<u32>().unwrap(), [2, 1, 0, 5, 4, 3]);
        assert_eq!(m.reverse(0).unwrap().to_vec::<u32>().unwrap(), [3, 4, 5, 0, 1, 2]);
        assert!(m.reverse(2).is_err());
    }
}
