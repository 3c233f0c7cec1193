//! # gpuport-collective
//!
//! Collectives across processes and machines for gpuport arrays: one [`Communicator`] —
//! `all_reduce`, `broadcast`, `reduce`, `all_gather`, `reduce_scatter`, `all_to_all`,
//! `send`/`recv`, `barrier`, `split`, `dup` — queued on gpuport streams like any other
//! work. Its engines are the ones the field uses, each loaded at run time so nothing of
//! them is needed at build time and a missing one is a reason ([`engines`]), never a
//! crash: MPI through the MPI 5.0 standard ABI (`libmpi_abi.so.1`, as MPICH 5 and the PyPI
//! `mpich` wheel ship it) for ranks in processes ([`Communicator::world`]), and NCCL
//! (`libnccl.so.2`) or RCCL (`librccl.so.1`) for ranks on CUDA or ROCm devices — those of
//! one process ([`Communicator::init_all`], their collectives issued together in a
//! [`group`]), or one per thread or process ([`Communicator::init_rank`] with a shared
//! [`UniqueId`], [`Communicator::for_device`] over MPI) — each collective followed by a
//! watchdog that aborts a hung communicator.
//! Re-exported by `gpuport` as `gpuport::collective`.
//!
//! ```no_run
//! use gpuport_collective::{Communicator, ReduceOp};
//! # fn main() -> gpuport_core::Result<()> {
//! let rt = gpuport_runtime::Runtime::discover();
//! let world = Communicator::world()?; // under `mpiexec -n 4`
//! let host = rt.device("host")?;
//! let x = gpuport_runtime::Array::from_slice(&host, &[world.rank() as f32; 8], &[8])?;
//! world.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! `docs/collectives.md` says how to launch, how the engine is found, how collectives
//! are ordered and what is not there yet.

mod communicator;
mod library;
mod mpi;
mod nccl;
mod op;
mod operands;
mod search;
mod timeout;
mod work;

pub use communicator::Communicator;
pub use mpi::check::CHECK_ENV;
pub use mpi::{LIBRARY_ENV, SINGLETON_ENV};
pub use nccl::group::{group, Group};
pub use nccl::unique_id::UniqueId;
pub use nccl::{NCCL_LIBRARY_ENV, RCCL_LIBRARY_ENV};
pub use op::ReduceOp;
pub use search::add_search_dir;
pub use timeout::TIMEOUT_ENV;
pub use work::Work;

/// A collectives engine as this process finds it: its version, or why it cannot be used.
#[derive(Debug, Clone)]
pub struct EngineReport {
    /// The engine (`MPI`, `NCCL`, `RCCL`).
    pub name: &'static str,
    /// Its library's version line (NCCL, RCCL: with where it was found), or why it is
    /// unavailable.
    pub status: Result<String, String>,
    /// What the library found lacks, each feature with the version that has it (NCCL and
    /// RCCL: their features arrive with their versions); empty when nothing was found.
    pub lacks: Vec<String>,
}

/// Every collectives engine gpuport knows, as this process finds it (loading, not
/// initialising: listing them starts no MPI and touches no GPU).
///
/// NCCL and RCCL, when found, are available with their version and path (`NCCL 2.32.3 at
/// /…/libnccl.so.2`) and what their version lacks — each lacking feature is
/// `EngineUnsupported` when used, never the whole engine.
pub fn engines() -> Vec<EngineReport> {
    let mpi = mpi::loaded().map(|l| l.version.clone()).map_err(|e| e.to_string());
    let mpi = mpi.and_then(|version| match mpi::launch_problem(|v| std::env::var(v).ok()) {
        None => Ok(version),
        Some(problem) => Err(format!("{version} found, but {problem}")),
    });
    let mut out = vec![EngineReport { name: mpi::ENGINE, status: mpi, lacks: Vec::new() }];
    for flavour in nccl::Flavour::ALL {
        let name = flavour.name();
        out.push(match nccl::loaded(flavour) {
            Ok(found) => EngineReport {
                name,
                status: Ok(format!("{} at {}", found.version_line, found.library)),
                lacks: found.lacks(),
            },
            Err(e) => EngineReport { name, status: Err(e.to_string()), lacks: Vec::new() },
        });
    }
    out
}
