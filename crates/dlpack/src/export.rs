//! Export: an [`Array`] as a DLPack managed tensor, by the array-API request rules.

use gpuport_runtime::{Array, DlDeviceType, Error, Result, Runtime};

use crate::abi::{DLDataType, DLDevice, DLPackVersion, DlpackFlags, DLPACK_VERSION};
use crate::device::{dl_device_of, resolve};
use crate::managed::ManagedTensor;
use crate::package::{package, Kind, TensorParts};
use crate::stream::{handshake, StreamRequest};

/// What the consumer asked `__dlpack__` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportRequest {
    /// The newest version the consumer speaks; `None` (or major < 1) asks for the legacy
    /// struct.
    pub max_version: Option<DLPackVersion>,
    /// The device the consumer wants the data on; `None` = where it is.
    pub dl_device: Option<DLDevice>,
    /// `Some(true)`: always copy; `Some(false)`: never copy (an error when one is
    /// needed); `None`: copy only when the device differs.
    pub copy: Option<bool>,
    /// The consumer's `stream` argument, as given (see [`StreamRequest::parse`]).
    pub stream: Option<i64>,
}

impl Default for ExportRequest {
    fn default() -> Self {
        ExportRequest { max_version: Some(DLPACK_VERSION), dl_device: None, copy: None, stream: None }
    }
}

/// The struct and version to export as: legacy when the consumer gives no version or a
/// major version below 1, else versioned at the older of the two sides' versions.
pub fn negotiate(max_version: Option<DLPackVersion>) -> Option<DLPackVersion> {
    match max_version {
        None => None,
        Some(v) if v.major < 1 => None,
        Some(v) => Some(std::cmp::min(v, DLPACK_VERSION)),
    }
}

/// Exports `array`: zero-copy when the consumer wants it where it is (after making the
/// consumer's stream wait for the array's pending work), else a copy through the copy
/// engine flagged `IS_COPIED`. Read-only arrays export with `READ_ONLY`, and not at all
/// through the legacy struct (which cannot say so).
///
/// `request.stream` may name no stream, `-1`, or a default stream by its number (CUDA's
/// `1` and `2`, ROCm's `0`); a raw stream handle of the consumer's is
/// [`to_dlpack_on_stream`]'s, which is unsafe because gpuport cannot check that the handle
/// is live — here it is `Error::InvalidArgument`.
pub fn to_dlpack(rt: &Runtime, array: &Array, request: &ExportRequest) -> Result<ManagedTensor> {
    // SAFETY: raw handles are refused before they are used.
    unsafe { export(rt, array, request, Handles::Refused) }
}

/// [`to_dlpack`] with the consumer's stream given as a raw handle (`cudaStream_t`,
/// `hipStream_t`, a gpuport raw handle): that stream waits for the array's pending work.
///
/// # Safety
/// A stream handle in `request.stream` must be a live stream of the array's device, as
/// for `Device::wrap_stream`.
pub unsafe fn to_dlpack_on_stream(rt: &Runtime, array: &Array, request: &ExportRequest) -> Result<ManagedTensor> {
    // SAFETY: forwarded from the caller.
    unsafe { export(rt, array, request, Handles::Allowed) }
}

/// Whether a raw stream handle may be used.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Handles {
    Allowed,
    Refused,
}

/// # Safety
/// With `Handles::Allowed`, as [`to_dlpack_on_stream`].
unsafe fn export(rt: &Runtime, array: &Array, request: &ExportRequest, handles: Handles) -> Result<ManagedTensor> {
    let version = negotiate(request.max_version);
    if version.is_none() && array.is_read_only() {
        return Err(Error::Interchange {
            what: "a read-only array cannot be exported as a legacy DLManagedTensor (it has no READ_ONLY flag); \
                   ask for max_version >= (1, 0)"
                .into(),
        });
    }
    let here = dl_device_of(array)?;
    let target = request.dl_device.unwrap_or(here);
    let needs_copy = target != here || request.copy == Some(true);
    let mut flags = DlpackFlags::empty();
    if array.is_read_only() {
        flags |= DlpackFlags::READ_ONLY;
    }
    if needs_copy {
        if request.copy == Some(false) {
            return Err(Error::Interchange {
                what: format!("copy=False, but the array is on {} and {} was asked for", here, target),
            });
        }
        let dest = resolve(rt, target)?;
        flags |= DlpackFlags::IS_COPIED;
        // The copy is complete on return (the copy engine waits for it), so a consumer on
        // the CPU needs no stream; a GPU consumer's stream has nothing left to wait for.
        let copy = array.to_device(&dest.device)?;
        let copy = if array.is_read_only() { copy.into_read_only() } else { copy };
        let device = dl_device_of(&copy)?;
        return describe(&copy, device, version, flags);
    }
    let request_stream = StreamRequest::parse(DlDeviceType(here.device_type), request.stream)?;
    if let (StreamRequest::Handle(h), Handles::Refused) = (request_stream, handles) {
        return Err(Error::invalid_argument(format!(
            "stream={h:#x} is a raw stream handle, which to_dlpack cannot check; use the unsafe \
             to_dlpack_on_stream, or name a default stream (CUDA 1 or 2, ROCm 0) or none"
        )));
    }
    // SAFETY: forwarded from the caller; a raw handle only when they allowed it.
    unsafe { handshake(array, DlDeviceType(here.device_type), request_stream) }?;
    describe(array, here, version, flags)
}

/// Element 0 as the export's data pointer: where the host can reach the memory, derived
/// from the buffer's host pointer (so memory gpuport allocated keeps its provenance for a
/// consumer in this process); a device address otherwise, which no host code dereferences;
/// null for a zero-size array.
fn data_pointer(array: &Array) -> Result<*mut std::ffi::c_void> {
    if array.numel() == 0 {
        return Ok(std::ptr::null_mut());
    }
    let buffer = array.buffer();
    if buffer.is_host_accessible() {
        return Ok(buffer.host_ptr(array.byte_offset(), 0)?.cast());
    }
    Ok(std::ptr::without_provenance_mut(array.data_addr() as usize))
}

/// Packages `array` (on `device`) as it is: the export holds a handle to its allocation,
/// nothing else of the array.
fn describe(
    array: &Array,
    device: DLDevice,
    version: Option<DLPackVersion>,
    flags: DlpackFlags,
) -> Result<ManagedTensor> {
    let dtype = array.dtype();
    let parts = TensorParts {
        data: data_pointer(array)?,
        device,
        dtype: DLDataType { code: dtype.code() as u8, bits: dtype.bits(), lanes: dtype.lanes() },
        shape: array.shape(),
        strides: array.strides(),
    };
    let kind = match version {
        None => Kind::Legacy,
        Some(v) => Kind::Versioned(v, flags),
    };
    // The allocation is what must outlive the consumer's use: a handle to it (no heap
    // allocation) is the export's keep-alive; the one allocation is the context's.
    package(&parts, array.buffer().clone(), kind)
}
