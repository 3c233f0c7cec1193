//! # gpuport
//!
//! One GPU hardware-abstraction layer: a single build discovers at run time which vendor
//! runtimes the machine has (NVIDIA CUDA, AMD ROCm — no SDK needed to build) and drives
//! them, and the CPU, through one set of traits; and exchanges arrays with other libraries
//! through DLPack ([`dlpack`]) and the CUDA Array Interface ([`cai`]). One dependency
//! gives all of it; the `ext` feature adds `gpuport::ext`, the software test device.
//!
//! ## Quick start
//!
//! ```
//! use gpuport::prelude::*;
//!
//! # fn main() -> gpuport::Result<()> {
//! // 1. Discover: every backend is available (with its devices) or says why not.
//! let rt = Runtime::discover();
//! println!("{rt}");
//!
//! // 2. Pick a device: by name ("host", "cuda:1", "rocm:0", a plugin's "ext:0"), or the
//! //    best one (GPUPORT_DEVICE, else the first GPU, else the host).
//! let dev = rt.best_device()?;
//!
//! // 3. Streams and events: work is queued and runs asynchronously, in order per stream;
//! //    an event recorded on one stream orders another.
//! let (a, b) = (dev.create_stream(StreamFlags::NON_BLOCKING, 0)?, dev.create_stream(StreamFlags::NON_BLOCKING, 0)?);
//! let done = dev.create_event(EventFlags::empty())?;
//! let (src, dst) = (dev.alloc(1024)?, dev.alloc(1024)?);
//! a.write_slice(&[1.0f32; 256], &src, 0)?;
//! a.record(&done)?;
//! b.wait(&done)?;
//! b.copy(&src, 0, &dst, 0, 1024)?;
//! assert_eq!(b.read_vec::<f32>(&dst, 0, 256)?, vec![1.0; 256]);
//!
//! // 4. Arrays: n-dimensional views with a dtype; views share the allocation's pending
//! //    work, and the copy engine moves them between any two devices.
//! let x = Array::from_slice(&dev, &[1u32, 2, 3, 4, 5, 6], &[2, 3])?;
//! assert_eq!(x.range(1, 1..)?.to_vec::<u32>()?, vec![2, 3, 5, 6]);
//! let on_host = x.to_device(&rt.device("host")?)?;
//! assert_eq!(on_host.to_vec::<u32>()?, vec![1, 2, 3, 4, 5, 6]);
//! # Ok(())
//! # }
//! ```
//!
//! ## Which traits to import
//!
//! `use gpuport::prelude::*` is enough for both tiers:
//!
//! - the **dynamic tier** — [`AnyDevice`], [`AnyStream`], [`AnyEvent`], what [`Runtime`]
//!   hands out — has its methods inherent: no import needed. They dispatch over the
//!   built-in backends and run-time plugins ([`Runtime::register_plugin`]); mixing
//!   backends is [`Error::BackendMismatch`], never a panic. [`dynamic`] holds the
//!   object-safe traits behind them, for code generic over handles.
//! - the **static tier** — a typed backend such as [`host::HostBackend`], zero-cost —
//!   uses the core traits [`Backend`], [`Device`], [`Stream`], [`Event`], which the
//!   prelude brings.
//!
//! Plugins (the ext device, a vendor's port — see `docs/porting.md`) are registered
//! before discovery: `Runtime::register_plugin(gpuport::ext::ExtBackend::load(&Default::default())?)`
//! (with the `ext` feature).
//! `GPUPORT_BACKENDS=host,cuda` limits discovery (a left-out backend's library is never
//! opened); `GPUPORT_DEVICE` names the default device.

pub use gpuport_runtime::*;

/// DLPack: the ABI, export with the array API's request rules and the stream handshake,
/// and validated import (`gpuport-dlpack`).
pub use gpuport_dlpack as dlpack;

/// The CUDA Array Interface v3: the model and its key/value form, export with the
/// producer join, import with the consumer policies (`gpuport-cai`).
pub use gpuport_cai as cai;

/// Collectives across processes and machines: one `Communicator` over MPI (its standard
/// ABI, loaded at run time), queued on gpuport streams (`gpuport-collective`).
pub use gpuport_collective as collective;

/// The ext device: a software device with memory of its own, for cross-device paths
/// without a GPU, registered as a plugin (`gpuport-ext`; the `ext` feature).
#[cfg(feature = "ext")]
pub use gpuport_ext as ext;

/// `docs/interop.md`'s Rust example runs as a doc test of this crate, which has every part
/// it uses.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/interop.md")]
pub struct InteropGuide;
