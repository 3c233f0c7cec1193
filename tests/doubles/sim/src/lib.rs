//! # gpuport-double-sim
//!
//! The machine behind gpuport's driver doubles: CPU implementations of the libcuda and
//! libamdhip64 subsets gpuport uses, built as shared libraries (`gpuport-cuda-double`,
//! `gpuport-hip-double`) so that the CUDA and ROCm backends run every line on a machine
//! without a GPU. This crate holds what both vendors share; each double maps its C ABI
//! (names, status codes, structs, handle rules) onto it.
//!
//! What it simulates ([`Machine`]):
//! - N devices (`GPUPORT_DOUBLE_DEVICES`, default 2), each with its own memory in an
//!   address range the host **cannot** dereference (reserved `PROT_NONE`; the bytes live in
//!   a private shadow mapping only the double touches), so a host access to device memory
//!   faults at once. Pinned and managed memory are ordinary host memory, registered.
//! - Contexts with a per-thread current context, primary-context retain counts.
//! - Streams that run asynchronously and in order, each on its own thread, with an optional
//!   delay per operation (`GPUPORT_DOUBLE_DELAY_US`) to shake out ordering bugs; the legacy
//!   default stream's implicit synchronisation with blocking streams; per-thread default
//!   streams; events with timing; host functions; stream-ordered allocation.
//! - Modules: PTX text, cubin/code-object ELF files, fatbins and clang offload bundles are
//!   parsed for their entry points; the kernels the double can run are CPU
//!   implementations of gpuport's own test kernels ([`kernels`]).
//!
//! It is stricter than a real driver ([`report`]): misuse is reported with the call, its
//! arguments and the thread — missing contexts, destroyed or foreign handles, frees of
//! unknown pointers, ranges outside allocations, work after free, unordered accesses from
//! two streams (vector clocks per stream and event, [`clock`]), driver calls inside host
//! functions, and objects still alive at exit. Faults are injected by
//! `GPUPORT_DOUBLE_FAULTS` ([`faults`]). For the conformance suite's mutation check, one
//! deliberate flaw can be switched on with `GPUPORT_DOUBLE_MUTANT` ([`mutation`]).
//!
//! Depends on std and libc only: it must check gpuport, not echo it.

pub mod clock;
pub mod collective;
pub mod config;
pub mod faults;
pub mod ffi;
pub mod image;
pub mod kernels;
mod machine;
pub mod memory;
pub mod mutation;
pub mod nccl;
pub mod report;
mod stream;

pub use machine::{
    current_context, in_host_function, set_current_context, Attributes, DeviceFacts, EventTiming, HostCallback,
    Machine, MemcpyCheck, PointerInfo, StreamKind, StreamRef, Vendor, MAX_PITCH,
};

/// How a call failed, before the vendor layer turns it into its status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// An argument out of range, a null out-pointer, an unknown address.
    InvalidValue,
    /// The device memory cannot hold the allocation.
    OutOfMemory,
    /// A call before the driver was initialised.
    NotInitialized,
    /// No device (injected, or zero devices configured).
    NoDevice,
    /// A device ordinal out of range.
    InvalidDevice,
    /// A module image that is not one the double understands.
    InvalidImage,
    /// No current context, or a destroyed one.
    InvalidContext,
    /// A stream, event, module or function handle that is unknown or destroyed.
    InvalidHandle,
    /// A kernel name the module lacks (or the double cannot run).
    NotFound,
    /// Work not complete yet.
    NotReady,
    /// Peer access already enabled.
    PeerAccessAlreadyEnabled,
    /// Peer access never enabled.
    PeerAccessNotEnabled,
    /// Host memory that is already page-locked (registered, or pinned by the driver).
    HostMemoryAlreadyRegistered,
    /// An unregister of host memory nobody registered.
    HostMemoryNotRegistered,
    /// Forbidden here (a driver call inside a host function).
    NotPermitted,
    /// A feature the simulated device lacks.
    NotSupported,
    /// An offload bundle without an entry for the device's architecture.
    NoBinaryForGpu,
    /// A vendor status given as is: injected faults, and the sticky error of a poisoned
    /// context.
    Raw(u32),
}

/// A result of the simulation.
pub type Result<T> = std::result::Result<T, Error>;

/// The API call being served, for reports: its exported name and a rendering of its
/// arguments (made only when a report needs it).
pub struct Call<'a> {
    /// The exported name (`cuMemcpyAsync`).
    pub name: &'static str,
    /// Renders the arguments (`dst=0x7f.., len=64, ...`).
    pub args: &'a dyn Fn() -> String,
}

impl Call<'_> {
    /// The call as text: `cuMemcpyAsync(dst=…, …)`.
    pub fn describe(&self) -> String {
        format!("{}({})", self.name, (self.args)())
    }
}

/// Operations queued on the double's streams and not yet completed (0 before the driver is
/// initialised): a test hook, not a vendor call, that both doubles export so a test can
/// see how far a caller got while it holds a stream.
#[no_mangle]
pub extern "C" fn gpuport_double_queued_ops() -> u64 {
    machine::Machine::get().map_or(0, |m| m.queued_ops())
}
