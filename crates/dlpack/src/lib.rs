//! # gpuport-dlpack
//!
//! DLPack for gpuport: the `dlpack.h` 1.x ABI ([`abi`]), exporting an
//! [`gpuport_runtime::Array`] by the array-API request rules ([`to_dlpack`]: `max_version`,
//! `dl_device`, `copy`, `stream`), and importing a managed tensor after validating it
//! ([`from_dlpack`]). Device types come from what each backend declares
//! (`Backend::DLPACK`), so a registered plugin maps like a built-in backend.
//!
//! - Export: legacy `DLManagedTensor` when the consumer gives no `max_version` (or major
//!   < 1), else `DLManagedTensorVersioned` at the older of the two versions; zero-copy when
//!   the consumer wants the data where it is, after making the consumer's stream wait for
//!   the array's pending work (events, no host block); otherwise a copy through the copy
//!   engine, flagged `IS_COPIED`; `copy=False` never copies. Read-only arrays carry
//!   `READ_ONLY` (and cannot go out as the legacy struct). Strides are never rewritten and
//!   always given; the pointer is advanced and `byte_offset` is 0. One heap allocation per
//!   zero-copy export holds the tensor, its shape and strides, and the allocation's handle.
//! - Import: the version, `ndim`, shape, strides, dtype, data pointer and address range
//!   are checked before anything is used; the array owns the tensor and its deleter runs
//!   exactly once — on the last drop, or at once on any error.
//!
//! The Python capsule protocol and the C exchange API are the Python module's; this crate
//! holds the rules.

pub mod abi;
mod device;
mod export;
mod import;
mod managed;
mod package;
mod stream;
#[cfg(test)]
mod tests;

pub use abi::{DLDataType, DLDevice, DLPackVersion, DLTensor, DlpackFlags, DLPACK_VERSION};
pub use device::{dl_device_of, resolve, resolve_at, Resolved};
pub use export::{negotiate, to_dlpack, to_dlpack_on_stream, ExportRequest};
pub use import::{from_dlpack, from_dlpack_with, validate, ImportRequest, Validated};
pub use managed::{ManagedTensor, RawManaged};
pub use package::{package, Kind, TensorParts};
pub use stream::{handshake, has_vendor_streams, legacy_stream_arg, takes_no_stream, StreamRequest};
