//! The copy engine: `copy(src, dst)` between arrays on any two devices.
//!
//! | devices | route |
//! | --- | --- |
//! | same device | device copy on the destination's stream |
//! | same backend, other device, `can_access_peer` | peer copy |
//! | one side host-accessible memory (the host's, or another backend's pinned or managed memory) | one copy on the other side's stream: every stream reaches host-accessible memory, as `cuMemcpyAsync` reaches pageable memory — the destination's stream, or the source's default stream when the destination is the host-accessible side |
//! | anything else (ext:0↔ext:1 without a link, CUDA↔ROCm) | staged through two pinned host buffers in chunks: the device-to-host copy of chunk *i* overlaps the host-to-device copy of chunk *i − 1* (between two vendors the buffers are one vendor's pinned memory registered with the other, so neither driver treats them as pageable and makes the caller wait) |
//!
//! Strided arrays are copied as runs (the longest trailing block contiguous in both),
//! consecutive runs that step evenly on both sides joined into one 2D copy
//! ([`Stream::copy_2d`](gpuport_core::Stream::copy_2d): a sliced matrix is one
//! `cuMemcpy2DAsync`); when the blocks are many and their runs short, through the host
//! (the caller waits for it; [`Array::copy_from_bytes`] says how a strided destination is
//! then written). For staged copies a strided
//! source is first packed on its device and a strided destination filled from a packed
//! temporary on its device.
//!
//! Ordering goes through the arrays' shared pending work ([`Array::wait_pending`],
//! [`Array::record_access`]): the copy's stream waits for the source's pending writes and
//! the destination's pending reads and writes (event waits on one backend; across
//! backends a callback on the copy's stream waits, never the calling thread), and the
//! copy is recorded as a read of the source and a write of the destination.
//! [`CopyEngine::copy_on`] returns once the last piece of work is queued, and work queued
//! on its stream afterwards runs after the copy (a copy run on the source's stream is
//! waited for there). A staged copy reads the source on its device's default stream;
//! within one backend the two streams wait on each other's events, between backends the
//! calling thread waits for each chunk's source half to land in the pinned buffer before
//! queuing its destination half. [`copy`] waits for all of it.

use gpuport_core::{DefaultStream, Error, Result};

use crate::array::Array;
use crate::dynamic::{AnyDevice, AnyStream};
use crate::pending::Access;
use crate::strided;

mod staging;

/// Which route a copy took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyRoute {
    /// Nothing to copy.
    Empty,
    /// Within one device.
    SameDevice,
    /// Device to device over a peer link.
    Peer,
    /// One copy on a stream that reaches both sides: one side is host-accessible memory
    /// (the host's, or another backend's pinned or managed memory), and the copy runs on
    /// the other side's stream — the destination's, or the source's default stream when the
    /// destination is the host-accessible side.
    Direct,
    /// Through pinned host buffers, in this many chunks.
    Staged {
        /// Number of chunks.
        chunks: usize,
    },
}

/// Copies arrays between devices. Cheap to create; holds only its settings.
#[derive(Debug, Clone, Copy)]
pub struct CopyEngine {
    chunk_bytes: usize,
}

impl Default for CopyEngine {
    fn default() -> Self {
        CopyEngine { chunk_bytes: 4 << 20 }
    }
}

/// Frees what copies keep for reuse: the staging buffers (and their events) of staged
/// copies, per device pair, and each GPU's compiled copy kernels
/// ([`strided_copy_kernels`](crate::strided_copy_kernels)); the next copy makes them
/// again. A program that wants every device resource gone — before it checks for leaks,
/// or to give pinned memory back — calls this after its last copy. What a queued copy
/// still uses is freed once its work has drained (buffers and modules are only freed
/// after the work queued on them).
pub fn release_copy_resources() {
    staging::release_all();
    strided::release_kernels();
}

/// Copies `src` into `dst` (same shape and dtype, any devices) and waits for the copy.
pub fn copy(src: &Array, dst: &Array) -> Result<CopyRoute> {
    CopyEngine::default().copy(src, dst)
}

impl Array {
    /// A C-contiguous copy of the array on `device` (any device: the copy engine picks the
    /// route), complete on return.
    pub fn to_device(&self, device: &AnyDevice) -> Result<Array> {
        let copy = Array::empty(device, self.shape(), self.dtype())?;
        self::copy(self, &copy)?;
        Ok(copy)
    }
}

impl CopyEngine {
    /// An engine staging through chunks of `chunk_bytes` (at least 1).
    pub fn with_chunk_bytes(chunk_bytes: usize) -> Result<Self> {
        if chunk_bytes == 0 {
            return Err(Error::invalid_argument("staging chunk size must be at least 1 byte"));
        }
        Ok(CopyEngine { chunk_bytes })
    }

    /// The staging chunk size.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Copies and waits for completion.
    pub fn copy(&self, src: &Array, dst: &Array) -> Result<CopyRoute> {
        let stream = dst.device().default_stream(DefaultStream::Legacy)?;
        // `stream` need not be joined: the caller waits for the copy itself.
        let route = self.queue(src, dst, &stream, false)?;
        dst.synchronize()?;
        Ok(route)
    }

    /// Queues the copy on `stream` (a stream of `dst`'s device) and returns once all of it
    /// is queued; it is recorded as a write of `dst` and a read of `src`, and work queued
    /// on `stream` afterwards runs after it.
    pub fn copy_on(&self, src: &Array, dst: &Array, stream: &AnyStream) -> Result<CopyRoute> {
        self.queue(src, dst, stream, true)
    }

    /// [`CopyEngine::copy_on`]; a copy run on the source's stream makes `stream` wait for
    /// it only when `join_stream`.
    fn queue(&self, src: &Array, dst: &Array, stream: &AnyStream, join_stream: bool) -> Result<CopyRoute> {
        if src.shape() != dst.shape() {
            return Err(Error::invalid_argument(format!("copy from shape {:?} to {:?}", src.shape(), dst.shape())));
        }
        if src.dtype() != dst.dtype() {
            return Err(Error::invalid_argument(format!("copy from {} to {}", src.dtype(), dst.dtype())));
        }
        if dst.is_read_only() {
            return Err(Error::invalid_argument("copy into a read-only array"));
        }
        if stream.device_id() != dst.device_id() {
            return Err(Error::invalid_argument(format!(
                "the copy stream is on {}, the destination on {}",
                stream.device_id(),
                dst.device_id()
            )));
        }
        if src.numel() == 0 {
            return Ok(CopyRoute::Empty);
        }
        let (sd, dd) = (src.device(), dst.device());
        if sd.id() == dd.id() {
            one_stream_copy(stream, src, dst)?;
            return Ok(CopyRoute::SameDevice);
        }
        if sd.id().kind == dd.id().kind && dd.can_access_peer(sd)? {
            dd.enable_peer_access(sd)?;
            one_stream_copy(stream, src, dst)?;
            return Ok(CopyRoute::Peer);
        }
        // Every stream reaches host-accessible memory (its own device's or another
        // backend's): one copy on the stream of the side that is not host memory.
        if src.buffer().is_host_accessible() {
            one_stream_copy(stream, src, dst)?;
            return Ok(CopyRoute::Direct);
        }
        if dst.buffer().is_host_accessible() {
            let src_stream = sd.default_stream(DefaultStream::Legacy)?;
            one_stream_copy(&src_stream, src, dst)?;
            if join_stream {
                dst.wait_pending(stream, Access::Write)?;
                dst.record_access(stream, Access::Write)?;
            }
            return Ok(CopyRoute::Direct);
        }
        dst.wait_pending(stream, Access::Write)?;
        let route = self.staged(src, dst, stream)?;
        dst.record_access(stream, Access::Write)?;
        Ok(route)
    }

    fn staged(&self, src: &Array, dst: &Array, stream: &AnyStream) -> Result<CopyRoute> {
        let src_stream = src.device().default_stream(DefaultStream::Legacy)?;
        src.wait_pending(&src_stream, Access::Read)?;
        // Pack a strided source on its own device.
        let packed_src = if src.layout().is_c_contiguous() {
            src.clone()
        } else {
            let tmp = Array::empty(src.device(), src.shape(), src.dtype())?;
            strided_copy(&src_stream, src, &tmp)?;
            tmp
        };
        let direct = dst.layout().is_c_contiguous();
        let packed_dst = if direct { dst.clone() } else { Array::empty(dst.device(), dst.shape(), dst.dtype())? };
        let chunks = self.pipeline(&packed_src, &src_stream, &packed_dst, stream)?;
        src.record_access(&src_stream, Access::Read)?;
        if !direct {
            strided_copy(stream, &packed_dst, dst)?;
        }
        Ok(CopyRoute::Staged { chunks })
    }

    /// Moves contiguous `src` to contiguous `dst` through two pinned buffers (a staging
    /// set from the pool of this device pair, returned once the copy is queued).
    fn pipeline(&self, src: &Array, src_stream: &AnyStream, dst: &Array, dst_stream: &AnyStream) -> Result<usize> {
        let chunk = self.chunk_bytes.min(src.nbytes());
        let set = staging::checkout(src.device(), dst.device(), chunk, self.chunk_bytes)?;
        let result = Self::pipeline_with(&set, chunk, src, src_stream, dst, dst_stream);
        // After an error a buffer may still be written by a queued copy: not reused.
        if result.is_ok() {
            staging::give_back(set);
        }
        result
    }

    fn pipeline_with(
        set: &staging::StagingSet,
        chunk: usize,
        src: &Array,
        src_stream: &AnyStream,
        dst: &Array,
        dst_stream: &AnyStream,
    ) -> Result<usize> {
        let total = src.nbytes();
        let chunks = total.div_ceil(chunk);
        let (fill_buf, drain_buf, filled, drained) = (&set.fill, &set.drain, &set.filled, &set.drained);
        let (src_base, dst_base) = (src.byte_offset(), dst.byte_offset());
        let len_of = |i: usize| chunk.min(total - i * chunk);
        let fill = |i: usize| -> Result<()> {
            let slot = i % 2;
            src_stream.copy(src.buffer(), src_base + i * chunk, &fill_buf[slot], 0, len_of(i))?;
            src_stream.record(&filled[slot])
        };
        let drain = |i: usize| -> Result<()> {
            let slot = i % 2;
            dst_stream.copy(&drain_buf[slot], 0, dst.buffer(), dst_base + i * chunk, len_of(i))?;
            dst_stream.record(&drained[slot])
        };
        if src_stream.device_id().kind == dst_stream.device_id().kind {
            // One event type: the two streams wait on each other's events and the caller
            // waits for nothing (a wait captures the record current when it is queued, so
            // re-recording an event for a later chunk does not disturb it).
            for i in 0..chunks {
                let slot = i % 2;
                if i >= 2 {
                    src_stream.wait(&drained[slot])?; // chunk i − 2 has left this buffer
                }
                fill(i)?;
                dst_stream.wait(&filled[slot])?;
                drain(i)?;
            }
            return Ok(chunks);
        }
        // Across backends no stream can wait on the other's events: the caller waits for
        // each chunk to land before queuing its destination half.
        for i in 0..chunks {
            if i >= 2 {
                drained[i % 2].synchronize()?; // chunk i − 2 has left this buffer
            }
            fill(i)?;
            if i >= 1 {
                filled[(i - 1) % 2].synchronize()?;
                drain(i - 1)?; // overlaps the copy just queued for chunk i
            }
        }
        filled[(chunks - 1) % 2].synchronize()?;
        drain(chunks - 1)?;
        Ok(chunks)
    }
}

/// Copies `src` to `dst` on `stream`, which reaches both (same device, a peer, or one side
/// host-accessible): `stream` waits for what the copy conflicts with, and the copy is
/// recorded as a read of `src` and a write of `dst` on it.
fn one_stream_copy(stream: &AnyStream, src: &Array, dst: &Array) -> Result<()> {
    dst.wait_pending(stream, Access::Write)?;
    src.wait_pending(stream, Access::Read)?;
    strided_copy(stream, src, dst)?;
    let device = if stream.device_id() == dst.device_id() { dst.device() } else { src.device() };
    src.record_access_on(device, stream, Access::Read)?;
    dst.record_access_on(device, stream, Access::Write)
}

/// Copies between arrays reachable from one stream: with a copy kernel between two views
/// of a GPU's memory whose runs are short, else in 2D blocks of runs; many short blocks
/// go through the host.
fn strided_copy(stream: &AnyStream, src: &Array, dst: &Array) -> Result<()> {
    let item = src.dtype().itemsize()?;
    // One kernel launch between two views of the stream's device's memory (not of one
    // allocation: the kernels' threads would race where the two overlap).
    let device = if stream.device_id() == dst.device_id() { dst.device() } else { src.device() };
    if !src.buffer().same_allocation(dst.buffer()) {
        let buffers = [src.buffer(), dst.buffer()];
        if let Some(copy) = strided::kernel_plan(device, &buffers, src.layout(), dst.layout(), item) {
            return copy.queue(stream, src.side(), dst.side());
        }
    }
    if let Some(plan) = strided::plan(src.layout(), dst.layout(), item)? {
        return strided::queue(stream, src.side(), dst.side(), &plan);
    }
    // Through the host: both arrays' own methods order themselves after their pending
    // work, and `stream`'s (already waited for by the caller) is flushed first.
    stream.synchronize()?;
    dst.copy_from_bytes(&src.to_bytes()?)
}
