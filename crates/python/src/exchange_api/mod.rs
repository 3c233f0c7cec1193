//! The DLPack C exchange API (`DLPackExchangeAPI`, dlpack.h 1.3), both sides.
//!
//! Producer: one process-lifetime table published on `gpuport.Array`'s type as
//! `__dlpack_c_exchange_api__` (a capsule named `dlpack_exchange_api`) and the older
//! `__c_dlpack_exchange_api__` (the address as an int), with all five functions.
//!
//! Consumer: `gpuport.from_dlpack` reads the table from the producer's type (new name,
//! then old), walks `prev_api` to major version 1, takes the tensor with
//! `managed_tensor_from_py_object_no_sync`, and does the stream handshake itself: on a
//! stream device, the producer's current work stream gets an event that the imported
//! array's later users wait for (no host block) — what `__dlpack__(stream=…)` achieves on
//! the other path. Both paths validate and import through `gpuport-dlpack`.
//!
//! Every `extern "C"` function of the producer catches panics (`guard`): none crosses
//! into C.

mod consumer;
mod producer;

use std::ffi::CStr;

pub use consumer::{import_through, producer_of, Producer};
pub use producer::{address, capsule};

/// The capsule name of `__dlpack_c_exchange_api__`.
const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";
