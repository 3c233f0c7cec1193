//! The `dlpack.h` 1.x ABI, exactly: `#[repr(C)]` structs with the header's field order
//! and types, the flag bits, and the exchange-API table. Tests pin every size, alignment
//! and offset (64-bit targets).
//!
//! Declarations only: the `extern "C"` types here are of foreign functions, and gpuport's
//! own deleter (in `package`) runs its drop inside `catch_unwind`.

use std::ffi::{c_char, c_int, c_void};

use bitflags::bitflags;

/// Every `DLDeviceType` of header 1.3 (`kDLCPU` 1 … `kDLTrn` 18), as gpuport's core
/// declares them for the backends, and every `DLDataTypeCode` (`kDLInt` 0 …
/// `kDLFloat4_e2m1fn` 17): one definition each, shared with the rest of gpuport.
pub use gpuport_runtime::{DTypeCode, DlDeviceType};

/// The DLPack version gpuport speaks (header 1.3).
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 3 };

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DLPackVersion {
    /// Major version: a consumer refuses (after calling the deleter) any other than its own.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDevice`. `Debug` names the device type: `DLDevice { kDLCUDA (2), 0 }`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// `DLDeviceType` (`kDLCPU` 1, `kDLCUDA` 2, …).
    pub device_type: i32,
    /// The device ordinal; 0 for the CPU, pinned and managed memory.
    pub device_id: i32,
}

impl std::fmt::Debug for DLDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DLDevice {{ {}, {} }}", gpuport_runtime::DlDeviceType(self.device_type), self.device_id)
    }
}

impl DLDevice {
    /// Device `id` of type `device_type`: `DLDevice::new(DlDeviceType::CUDA, 0)`.
    pub const fn new(device_type: gpuport_runtime::DlDeviceType, id: i32) -> Self {
        DLDevice { device_type: device_type.0, device_id: id }
    }

    /// The CPU (`kDLCPU`, device 0).
    pub const fn cpu() -> Self {
        Self::new(gpuport_runtime::DlDeviceType::CPU, 0)
    }

    /// The device type, typed.
    pub const fn kind(&self) -> gpuport_runtime::DlDeviceType {
        gpuport_runtime::DlDeviceType(self.device_type)
    }
}

impl std::fmt::Display for DLDevice {
    /// `kDLCUDA (2) 0`: the type, its number, the ordinal.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind(), self.device_id)
    }
}

/// `DLDataType`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// `DLDataTypeCode`.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (vector width), 1 for scalars.
    pub lanes: u16,
}

/// `DLTensor`: strides in elements; NULL strides mean C-contiguous.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// The allocation (or NULL for a zero-size tensor).
    pub data: *mut c_void,
    /// Where it lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL.
    pub strides: *mut i64,
    /// Bytes from `data` to element 0.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (legacy, unversioned).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The producer's DLPack version (read first, before any other field).
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// [`DlpackFlags`] bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

bitflags! {
    /// `DLPACK_FLAG_BITMASK_*`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DlpackFlags: u64 {
        /// The consumer must not write through the tensor.
        const READ_ONLY = 1 << 0;
        /// The producer copied the data for this export; the consumer owns the copy.
        const IS_COPIED = 1 << 1;
        /// Sub-byte elements are padded to a byte each.
        const IS_SUBBYTE_TYPE_PADDED = 1 << 2;
    }
}

/// `DLPackSetError`: reports an error of the allocator.
pub type DLPackSetError =
    Option<unsafe extern "C" fn(error_ctx: *mut c_void, kind: *const c_char, message: *const c_char)>;
/// `DLPackManagedTensorAllocator`.
pub type DLPackManagedTensorAllocator = Option<
    unsafe extern "C" fn(
        prototype: *mut DLTensor,
        out: *mut *mut DLManagedTensorVersioned,
        error_ctx: *mut c_void,
        set_error: DLPackSetError,
    ) -> c_int,
>;
/// `DLPackManagedTensorFromPyObjectNoSync`.
pub type DLPackManagedTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> c_int>;
/// `DLPackManagedTensorToPyObjectNoSync`.
pub type DLPackManagedTensorToPyObjectNoSync =
    Option<unsafe extern "C" fn(tensor: *mut DLManagedTensorVersioned, out_py_object: *mut *mut c_void) -> c_int>;
/// `DLPackDLTensorFromPyObjectNoSync` (may be NULL in a table).
pub type DLPackDLTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> c_int>;
/// `DLPackCurrentWorkStream`.
pub type DLPackCurrentWorkStream =
    Option<unsafe extern "C" fn(device_type: i32, device_id: i32, out_current_stream: *mut *mut c_void) -> c_int>;

/// `DLPackExchangeAPIHeader`.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    /// The table's version.
    pub version: DLPackVersion,
    /// An older table, for consumers of an older major version; NULL at the end.
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackExchangeAPI`: the C-level exchange table a Python array type publishes.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    /// Version and the previous table.
    pub header: DLPackExchangeAPIHeader,
    /// Allocates a tensor like a prototype.
    pub managed_tensor_allocator: DLPackManagedTensorAllocator,
    /// Object → managed tensor, no synchronization.
    pub managed_tensor_from_py_object_no_sync: DLPackManagedTensorFromPyObjectNoSync,
    /// Managed tensor → object, no synchronization.
    pub managed_tensor_to_py_object_no_sync: DLPackManagedTensorToPyObjectNoSync,
    /// Object → borrowed `DLTensor`, no synchronization (may be NULL).
    pub dltensor_from_py_object_no_sync: DLPackDLTensorFromPyObjectNoSync,
    /// The producer's current work stream for a device.
    pub current_work_stream: DLPackCurrentWorkStream,
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn debug_names_the_device_type() {
        assert_eq!(format!("{:?}", DLDevice { device_type: 2, device_id: 1 }), "DLDevice { kDLCUDA (2), 1 }");
        assert_eq!(format!("{:?}", DLDevice { device_type: 99, device_id: 0 }), "DLDevice { device type 99, 0 }");
    }

    #[test]
    fn small_structs_match_the_header() {
        assert_eq!((size_of::<DLPackVersion>(), align_of::<DLPackVersion>()), (8, 4));
        assert_eq!((offset_of!(DLPackVersion, major), offset_of!(DLPackVersion, minor)), (0, 4));
        assert_eq!((size_of::<DLDevice>(), align_of::<DLDevice>()), (8, 4));
        assert_eq!((offset_of!(DLDevice, device_type), offset_of!(DLDevice, device_id)), (0, 4));
        assert_eq!((size_of::<DLDataType>(), align_of::<DLDataType>()), (4, 2));
        assert_eq!(
            [offset_of!(DLDataType, code), offset_of!(DLDataType, bits), offset_of!(DLDataType, lanes)],
            [0, 1, 2]
        );
    }

    #[test]
    fn tensors_match_the_header() {
        assert_eq!((size_of::<DLTensor>(), align_of::<DLTensor>()), (48, 8));
        assert_eq!(
            [
                offset_of!(DLTensor, data),
                offset_of!(DLTensor, device),
                offset_of!(DLTensor, ndim),
                offset_of!(DLTensor, dtype),
                offset_of!(DLTensor, shape),
                offset_of!(DLTensor, strides),
                offset_of!(DLTensor, byte_offset),
            ],
            [0, 8, 16, 20, 24, 32, 40]
        );
        assert_eq!((size_of::<DLManagedTensor>(), align_of::<DLManagedTensor>()), (64, 8));
        assert_eq!(
            [
                offset_of!(DLManagedTensor, dl_tensor),
                offset_of!(DLManagedTensor, manager_ctx),
                offset_of!(DLManagedTensor, deleter)
            ],
            [0, 48, 56]
        );
        assert_eq!((size_of::<DLManagedTensorVersioned>(), align_of::<DLManagedTensorVersioned>()), (80, 8));
        assert_eq!(
            [
                offset_of!(DLManagedTensorVersioned, version),
                offset_of!(DLManagedTensorVersioned, manager_ctx),
                offset_of!(DLManagedTensorVersioned, deleter),
                offset_of!(DLManagedTensorVersioned, flags),
                offset_of!(DLManagedTensorVersioned, dl_tensor),
            ],
            [0, 8, 16, 24, 32]
        );
    }

    #[test]
    fn the_exchange_table_matches_the_header() {
        assert_eq!(size_of::<DLPackExchangeAPIHeader>(), 16);
        assert_eq!(offset_of!(DLPackExchangeAPIHeader, prev_api), 8);
        assert_eq!(size_of::<DLPackExchangeAPI>(), 16 + 5 * 8);
        assert_eq!(
            [
                offset_of!(DLPackExchangeAPI, managed_tensor_allocator),
                offset_of!(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync),
                offset_of!(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync),
                offset_of!(DLPackExchangeAPI, dltensor_from_py_object_no_sync),
                offset_of!(DLPackExchangeAPI, current_work_stream),
            ],
            [16, 24, 32, 40, 48]
        );
        // Function pointers are nullable through `Option` at no cost.
        assert_eq!(size_of::<DLPackCurrentWorkStream>(), 8);
    }

    #[test]
    fn flags_are_the_header_bits() {
        assert_eq!(DlpackFlags::READ_ONLY.bits(), 1);
        assert_eq!(DlpackFlags::IS_COPIED.bits(), 2);
        assert_eq!(DlpackFlags::IS_SUBBYTE_TYPE_PADDED.bits(), 4);
        assert_eq!(DLPACK_VERSION, DLPackVersion { major: 1, minor: 3 });
    }
}
