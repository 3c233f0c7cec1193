//! [`ManagedTensor`]: an owned DLPack managed tensor, legacy or versioned. It calls the
//! producer's deleter exactly once — when dropped, on every error path that drops it, and
//! during unwinding — unless handed back out with [`ManagedTensor::into_raw`]. A NULL
//! deleter is never called.

use std::ptr::NonNull;

use gpuport_runtime::{Error, Result};

use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, DlpackFlags};

/// A raw managed tensor pointer of either kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawManaged {
    /// `DLManagedTensor*` (capsule name `dltensor`).
    Legacy(NonNull<DLManagedTensor>),
    /// `DLManagedTensorVersioned*` (capsule name `dltensor_versioned`).
    Versioned(NonNull<DLManagedTensorVersioned>),
}

/// An owned DLPack managed tensor.
#[derive(Debug)]
pub struct ManagedTensor {
    raw: RawManaged,
}

// SAFETY: the tensor is owned exclusively by this handle; DLPack lets the owner call the
// deleter from any thread (a producer's deleter takes whatever lock it needs, e.g. the
// GIL), and gpuport drops imported tensors off driver-callback and worker threads.
unsafe impl Send for ManagedTensor {}
// SAFETY: shared references only read the immutable descriptor.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// Takes ownership of `raw`.
    ///
    /// # Safety
    /// `raw` points at a live managed tensor of its kind that nobody else will delete: from
    /// here on its deleter is this handle's to call.
    pub unsafe fn from_raw(raw: RawManaged) -> Self {
        ManagedTensor { raw }
    }

    /// Takes ownership of a legacy tensor; a NULL pointer is an error.
    ///
    /// # Safety
    /// As for [`ManagedTensor::from_raw`].
    pub unsafe fn from_legacy(ptr: *mut DLManagedTensor) -> Result<Self> {
        let raw = NonNull::new(ptr).ok_or_else(|| Error::Interchange { what: "a NULL DLManagedTensor".into() })?;
        // SAFETY: forwarded from the caller.
        Ok(unsafe { Self::from_raw(RawManaged::Legacy(raw)) })
    }

    /// Takes ownership of a versioned tensor; a NULL pointer is an error.
    ///
    /// # Safety
    /// As for [`ManagedTensor::from_raw`].
    pub unsafe fn from_versioned(ptr: *mut DLManagedTensorVersioned) -> Result<Self> {
        let raw =
            NonNull::new(ptr).ok_or_else(|| Error::Interchange { what: "a NULL DLManagedTensorVersioned".into() })?;
        // SAFETY: forwarded from the caller.
        Ok(unsafe { Self::from_raw(RawManaged::Versioned(raw)) })
    }

    /// Gives the tensor up without deleting it (to hand it to a consumer).
    pub fn into_raw(self) -> RawManaged {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    fn raw(&self) -> RawManaged {
        self.raw
    }

    /// The producer's version; `None` for a legacy tensor.
    pub fn version(&self) -> Option<DLPackVersion> {
        match self.raw() {
            RawManaged::Legacy(_) => None,
            // SAFETY: the pointer is live while owned; `version` is the first field, which
            // every ABI version keeps.
            RawManaged::Versioned(p) => Some(unsafe { p.as_ref() }.version),
        }
    }

    /// The flags (none for a legacy tensor). Only meaningful once the version is known to
    /// be one this crate speaks.
    pub fn flags(&self) -> DlpackFlags {
        match self.raw() {
            RawManaged::Legacy(_) => DlpackFlags::empty(),
            // SAFETY: live while owned; read only after the caller checked the version.
            RawManaged::Versioned(p) => DlpackFlags::from_bits_retain(unsafe { p.as_ref() }.flags),
        }
    }

    /// The tensor descriptor. For a versioned tensor, only after its major version was
    /// checked (a different major may lay the struct out differently past `flags`).
    pub fn dl_tensor(&self) -> &DLTensor {
        match self.raw() {
            // SAFETY: live while owned; the descriptor is not changed by its owner.
            RawManaged::Legacy(p) => &unsafe { p.as_ref() }.dl_tensor,
            // SAFETY: as above.
            RawManaged::Versioned(p) => &unsafe { p.as_ref() }.dl_tensor,
        }
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        match self.raw {
            RawManaged::Legacy(p) => {
                // SAFETY: owned and live until its deleter runs.
                let deleter = unsafe { p.as_ref() }.deleter;
                if let Some(deleter) = deleter {
                    // SAFETY: the deleter is called once, with its own tensor.
                    unsafe { deleter(p.as_ptr()) }
                }
            }
            RawManaged::Versioned(p) => {
                // SAFETY: as above; `deleter` lies before `flags`, in the part every ABI
                // version keeps, so it is read even for a version this crate refuses.
                let deleter = unsafe { p.as_ref() }.deleter;
                if let Some(deleter) = deleter {
                    // SAFETY: as above.
                    unsafe { deleter(p.as_ptr()) };
                    // The deliberate bug behind `deliberate-double-delete`.
                    #[cfg(feature = "deliberate-double-delete")]
                    // SAFETY: not safe, on purpose: the tensor was already given back.
                    unsafe {
                        deleter(p.as_ptr())
                    };
                }
            }
        }
    }
}
