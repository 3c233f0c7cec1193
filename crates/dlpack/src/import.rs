//! Import: a DLPack managed tensor as an [`Array`], validated before anything is trusted.
//! The array owns the tensor: the producer's deleter runs exactly once, when the last view
//! drops (off driver-callback and worker threads), or at once on any error.

use gpuport_runtime::{AnyDevice, Array, DType, Error, ForeignElements, Layout, MemoryKind, Result, Runtime, MAX_NDIM};

use crate::abi::{DLDevice, DlpackFlags};
use crate::device::{resolve, resolve_at};
use crate::managed::ManagedTensor;

/// A tensor descriptor that passed every check.
#[derive(Debug, Clone)]
pub struct Validated {
    /// Where the memory is.
    pub device: DLDevice,
    /// Element type.
    pub dtype: DType,
    /// Shape and strides (elements).
    pub layout: Layout,
    /// The lowest address any element touches (0 for a zero-size tensor).
    pub start: u64,
    /// Bytes from `start` past the highest element.
    pub len: usize,
    /// Bytes from `start` to element 0 (non-zero with negative strides).
    pub element0: usize,
    /// The producer's flags (none for a legacy tensor).
    pub flags: DlpackFlags,
    /// Element 0 as a pointer derived from the producer's `data` (null for a zero-size
    /// tensor): host memory imported within one process keeps its provenance.
    pub element0_ptr: *mut u8,
}

fn bad(what: impl Into<String>) -> Error {
    Error::Interchange { what: what.into() }
}

/// Checks a managed tensor's descriptor: major version 1 (a newer minor is fine), `ndim`
/// in 0..=64, non-NULL shape when `ndim > 0`, extents ≥ 0, NULL strides = C-contiguous,
/// negative strides and `byte_offset` honoured, a known dtype of whole bytes, non-NULL
/// data unless the tensor is empty, and no address arithmetic that overflows.
pub fn validate(tensor: &ManagedTensor) -> Result<Validated> {
    if let Some(v) = tensor.version() {
        if v.major != 1 {
            return Err(bad(format!("DLPack {}.{}: only major version 1 is supported", v.major, v.minor)));
        }
    }
    let t = tensor.dl_tensor();
    let ndim = usize::try_from(t.ndim)
        .ok()
        .filter(|&n| n <= MAX_NDIM)
        .ok_or_else(|| bad(format!("ndim {} is out of range (0..={MAX_NDIM})", t.ndim)))?;
    if ndim > 0 && t.shape.is_null() {
        return Err(bad(format!("a NULL shape for ndim {ndim}")));
    }
    let (shape, strides): (&[i64], Option<&[i64]>) = if ndim == 0 {
        (&[], None)
    } else {
        // SAFETY: the producer gives `ndim` extents at a non-NULL `shape`, and `ndim`
        // strides at `strides` when it is not NULL, alive while the tensor is.
        unsafe {
            (
                std::slice::from_raw_parts(t.shape, ndim),
                (!t.strides.is_null()).then(|| std::slice::from_raw_parts(t.strides, ndim)),
            )
        }
    };
    let dtype = DType::from_dlpack(t.dtype.code, t.dtype.bits, t.dtype.lanes).map_err(|e| {
        bad(format!("dtype (code {}, bits {}, lanes {}): {e}", t.dtype.code, t.dtype.bits, t.dtype.lanes))
    })?;
    let layout = Layout::from_i64(shape, strides)?;
    let itemsize = dtype.itemsize().map_err(|e| bad(format!("dtype {dtype}: {e}")))?;
    let span = layout.span(itemsize)?;
    let flags = tensor.flags();
    if layout.numel() == 0 {
        let element0_ptr = std::ptr::null_mut();
        return Ok(Validated { device: t.device, dtype, layout, start: 0, len: 0, element0: 0, flags, element0_ptr });
    }
    if t.data.is_null() {
        return Err(bad(format!("NULL data for a tensor of {} elements", layout.numel())));
    }
    let overflow = || bad("the tensor's address range overflows");
    let element0 = (t.data as u64).checked_add(t.byte_offset).ok_or_else(overflow)?;
    let start = element0.checked_add_signed(span.start as i64).ok_or_else(overflow)?;
    let end = element0.checked_add_signed(span.end as i64).ok_or_else(overflow)?;
    let len = usize::try_from(end - start).map_err(|_| overflow())?;
    // Offset, not rebuilt from the sum above (wrapping: a device address is never
    // dereferenced here, and the checks above already refused what would overflow).
    let element0_ptr = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize);
    let element0 = (element0 - start) as usize;
    Ok(Validated { device: t.device, dtype, layout, start, len, element0, flags, element0_ptr })
}

/// What the consumer asked `from_dlpack` for.
#[derive(Debug, Clone, Default)]
pub struct ImportRequest {
    /// The device the result must be on; `None` = where the tensor is.
    pub device: Option<AnyDevice>,
    /// `Some(true)`: always copy; `Some(false)`: never (an error when one is needed).
    pub copy: Option<bool>,
}

/// Imports `tensor` as an array that owns it (zero-copy), or, when `request` asks for a
/// copy or another device, as a copy made through the copy engine (the tensor is then
/// released once copied). The device type is mapped through the backends' declarations;
/// device memory must belong to the tensor's device, and where the backend knows the
/// allocation the tensor's whole span must lie inside it ([`Array::from_foreign`]). Memory of
/// a `kDLCUDAHost`/`kDLROCMHost`/`kDLCUDAManaged` tensor keeps its kind. On every error
/// the tensor's deleter has run once when this returns. A zero-copy import makes two heap
/// allocations, the array's own (its buffer, which holds the tensor, and its storage).
pub fn from_dlpack(rt: &Runtime, tensor: ManagedTensor, request: &ImportRequest) -> Result<Array> {
    from_dlpack_with(rt, tensor, request, |t| t)
}

/// [`from_dlpack`], with the tensor kept alive by what `keep` makes of it once it is
/// validated — for example a wrapper that calls the producer's deleter only while the
/// producer's language runtime is still alive (the Python module's). The keeper is held
/// in the array's buffer, not boxed.
pub fn from_dlpack_with<K: Send + Sync + 'static>(
    rt: &Runtime,
    tensor: ManagedTensor,
    request: &ImportRequest,
    keep: impl FnOnce(ManagedTensor) -> K,
) -> Result<Array> {
    let v = validate(&tensor)?;
    let resolved = if v.len > 0 { resolve_at(rt, v.device, v.start)? } else { resolve(rt, v.device)? };
    let at = ForeignElements {
        element0: v.start + v.element0 as u64,
        memory: resolved.memory,
        host_accessible: resolved.memory != MemoryKind::Device,
        pointer: std::ptr::NonNull::new(v.element0_ptr),
        attributes: None,
    };
    // SAFETY: the validated descriptor covers exactly the memory the tensor describes, on
    // that device (`from_foreign` refuses it when the device knows otherwise: another
    // owner, or a span outside the allocation); the tensor (and so the memory) lives as
    // long as the buffer, which owns it and calls its deleter on the last drop (on an
    // error here, at once).
    let mut array = unsafe { Array::from_foreign(resolved.device, at, v.dtype, v.layout, keep(tensor)) }?;
    if v.flags.contains(DlpackFlags::READ_ONLY) {
        array = array.into_read_only();
    }
    let target = match &request.device {
        Some(target) if target.id() != array.device_id() => target,
        _ if request.copy == Some(true) => array.device(),
        _ => return Ok(array),
    };
    if request.copy == Some(false) {
        return Err(bad(format!(
            "copy=False, but the tensor is on {} and {} was asked for",
            array.device_id(),
            target.id()
        )));
    }
    array.to_device(target)
}
