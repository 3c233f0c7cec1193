//! Packaging an export: one heap allocation holds the managed tensor, the shape and
//! strides it points into, and what keeps the memory alive (the exported array's
//! storage); the deleter frees it all, exactly once, never unwinding into the consumer.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{addr_of_mut, NonNull};

use gpuport_runtime::{Error, Result, INLINE_NDIM, MAX_NDIM};

use crate::abi::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, DlpackFlags,
};
use crate::managed::{ManagedTensor, RawManaged};

/// The descriptor of an export, before packaging.
#[derive(Debug, Clone, Copy)]
pub struct TensorParts<'a> {
    /// Element 0 (the pointer already advanced: `byte_offset` is exported as 0, since
    /// several consumers ignore it); null for a zero-size tensor.
    pub data: *mut std::ffi::c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// Element type.
    pub dtype: DLDataType,
    /// Extents.
    pub shape: &'a [usize],
    /// Strides in elements, as the array has them (never rewritten).
    pub strides: &'a [isize],
}

/// Which struct an export is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `DLManagedTensor` (no version, no flags).
    Legacy,
    /// `DLManagedTensorVersioned` with this version and flags.
    Versioned(DLPackVersion, DlpackFlags),
}

/// The two managed-tensor structs, as the packaging needs them.
trait Managed: Sized {
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void) -> Self;
    fn manager_ctx(this: *mut Self) -> *mut c_void;
    fn raw(this: NonNull<Self>) -> RawManaged;
}

/// The accessors both structs share: the fields have the same names.
macro_rules! managed {
    ($ty:ident, $variant:ident, |$dl:ident, $ctx:ident| $new:expr) => {
        impl Managed for $ty {
            fn new($dl: DLTensor, $ctx: *mut c_void) -> Self {
                $new
            }
            fn manager_ctx(this: *mut Self) -> *mut c_void {
                // SAFETY: called by the deleter with the tensor it was given, which is live.
                unsafe { (*this).manager_ctx }
            }
            fn raw(this: NonNull<Self>) -> RawManaged {
                RawManaged::$variant(this)
            }
        }
    };
}

managed!(DLManagedTensor, Legacy, |dl_tensor, manager_ctx| DLManagedTensor { dl_tensor, manager_ctx, deleter: None });
managed!(DLManagedTensorVersioned, Versioned, |dl_tensor, manager_ctx| DLManagedTensorVersioned {
    version: crate::abi::DLPACK_VERSION,
    manager_ctx,
    deleter: None,
    flags: 0,
    dl_tensor,
});

/// One export's allocation; `manager_ctx` holds its address. `dims` holds the shape then
/// the strides: `D` is room for two lists of [`INLINE_NDIM`] (every common rank), or of
/// [`MAX_NDIM`] — so the usual export allocates a couple of hundred bytes, not the kilobyte
/// the highest rank needs. Only the first `2 * ndim` are written.
struct ExportCtx<T, K, const D: usize> {
    tensor: T,
    dims: [MaybeUninit<i64>; D],
    /// Held only to be dropped by the deleter.
    _keep: K,
}

/// The deleter of every export: frees the context (and so releases `keep`) once; a panic
/// in a drop is caught here, never unwound into the consumer.
unsafe extern "C" fn delete_export<T: Managed, K, const D: usize>(tensor: *mut T) {
    if tensor.is_null() {
        return;
    }
    let ctx = T::manager_ctx(tensor).cast::<ExportCtx<T, K, D>>();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `ctx` came from `Box::into_raw` in `package_in`, every field written,
        // and the deleter runs once.
        drop(unsafe { Box::from_raw(ctx) })
    }));
}

/// Refuses a rank that needs more than `D` values, strides that are not one per
/// dimension, and an extent `int64_t` cannot hold.
fn check_dims<const D: usize>(parts: &TensorParts<'_>) -> Result<()> {
    let ndim = parts.shape.len();
    if 2 * ndim > D || parts.strides.len() != ndim {
        return Err(Error::Interchange { what: format!("{ndim} dimensions; at most {MAX_NDIM} are supported") });
    }
    if parts.shape.iter().any(|&e| i64::try_from(e).is_err()) {
        return Err(Error::invalid_layout("an extent exceeds i64"));
    }
    Ok(())
}

fn package_as<T: Managed + 'static, K: Send + 'static>(
    parts: &TensorParts<'_>,
    keep: K,
    set: impl FnOnce(&mut T, unsafe extern "C" fn(*mut T)),
) -> Result<ManagedTensor> {
    if parts.shape.len() <= INLINE_NDIM {
        package_in::<T, K, { 2 * INLINE_NDIM }>(parts, keep, set)
    } else {
        package_in::<T, K, { 2 * MAX_NDIM }>(parts, keep, set)
    }
}

/// Builds the context where it lives: every field written once into the fresh allocation,
/// the shape and strides straight into it. (Built on the stack and moved in, the moves of
/// the values just written stalled the export measurably.)
fn package_in<T: Managed + 'static, K: Send + 'static, const D: usize>(
    parts: &TensorParts<'_>,
    keep: K,
    set: impl FnOnce(&mut T, unsafe extern "C" fn(*mut T)),
) -> Result<ManagedTensor> {
    check_dims::<D>(parts)?;
    let ndim = parts.shape.len();
    let ctx = Box::into_raw(Box::<ExportCtx<T, K, D>>::new_uninit()).cast::<ExportCtx<T, K, D>>();
    // SAFETY: `ctx` is a fresh, exclusively owned allocation laid out as the context
    // (`MaybeUninit` has its type's layout); each field is written once through this one
    // raw pointer before anything reads it: `2 * ndim` ≤ D dims (checked), `keep`, then the
    // tensor, whose shape and strides point into `dims` and whose `manager_ctx` is the
    // context pointer itself (with the whole allocation's provenance, so the deleter can
    // rebuild the Box). Nothing here can fail once the allocation is made.
    let tensor = unsafe {
        let dims = addr_of_mut!((*ctx).dims).cast::<i64>();
        for (i, (&extent, &stride)) in parts.shape.iter().zip(parts.strides).enumerate() {
            // Checked to fit above; `isize` is at most 64 bits on every target.
            dims.add(i).write(extent as i64);
            dims.add(ndim + i).write(stride as i64);
        }
        addr_of_mut!((*ctx)._keep).write(keep);
        let dl = DLTensor {
            data: parts.data,
            device: parts.device,
            ndim: ndim as i32,
            dtype: parts.dtype,
            shape: dims,
            // Strides are always given (non-NULL), as header 1.2 asks.
            strides: dims.add(ndim),
            byte_offset: 0,
        };
        let tensor = addr_of_mut!((*ctx).tensor);
        tensor.write(T::new(dl, ctx.cast()));
        set(&mut *tensor, delete_export::<T, K, D>);
        tensor
    };
    // SAFETY: `tensor` is non-null (inside a Box) and owned by nobody else; its deleter is
    // `delete_export`, which frees the context once.
    Ok(unsafe { ManagedTensor::from_raw(T::raw(NonNull::new_unchecked(tensor))) })
}

/// Packages an export: `keep` is held until the consumer's deleter call.
pub fn package<K: Send + 'static>(parts: &TensorParts<'_>, keep: K, kind: Kind) -> Result<ManagedTensor> {
    match kind {
        Kind::Legacy => package_as::<DLManagedTensor, K>(parts, keep, |t, deleter| t.deleter = Some(deleter)),
        Kind::Versioned(version, flags) => package_as::<DLManagedTensorVersioned, K>(parts, keep, |t, deleter| {
            t.version = version;
            t.flags = flags.bits();
            t.deleter = Some(deleter);
        }),
    }
}
