//! Packaging an export: one heap allocation holds the managed tensor, the shape and
//! strides it points into, and what keeps the memory alive (the exported array's
//! storage); the deleter frees it all, exactly once, never unwinding into the consumer.

use std::ffi::c_void;
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
    /// Sets `manager_ctx` through a raw pointer to a live struct.
    fn set_manager_ctx(this: *mut Self, ctx: *mut c_void);
    /// The `DLTensor` field, through a raw pointer to a live struct.
    fn dl_tensor(this: *mut Self) -> *mut DLTensor;
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
            fn set_manager_ctx(this: *mut Self, ctx: *mut c_void) {
                // SAFETY: `this` is live and exclusively owned (callers' contract).
                unsafe { (*this).manager_ctx = ctx }
            }
            fn dl_tensor(this: *mut Self) -> *mut DLTensor {
                // SAFETY: `this` is live (callers' contract); the field is in bounds.
                unsafe { addr_of_mut!((*this).dl_tensor) }
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
/// [`MAX_NDIM`] — so the usual export allocates and fills a couple of hundred bytes, not
/// the kilobyte the highest rank needs.
struct ExportCtx<T, K, const D: usize> {
    tensor: T,
    dims: [i64; D],
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
        // SAFETY: `ctx` came from `Box::into_raw` in `package` and the deleter runs once.
        drop(unsafe { Box::from_raw(ctx) })
    }));
}

/// The shape then the strides, as `int64_t`, in room for `D` values.
fn dims<const D: usize>(parts: &TensorParts<'_>) -> Result<[i64; D]> {
    let ndim = parts.shape.len();
    if 2 * ndim > D || parts.strides.len() != ndim {
        return Err(Error::Interchange { what: format!("{ndim} dimensions; at most {MAX_NDIM} are supported") });
    }
    let mut dims = [0i64; D];
    for i in 0..ndim {
        dims[i] = i64::try_from(parts.shape[i]).map_err(|_| Error::invalid_layout("an extent exceeds i64"))?;
        dims[ndim + i] = i64::try_from(parts.strides[i]).map_err(|_| Error::invalid_layout("a stride exceeds i64"))?;
    }
    Ok(dims)
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

fn package_in<T: Managed + 'static, K: Send + 'static, const D: usize>(
    parts: &TensorParts<'_>,
    keep: K,
    set: impl FnOnce(&mut T, unsafe extern "C" fn(*mut T)),
) -> Result<ManagedTensor> {
    let dims = dims::<D>(parts)?;
    let ndim = parts.shape.len();
    let dl = DLTensor {
        data: parts.data,
        device: parts.device,
        ndim: parts.shape.len() as i32,
        dtype: parts.dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let ctx =
        Box::into_raw(Box::new(ExportCtx::<T, K, D> { tensor: T::new(dl, std::ptr::null_mut()), dims, _keep: keep }));
    // SAFETY: `ctx` is a fresh, exclusively owned allocation; the pointers stored in the
    // tensor point into it and stay valid until the deleter frees it.
    let tensor = unsafe {
        let tensor = addr_of_mut!((*ctx).tensor);
        set(&mut *tensor, delete_export::<T, K, D>);
        // The context pointer itself (with the whole allocation's provenance), so the
        // deleter can rebuild the Box from it.
        T::set_manager_ctx(tensor, ctx.cast());
        tensor
    };
    let dl = T::dl_tensor(tensor);
    // SAFETY: as above: the fields are set through the one raw pointer.
    unsafe {
        let dims = addr_of_mut!((*ctx).dims).cast::<i64>();
        (*dl).shape = dims;
        // Strides are always given (non-NULL), as header 1.2 asks; `ndim` ≤ D / 2 keeps
        // them inside the array.
        (*dl).strides = dims.add(ndim);
    }
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
