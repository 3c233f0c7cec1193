//! [`Communicator`]: a group of ranks and the collectives over them, each queued on a
//! gpuport stream like any other work — on MPI, or on NCCL or RCCL — and the checks every
//! engine shares.

use std::sync::Arc;

use gpuport_core::{Error, Result};
use gpuport_runtime::{AnyDevice, AnyStream, Array};

use crate::mpi::communicator::MpiComm;
use crate::nccl::comm::NcclComm;
use crate::op::ReduceOp;
use crate::work::Work;
use crate::UniqueId;

/// A group of ranks and the collectives over them. Cloning shares it; the last clone frees
/// it (never MPI's world).
///
/// Two kinds of engine carry it:
/// - **MPI** ([`Communicator::world`], then [`dup`](Communicator::dup) and
///   [`split`](Communicator::split)): one rank per process, on any device's arrays —
///   memory the host cannot reach (a GPU's) is staged through pinned host memory of its
///   device on the same stream, two copies more, at the bus's speed.
/// - **NCCL** on CUDA devices and **RCCL** on ROCm devices ([`Communicator::init_all`]
///   for several devices of this process, [`Communicator::init_rank`] for one rank per
///   thread or process with a shared [`UniqueId`], [`Communicator::for_device`] for an MPI
///   communicator's ranks): one rank per device, the collectives running on the device on
///   the rank's stream. The arrays must be that device's memory (another
///   device's or vendor's is `BackendMismatch`, host memory `InvalidArgument`). One thread driving
///   several ranks issues their collectives inside a [`group`](crate::group). Each
///   collective is followed by a watchdog until it has ended: its buffers and the
///   communicator are kept alive until then, and a collective the communicator reports an
///   error for, or one that outlives `GPUPORT_COLLECTIVE_TIMEOUT`, aborts the communicator
///   (`ncclCommAbort`) and fails its [`Work`] naming the collective, the rank and the
///   cause.
///
/// Every collective takes gpuport arrays, checks them on the calling rank before anything
/// is sent (dtype, contiguity, sizes, ranks), and is queued on a stream — `stream`, or the
/// legacy default stream of the first array's device (NCCL, RCCL: of the rank's device)
/// when `None` — so it starts after the work queued there before it, later work there
/// waits for it, and the arrays' pending work orders it against other streams (it is
/// recorded as a read of its inputs and a write of its outputs). It returns a [`Work`].
/// Arrays must be contiguous (a strided view is refused: copy it first).
#[derive(Clone)]
pub struct Communicator {
    engine: Engine,
}

#[derive(Clone)]
enum Engine {
    Mpi(MpiComm),
    Nccl(Arc<NcclComm>),
}

impl Communicator {
    /// Every rank of the job (`MPI_COMM_WORLD`), MPI initialised on first use — or joined,
    /// when the process initialised it already (it is then left for its owner to finalise).
    /// `EngineUnavailable` names why not: no MPI standard-ABI library, or a process no
    /// launcher started.
    pub fn world() -> Result<Communicator> {
        Ok(Communicator { engine: Engine::Mpi(MpiComm::world()?) })
    }

    /// One communicator over `devices`, driven by this process: one rank per device, in
    /// their order (`ncclCommInitAll`) — NCCL for CUDA devices, RCCL for ROCm devices. The
    /// devices are of one backend, each named once; a backend without such an engine is
    /// `BackendMismatch`, a missing engine `EngineUnavailable` with its reason.
    ///
    /// One thread driving several of the returned ranks issues their collectives inside a
    /// [`group`](crate::group): NCCL waits in each rank's call for the others.
    pub fn init_all(devices: &[AnyDevice]) -> Result<Vec<Communicator>> {
        Ok(NcclComm::init_all(devices)?.into_iter().map(Communicator::nccl).collect())
    }

    /// Rank `rank` of `size` on `device`, one rank per call — from a thread of this
    /// process or from another process, each passing the same `id` (made by one of them:
    /// [`UniqueId`]) — on NCCL for a CUDA device, RCCL for a ROCm device. Returns once every
    /// rank has joined; ranks that have not all joined within `GPUPORT_COLLECTIVE_TIMEOUT`
    /// end the attempt with an error (the communicator is non-blocking, as NCCL 2.14 and
    /// later make it, so its start and its launches can be aborted rather than hang). An
    /// engine older than 2.14 is `EngineUnsupported`.
    ///
    /// ```no_run
    /// # fn main() -> gpuport_core::Result<()> {
    /// use gpuport_collective::{Communicator, UniqueId};
    /// let rt = gpuport_runtime::Runtime::discover();
    /// let devices = [rt.device("cuda:0")?, rt.device("cuda:1")?];
    /// let id = UniqueId::new(&devices[0])?;
    /// let comms = std::thread::scope(|s| {
    ///     let ranks: Vec<_> =
    ///         devices.iter().enumerate().map(|(r, d)| s.spawn(move || Communicator::init_rank(d, &id, 2, r))).collect();
    ///     ranks.into_iter().map(|r| r.join().expect("a rank's thread")).collect::<gpuport_core::Result<Vec<_>>>()
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn init_rank(device: &AnyDevice, id: &UniqueId, size: usize, rank: usize) -> Result<Communicator> {
        NcclComm::init_rank(device, id.as_bytes(), size, rank).map(Communicator::nccl)
    }

    /// This MPI communicator's ranks, in its order, on NCCL (CUDA) or RCCL (ROCm): each rank
    /// passes its own `device` — as a job launched with `mpiexec` and one GPU per process
    /// starts its GPU collectives. Rank 0 makes the [`UniqueId`] and broadcasts it over
    /// this communicator; then [`Communicator::init_rank`]. Collective: every rank calls
    /// it. A rank 0 that cannot make the id fails every rank with its reason.
    pub fn for_device(&self, device: &AnyDevice) -> Result<Communicator> {
        let mpi = self.mpi("for_device")?;
        // Rank 0's id, or why it has none: [1, id…] or [0, reason…].
        let mut message = [0u8; 1 + UniqueId::BYTES];
        if mpi.rank() == 0 {
            match UniqueId::new(device) {
                Ok(id) => {
                    message[0] = 1;
                    message[1..].copy_from_slice(id.as_bytes());
                }
                Err(e) => {
                    let why = e.to_string();
                    let n = why.len().min(UniqueId::BYTES);
                    message[1..1 + n].copy_from_slice(&why.as_bytes()[..n]);
                }
            }
        }
        mpi.broadcast_bytes(&mut message, 0)?;
        if message[0] != 1 {
            let why = String::from_utf8_lossy(&message[1..]).trim_end_matches('\0').to_owned();
            return Err(Error::Collective {
                engine: crate::mpi::ENGINE,
                call: "Communicator::for_device",
                code: 0,
                message: format!("rank 0 could not make the unique id: {why}"),
            });
        }
        let id = UniqueId::from_bytes(&message[1..])?;
        Communicator::init_rank(device, &id, mpi.size(), mpi.rank())
    }

    /// This rank, from 0.
    pub fn rank(&self) -> usize {
        match &self.engine {
            Engine::Mpi(m) => m.rank(),
            Engine::Nccl(n) => n.rank,
        }
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        match &self.engine {
            Engine::Mpi(m) => m.size(),
            Engine::Nccl(n) => n.size,
        }
    }

    /// The engine's name (`MPI`, `NCCL`, `RCCL`).
    pub fn engine(&self) -> &'static str {
        match &self.engine {
            Engine::Mpi(_) => crate::mpi::ENGINE,
            Engine::Nccl(n) => n.loaded.flavour.name(),
        }
    }

    /// The engine library's version line (NCCL and RCCL: the NCCL API version they report).
    pub fn engine_version(&self) -> &str {
        match &self.engine {
            Engine::Mpi(m) => m.engine_version(),
            Engine::Nccl(n) => &n.loaded.version_line,
        }
    }

    /// Where the engine's library was found.
    pub fn engine_library(&self) -> &str {
        match &self.engine {
            Engine::Mpi(m) => m.engine_library(),
            Engine::Nccl(n) => &n.loaded.library,
        }
    }

    /// The device of this rank (NCCL, RCCL); `None` on MPI, whose ranks take any device's
    /// arrays.
    pub fn device(&self) -> Option<&AnyDevice> {
        match &self.engine {
            Engine::Mpi(_) => None,
            Engine::Nccl(n) => Some(&n.device),
        }
    }

    fn mpi(&self, what: &str) -> Result<&MpiComm> {
        match &self.engine {
            Engine::Mpi(m) => Ok(m),
            Engine::Nccl(n) => Err(Error::EngineUnsupported {
                engine: n.loaded.flavour.name(),
                what: format!("{what} (gpuport drives it on MPI communicators only)"),
            }),
        }
    }

    /// A communicator of the same ranks whose traffic never mixes with this one's
    /// (`MPI_Comm_dup`; on NCCL and RCCL a split with one color, ranked as here).
    /// Collective: every rank calls it.
    pub fn dup(&self) -> Result<Communicator> {
        match &self.engine {
            Engine::Mpi(m) => Ok(Communicator { engine: Engine::Mpi(m.dup()?) }),
            Engine::Nccl(_) => {
                let key = i32::try_from(self.rank()).map_err(|_| Error::invalid_argument("a rank past i32"))?;
                let made = self.split(Some(0), key)?;
                made.ok_or_else(|| Error::invalid_argument("dup: the engine made no communicator"))
            }
        }
    }

    /// The ranks that pass the same `color` form a new communicator, ordered by `key` (then
    /// by rank here); a rank passing `None` joins none and gets `None` (`MPI_Comm_split`;
    /// `ncclCommSplit` from NCCL 2.18, the new communicator non-blocking like
    /// [`Communicator::init_rank`]'s). Collective: every rank calls it — on NCCL and RCCL,
    /// one thread driving several ranks splits them together with
    /// [`Communicator::split_all`], and never inside a [`group`](crate::group).
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>> {
        match &self.engine {
            Engine::Mpi(m) => Ok(m.split(color, key)?.map(|m| Communicator { engine: Engine::Mpi(m) })),
            Engine::Nccl(n) => Ok(NcclComm::split_all(&[n], &[(color, key)])?.pop().flatten().map(Communicator::nccl)),
        }
    }

    /// Splits several ranks of one NCCL or RCCL communicator that this thread drives (as
    /// [`Communicator::init_all`] makes them) together, `how[i]` being `comms[i]`'s color and
    /// key as [`Communicator::split`] takes them: each rank's new communicator, or `None`.
    /// MPI's ranks are processes, each calling [`Communicator::split`] itself:
    /// `InvalidArgument` here.
    pub fn split_all(comms: &[Communicator], how: &[(Option<u32>, i32)]) -> Result<Vec<Option<Communicator>>> {
        let parents = comms
            .iter()
            .map(|c| match &c.engine {
                Engine::Nccl(n) => Ok(&**n),
                Engine::Mpi(_) => Err(Error::invalid_argument(
                    "Communicator::split_all takes NCCL or RCCL ranks: each MPI rank is a process that calls split",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        let made = NcclComm::split_all(&parents, how)?;
        Ok(made.into_iter().map(|m| m.map(Communicator::nccl)).collect())
    }

    fn nccl(comm: NcclComm) -> Communicator {
        Communicator { engine: Engine::Nccl(Arc::new(comm)) }
    }

    /// Blocks until every rank has called it (`MPI_Ibarrier`, waited for under the
    /// watchdog), on the calling thread. MPI only: on NCCL and RCCL, `all_reduce` a
    /// one-element array and wait for it, as their users do.
    pub fn barrier(&self) -> Result<()> {
        self.mpi("barrier")?.barrier()
    }

    /// `x` reduced over every rank, into `out` — or into `x` itself when `out` is `None`.
    pub fn all_reduce(&self, x: &Array, op: ReduceOp, out: Option<&Array>, stream: Option<&AnyStream>) -> Result<Work> {
        if let Some(out) = out {
            same_shape("all_reduce", x, out)?;
        }
        match &self.engine {
            Engine::Mpi(m) => m.all_reduce(x, op, out, stream),
            Engine::Nccl(n) => crate::nccl::collective::all_reduce(n, x, op, out, stream),
        }
    }

    /// `x` of rank `root` copied into `x` on every rank.
    pub fn broadcast(&self, x: &Array, root: usize, stream: Option<&AnyStream>) -> Result<Work> {
        self.check_rank("broadcast", "root", root)?;
        match &self.engine {
            Engine::Mpi(m) => m.broadcast(x, root, stream),
            Engine::Nccl(n) => crate::nccl::collective::broadcast(n, x, root, stream),
        }
    }

    /// `x` reduced over every rank into rank `root`'s `out` — or its `x` when `out` is
    /// `None`; `out` is not used on the other ranks.
    pub fn reduce(
        &self,
        x: &Array,
        op: ReduceOp,
        root: usize,
        out: Option<&Array>,
        stream: Option<&AnyStream>,
    ) -> Result<Work> {
        self.check_rank("reduce", "root", root)?;
        let out = out.filter(|_| self.rank() == root);
        if let Some(out) = out {
            same_shape("reduce", x, out)?;
        }
        match &self.engine {
            Engine::Mpi(m) => m.reduce(x, op, root, out, stream),
            Engine::Nccl(n) => crate::nccl::collective::reduce(n, x, op, root, out, stream),
        }
    }

    /// Every rank's `x`, in rank order, into `out` (`size` times `x`'s elements).
    pub fn all_gather(&self, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
        same_dtype("all_gather", x, out)?;
        self.expect_elements("all_gather", "out", out, x.numel() * self.size())?;
        match &self.engine {
            Engine::Mpi(m) => m.all_gather(x, out, stream),
            Engine::Nccl(n) => crate::nccl::collective::all_gather(n, x, out, stream),
        }
    }

    /// `x` (`size` blocks of `out`'s elements) reduced over every rank; block `r` of the
    /// result into rank `r`'s `out`.
    pub fn reduce_scatter(&self, x: &Array, op: ReduceOp, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
        same_dtype("reduce_scatter", x, out)?;
        self.expect_elements("reduce_scatter", "x", x, out.numel() * self.size())?;
        match &self.engine {
            Engine::Mpi(m) => m.reduce_scatter(x, op, out, stream),
            Engine::Nccl(n) => crate::nccl::collective::reduce_scatter(n, x, op, out, stream),
        }
    }

    /// Block `r` of `x` (`size` equal blocks) to rank `r`, which puts it at block `rank` of
    /// its `out` (as many elements as `x`).
    pub fn all_to_all(&self, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
        same_dtype("all_to_all", x, out)?;
        self.expect_elements("all_to_all", "out", out, x.numel())?;
        if !x.numel().is_multiple_of(self.size()) {
            return Err(Error::invalid_argument(format!(
                "all_to_all: x has {} elements, not a multiple of the {} ranks",
                x.numel(),
                self.size()
            )));
        }
        match &self.engine {
            Engine::Mpi(m) => m.all_to_all(x, out, stream),
            Engine::Nccl(n) => crate::nccl::collective::all_to_all(n, x, out, stream),
        }
    }

    /// `x` to rank `dst`, matched by the `recv` there with the same `tag`. NCCL and RCCL
    /// match messages between two ranks in the order they are issued and take no tags: only
    /// tag 0 there.
    pub fn send(&self, x: &Array, dst: usize, tag: u16, stream: Option<&AnyStream>) -> Result<Work> {
        self.check_rank("send", "dst", dst)?;
        match &self.engine {
            Engine::Mpi(m) => m.send(x, dst, tag, stream),
            Engine::Nccl(n) => crate::nccl::collective::message(n, true, x, dst, tag, stream),
        }
    }

    /// Into `x`, what rank `src` sends with the same `tag` (exactly `x`'s elements).
    pub fn recv(&self, x: &Array, src: usize, tag: u16, stream: Option<&AnyStream>) -> Result<Work> {
        self.check_rank("recv", "src", src)?;
        match &self.engine {
            Engine::Mpi(m) => m.recv(x, src, tag, stream),
            Engine::Nccl(n) => crate::nccl::collective::message(n, false, x, src, tag, stream),
        }
    }

    fn check_rank(&self, what: &str, name: &str, rank: usize) -> Result<()> {
        if rank >= self.size() {
            return Err(Error::invalid_argument(format!(
                "{what}: {name} {rank} is not a rank of this communicator (its ranks are 0 to {})",
                self.size() - 1
            )));
        }
        Ok(())
    }

    fn expect_elements(&self, what: &str, name: &str, array: &Array, want: usize) -> Result<()> {
        if array.numel() != want {
            return Err(Error::invalid_argument(format!(
                "{what}: {name} has {} elements; {} ranks need {want}",
                array.numel(),
                self.size()
            )));
        }
        Ok(())
    }
}

fn same_dtype(what: &str, x: &Array, out: &Array) -> Result<()> {
    if x.dtype() != out.dtype() {
        return Err(Error::invalid_argument(format!("{what}: x is {} but out is {}", x.dtype(), out.dtype())));
    }
    Ok(())
}

fn same_shape(what: &str, x: &Array, out: &Array) -> Result<()> {
    same_dtype(what, x, out)?;
    if x.shape() != out.shape() {
        return Err(Error::invalid_argument(format!("{what}: x has shape {:?} but out {:?}", x.shape(), out.shape())));
    }
    Ok(())
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Communicator(rank {} of {}, {})", self.rank(), self.size(), self.engine())
    }
}
