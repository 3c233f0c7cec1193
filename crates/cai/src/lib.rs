//! # gpuport-cai
//!
//! The CUDA Array Interface, version 3, for gpuport arrays on CUDA and ROCm
//! (and, for tests, any device with real asynchronous streams):
//!
//! - [`Interface`]: the typed model, read from and written to its neutral key/value form
//!   ([`Value`], what the Python module turns into a `dict`) with every rule checked on the
//!   way in — each rejection names the key and the value — and written entry by entry
//!   ([`Interface::entries`]) for a binding that builds its dict directly;
//! - [`export`]: version 3, byte strides or `None`, `(ptr, read_only)`, pointer 0 for
//!   zero-size arrays, no silent reinterpretation of types without a typestr, and the
//!   producer join: pending work on any number of streams is joined into one stream that
//!   is named (never `0`);
//! - [`import`]: an array over the producer's memory holding its owner, with the consumer
//!   policy [`Sync`] (`Enqueue` by default: no host block; `Host`; `Ignore`, also with
//!   `GPUPORT_CAI_SYNC=0`).
//!
//! Imported arrays are ordinary arrays: they export through DLPack, and DLPack imports
//! export through this interface.

mod entries;
mod exchange;
mod model;
mod read;
#[cfg(test)]
mod tests;
mod value;

pub use entries::{Entry, Key};
pub use exchange::{export, import, Export, Sync};
pub use model::{CaiStream, Interface, VERSION};
pub use read::{Node, Source, MAX_DEPTH, MAX_ITEMS, MAX_TEXT, READ_KEYS};
pub use value::Value;
