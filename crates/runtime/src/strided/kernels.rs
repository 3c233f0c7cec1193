//! The copy kernels: a strided view of a GPU's memory copied into another layout of the
//! same device by one kernel launch (`strided_copy.cu`), where 2D copies would move a short
//! run per row — a DMA row per element for every 8th `f32`. CuPy and PyTorch copy
//! non-contiguous arrays with kernels too.
//!
//! The kernels are compiled from source at a device's first strided copy (NVRTC on
//! NVIDIA, hiprtc on AMD: `Device::compile`, with its disk cache) and kept for the process
//! (or until [`release`]). A device that cannot compile them — no compiler found, a
//! software device, a plugin — is remembered as such, with the reason, and its copies go
//! on as 2D copies: nothing is retried per copy. `GPUPORT_COPY_KERNELS=off` turns the
//! kernels off (to compare the two routes).

use std::sync::{Arc, Mutex, OnceLock};

use gpuport_core::{
    BackendKind, Buffer, CompileOptions, DeviceId, Error, Kernel, KernelArg, KernelSource, LaunchConfig, Layout,
    MemoryKind, Result,
};

use super::{run_length, Side};
use crate::dynamic::{AnyDevice, AnyStream};

/// The kernels' source (one for both vendors, through `<gpuport/kernel.h>`).
const SOURCE: &str = include_str!("strided_copy.cu");

/// The most axes the kernels take, after axes contiguous on both sides are merged.
const MAX_RANK: usize = 8;

/// The element sizes the kernels copy, in the order of their names' suffixes.
const ITEM_SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// Runs at least this long (in bytes, contiguous on both sides) go as 2D copies: a copy
/// engine moves rows of a kilobyte and more at close to its full bandwidth, and the
/// kernels are for the short runs it moves one descriptor at a time.
const KERNEL_RUN_BYTES: usize = 1024;

/// Threads per block of a launch (within every vendor's limit), and the most blocks: the
/// kernels loop over the elements, so a larger view takes more passes, not more blocks.
const BLOCK: u32 = 256;
const MAX_BLOCKS: u32 = 1 << 16;

/// Environment variable: `off` (or `0`) copies strided views with 2D copies only.
pub const COPY_KERNELS_ENV: &str = "GPUPORT_COPY_KERNELS";

/// One device's compiled kernels, one per element size.
pub(crate) struct CopyKernels {
    by_size: [Kernel; 5],
}

/// What a device's first strided copy found.
enum Slot {
    Ready(Arc<CopyKernels>),
    Unavailable(Error),
}

/// Every device's slot, by device (a handful of entries: a linear search).
static SLOTS: Mutex<Vec<(DeviceId, Slot)>> = Mutex::new(Vec::new());

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var(COPY_KERNELS_ENV).map_or(true, |v| !matches!(v.trim().to_ascii_lowercase().as_str(), "off" | "0"))
    })
}

/// `f` of the slot of `device` (a GPU of a built-in vendor, with the kernels turned on),
/// its kernels compiled at its first call. The slot is read in place: a device without
/// kernels costs its copies no allocation.
fn with_slot<R>(device: &AnyDevice, f: impl FnOnce(&Slot) -> R) -> R {
    let id = device.id();
    // Held while a device's kernels compile, so that they compile once.
    let mut slots = SLOTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, slot)) = slots.iter().find(|(d, _)| *d == id) {
        return f(slot);
    }
    let slot = match compile(device) {
        Ok(kernels) => Slot::Ready(Arc::new(kernels)),
        Err(e) => {
            log::info!("{id}: strided views are copied with 2D copies, without kernels: {e}");
            Slot::Unavailable(e)
        }
    };
    let answer = f(&slot);
    slots.push((id, slot));
    answer
}

/// Whether `device` can have copy kernels at all: a CUDA or ROCm device, with the
/// kernels turned on.
fn eligible(device: &AnyDevice) -> bool {
    enabled() && matches!(device.id().kind, BackendKind::Cuda | BackendKind::Rocm)
}

fn compile(device: &AnyDevice) -> Result<CopyKernels> {
    let source = KernelSource::new(SOURCE).named("gpuport_strided_copy.cu");
    let module = device.compile(&source, &CompileOptions::default())?;
    let kernel = |size: usize| device.kernel(&module, &format!("gpuport_strided_copy_{size}"));
    Ok(CopyKernels { by_size: [kernel(1)?, kernel(2)?, kernel(4)?, kernel(8)?, kernel(16)?] })
}

/// Whether strided views of `device`'s memory are copied with kernels: `Ok` once they are
/// compiled (the first call compiles them), else the reason they are not (no compiler
/// found, a device that compiles nothing, `GPUPORT_COPY_KERNELS=off`) — those copies use
/// 2D copies.
pub fn strided_copy_kernels(device: &AnyDevice) -> Result<()> {
    let kind = device.id().kind;
    if !enabled() {
        return Err(Error::unsupported(kind, format!("copy kernels ({COPY_KERNELS_ENV} turns them off)")));
    }
    if !eligible(device) {
        return Err(Error::unsupported(kind, "copy kernels (it compiles no kernels from source)"));
    }
    with_slot(device, |slot| match slot {
        Slot::Ready(_) => Ok(()),
        Slot::Unavailable(e) => Err(e.clone()),
    })
}

/// Drops every device's kernels (their modules are unloaded once no queued launch holds
/// them); the next strided copy compiles them again, from the disk cache.
pub(crate) fn release() {
    SLOTS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The launch that copies every element from layout `src` to layout `dst` (one shape),
/// `item` bytes each, between `buffers` on `device`: `Some` when every buffer is
/// `device`'s own device memory, the kernels take the copy (an element size they have, at
/// most [`MAX_RANK`] axes once merged, runs shorter than [`KERNEL_RUN_BYTES`]) and the
/// device has them. Only a copy the kernels would take compiles them.
pub(crate) fn plan(
    device: &AnyDevice,
    buffers: &[&Buffer],
    src: &Layout,
    dst: &Layout,
    item: usize,
) -> Option<KernelCopy> {
    let id = device.id();
    if !eligible(device) || !buffers.iter().all(|b| b.device() == id && b.memory() == MemoryKind::Device) {
        return None;
    }
    let which = ITEM_SIZES.iter().position(|&s| s == item)?;
    let (run, _) = run_length(src, dst);
    if run.saturating_mul(item) >= KERNEL_RUN_BYTES {
        return None;
    }
    let axes = axes(src, dst)?;
    let kernels = with_slot(device, |slot| match slot {
        Slot::Ready(kernels) => Some(kernels.clone()),
        Slot::Unavailable(_) => None,
    })?;
    Some(KernelCopy { kernels, which, n: src.numel() as u64, axes })
}

/// A copy in the kernels' terms: the shape with the axes that are contiguous on both
/// sides merged and the axes of extent 1 dropped, and each side's strides in elements.
#[derive(Debug, PartialEq, Eq)]
struct Axes {
    shape: Vec<u64>,
    src: Vec<i64>,
    dst: Vec<i64>,
}

/// The axes of a copy from layout `src` to layout `dst` (one shape), or `None` when they
/// are more than the kernels take.
fn axes(src: &Layout, dst: &Layout) -> Option<Axes> {
    let mut out = Axes { shape: Vec::new(), src: Vec::new(), dst: Vec::new() };
    for axis in 0..src.shape().len() {
        let n = src.shape()[axis];
        if n == 1 {
            continue;
        }
        let (s, d) = (src.strides()[axis] as i64, dst.strides()[axis] as i64);
        // An axis continues the one before it when stepping the outer one on both sides
        // is stepping the inner one `n` times: the two are one axis.
        let joins = matches!((out.src.last(), out.dst.last()),
            (Some(&ps), Some(&pd)) if Some(ps) == s.checked_mul(n as i64) && Some(pd) == d.checked_mul(n as i64));
        if joins {
            let last = out.shape.len() - 1;
            out.shape[last] *= n as u64;
            out.src[last] = s;
            out.dst[last] = d;
        } else {
            out.shape.push(n as u64);
            out.src.push(s);
            out.dst.push(d);
        }
    }
    if out.shape.is_empty() {
        out.shape.push(1);
        out.src.push(0);
        out.dst.push(0);
    }
    (out.shape.len() <= MAX_RANK).then_some(out)
}

/// One planned launch of a copy kernel.
pub(crate) struct KernelCopy {
    kernels: Arc<CopyKernels>,
    which: usize,
    n: u64,
    axes: Axes,
}

impl KernelCopy {
    /// Queues the launch on `stream` (of the device whose memory both sides are), from
    /// element 0 of `src` to element 0 of `dst`. The two sides must not overlap.
    pub(crate) fn queue(&self, stream: &AnyStream, src: Side<'_>, dst: Side<'_>) -> Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let blocks = u32::try_from(self.n.div_ceil(u64::from(BLOCK))).unwrap_or(MAX_BLOCKS).min(MAX_BLOCKS);
        let config = LaunchConfig { grid: [blocks, 1, 1], block: [BLOCK, 1, 1], shared_mem_bytes: 0 };
        let axes = &self.axes;
        // The kernels' 28 parameters, on the stack: the two sides, the element count, the
        // axes, then the extents and each side's strides padded to eight.
        let args: [KernelArg; 4 + 3 * MAX_RANK] = std::array::from_fn(|i| match i {
            0 => KernelArg::Buffer { buffer: src.buffer.clone(), offset: src.offset },
            1 => KernelArg::Buffer { buffer: dst.buffer.clone(), offset: dst.offset },
            2 => KernelArg::scalar(self.n),
            3 => KernelArg::scalar(axes.shape.len() as u32),
            _ => {
                let (which, axis) = ((i - 4) / MAX_RANK, (i - 4) % MAX_RANK);
                match which {
                    0 => KernelArg::scalar(axes.shape.get(axis).copied().unwrap_or(1)),
                    1 => KernelArg::scalar(axes.src.get(axis).copied().unwrap_or(0)),
                    _ => KernelArg::scalar(axes.dst.get(axis).copied().unwrap_or(0)),
                }
            }
        });
        stream.launch(&self.kernels.by_size[self.which], &config, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(shape: &[usize], strides: &[isize]) -> Layout {
        Layout::new(shape, strides).unwrap()
    }

    #[test]
    fn axes_contiguous_on_both_sides_merge_and_extents_of_one_drop() {
        let c = |shape: &[usize]| Layout::contiguous(shape).unwrap();
        // A contiguous copy is one axis.
        let a = axes(&c(&[4, 5, 6]), &c(&[4, 5, 6])).unwrap();
        assert_eq!(a, Axes { shape: vec![120], src: vec![1], dst: vec![1] });
        // Every 8th element of 2M: one axis, stride 8 against 1.
        let a = axes(&layout(&[1 << 21], &[8]), &c(&[1 << 21])).unwrap();
        assert_eq!(a, Axes { shape: vec![1 << 21], src: vec![8], dst: vec![1] });
        // A transposed matrix stays two axes; a sliced one's rows stay apart.
        let a = axes(&layout(&[3, 4], &[1, 3]), &c(&[3, 4])).unwrap();
        assert_eq!(a, Axes { shape: vec![3, 4], src: vec![1, 3], dst: vec![4, 1] });
        let a = axes(&layout(&[3, 1, 4], &[10, 99, 1]), &c(&[3, 1, 4])).unwrap();
        assert_eq!(a, Axes { shape: vec![3, 4], src: vec![10, 1], dst: vec![4, 1] });
        // One element: one axis of one.
        let a = axes(&layout(&[1, 1], &[5, 7]), &c(&[1, 1])).unwrap();
        assert_eq!(a, Axes { shape: vec![1], src: vec![0], dst: vec![0] });
        // Reversed: the negative stride is kept.
        let a = axes(&layout(&[6], &[-1]), &c(&[6])).unwrap();
        assert_eq!(a, Axes { shape: vec![6], src: vec![-1], dst: vec![1] });
    }

    #[test]
    fn more_axes_than_the_kernels_take_are_left_to_2d_copies() {
        // Each stride four times the one inside it, the extents 2: no two axes merge.
        let shape = [2usize; 9];
        let strided: Vec<isize> = (0..9).map(|i| 2isize << (2 * (8 - i))).collect();
        let dst = Layout::contiguous(&shape).unwrap();
        assert!(axes(&layout(&shape, &strided), &dst).is_none());
        assert!(axes(&layout(&shape[..8], &strided[1..]), &Layout::contiguous(&shape[..8]).unwrap()).is_some());
    }
}
