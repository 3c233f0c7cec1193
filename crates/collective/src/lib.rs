//! # gpuport-collective
//!
//! Collectives across processes and machines for gpuport arrays: one [`Communicator`] —
//! `all_reduce`, `broadcast`, `reduce`, `all_gather`, `reduce_scatter`, `all_to_all`,
//! `send`/`recv`, `barrier`, `split`, `dup` — queued on gpuport streams like any other
//! work. Its engine is the one the field uses: MPI, loaded at run time through the MPI 5.0
//! standard ABI (`libmpi_abi.so.1`, as MPICH 5 and the PyPI `mpich` wheel ship it), so
//! nothing of MPI is needed at build time and a missing MPI is a reason
//! ([`engines`]), never a crash. Re-exported by `gpuport` as `gpuport::collective`.
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

mod call;
mod check;
mod communicator;
mod library;
mod mpi;
mod nccl;
mod op;
mod search;
mod work;

pub use check::CHECK_ENV;
pub use communicator::Communicator;
pub use mpi::{LIBRARY_ENV, SINGLETON_ENV};
pub use nccl::{NCCL_LIBRARY_ENV, RCCL_LIBRARY_ENV};
pub use op::ReduceOp;
pub use search::add_search_dir;
pub use work::Work;

/// A collectives engine as this process finds it: its version, or why it cannot be used.
#[derive(Debug, Clone)]
pub struct EngineReport {
    /// The engine (`MPI`, `NCCL`, `RCCL`).
    pub name: &'static str,
    /// Its library's version line, or why it is unavailable.
    pub status: Result<String, String>,
    /// What the library found lacks, each feature with the version that has it (NCCL and
    /// RCCL: their features arrive with their versions); empty when nothing was found.
    pub lacks: Vec<String>,
}

/// Every collectives engine gpuport knows, as this process finds it (loading, not
/// initialising: listing them starts no MPI and touches no GPU).
///
/// NCCL and RCCL are found and read (version, path, what the version lacks) but are
/// unavailable to gpuport's communicators, which run on MPI; their reason says so.
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
                status: Err(format!(
                    "{name} {} found at {}, but gpuport's communicators do not run on it: they run on MPI",
                    found.version, found.library
                )),
                lacks: found.lacks(),
            },
            Err(e) => EngineReport { name, status: Err(e.to_string()), lacks: Vec::new() },
        });
    }
    out
}
