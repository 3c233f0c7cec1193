//! Memory someone else owns, described by an interchange import (DLPack, the CUDA Array
//! Interface, NumPy's `__array_interface__`, the buffer protocol): where its elements are,
//! and the check that they lie inside one live allocation of the device that is said to
//! own them.
//!
//! A descriptor is only a claim: a pointer, a shape, strides and an item size. Believing
//! it would let a shape larger than the allocation reach the heap beyond it (a read of
//! bytes that belong to something else, a write that corrupts the allocator). So before
//! an array is made over foreign memory, the device is asked what it knows of the lowest
//! byte the elements reach (`Device::pointer_attributes`), and the import is refused when:
//!
//! - the memory is device memory and the device names another device as its owner, or
//!   knows no allocation at that address;
//! - the device knows the allocation (its start and length) and the span — from the lowest
//!   to the highest byte the shape, strides, offset and item size reach — does not lie
//!   inside it.
//!
//! Where the device cannot say where the allocation ends, the check that remains is the
//! owner's: ordinary host memory (a NumPy array: the host backend knows only the blocks it
//! allocated itself), memory a backend reports without a range (HIP before a runtime
//! answers `hipMemGetAddressRange`), and pinned or managed memory the driver was never told
//! of. Such spans are the producer's promise, as they are for every consumer of these
//! protocols.
//!
//! A span that runs from one allocation into the next is refused even when the two happen
//! to be adjacent: the import keeps only the first one's owner alive.

use std::ptr::NonNull;

use gpuport_core::{Error, MemoryKind, PointerAttributes, Result};

use crate::dynamic::AnyDevice;

/// Where the elements of an array over someone else's memory are (see
/// [`Array::from_foreign`](crate::Array::from_foreign)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignElements {
    /// The address of element 0 (ignored for an array with no elements).
    pub element0: u64,
    /// What kind of memory it is.
    pub memory: MemoryKind,
    /// Whether the host may dereference it.
    pub host_accessible: bool,
    /// Element 0 as a pointer, where the producer handed one over (DLPack's `data`, a
    /// buffer-protocol view's `buf`) rather than an address (the CUDA Array Interface):
    /// host pointers into the array are then derived from it and keep its provenance.
    /// `None` for an address, which host pointers are then made from (exposed provenance).
    pub pointer: Option<NonNull<u8>>,
    /// What the device said of an address among the elements, where the caller already
    /// asked (the CUDA Array Interface finds the owner of `data` that way); `None` makes
    /// the import ask, once, for the lowest byte.
    pub attributes: Option<PointerAttributes>,
}

/// Refuses a span of `len` bytes from `start` that does not lie inside one live
/// allocation of `device` (see the module documentation for what is checked where).
pub(crate) fn check_span(device: &AnyDevice, at: &ForeignElements, start: u64, len: usize) -> Result<()> {
    let asked;
    let attrs = match &at.attributes {
        Some(a) => a,
        None => {
            asked = device.pointer_attributes(start)?;
            &asked
        }
    };
    let end = start.checked_add(len as u64).ok_or_else(|| refuse("the elements' address range overflows"))?;
    let span = || format!("bytes {start:#x}..{end:#x} ({len} bytes)");
    if at.memory == MemoryKind::Device {
        match attrs.device {
            Some(owner) if owner != device.id() => {
                return Err(refuse(format!("{} said to be on {} belong to {owner}", span(), device.id())));
            }
            None => return Err(unowned(device, at, span())),
            Some(_) => {}
        }
    }
    if let Some((base, alloc_len)) = attrs.allocation {
        let alloc_end = base.saturating_add(alloc_len as u64);
        if start < base || end > alloc_end {
            return Err(refuse(format!(
                "{} reach outside their allocation {base:#x}..{alloc_end:#x} ({alloc_len} bytes) on {}",
                span(),
                device.id()
            )));
        }
    }
    Ok(())
}

/// The refusal of device memory whose lowest byte no allocation of `device` holds: when
/// element 0 lies in one (negative strides reaching below it), that allocation is named.
#[cold]
#[inline(never)]
fn unowned(device: &AnyDevice, at: &ForeignElements, span: String) -> Error {
    match device
        .pointer_attributes(at.element0)
        .ok()
        .and_then(|a| a.allocation.filter(|_| a.device == Some(device.id())))
    {
        Some((base, len)) => refuse(format!(
            "{span} reach outside their allocation {base:#x}..{:#x} ({len} bytes) on {}",
            base.saturating_add(len as u64),
            device.id()
        )),
        None => {
            refuse(format!("{span} said to be device memory of {}: the device knows no allocation there", device.id()))
        }
    }
}

fn refuse(what: impl Into<String>) -> Error {
    Error::Interchange { what: what.into() }
}
