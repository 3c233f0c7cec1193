//! [`MpiComm`]: a [`Communicator`](crate::Communicator) on MPI — the calls, the staging of
//! memory the host cannot reach, the hand-off of each call to its stream, and the shortcut
//! for a collective the stream would run at once.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{DType, DefaultStream, Error, EventFlags, Result};
use gpuport_runtime::{Access, AnyStream, Array, Buffer};

use super::call::Call;
use crate::mpi::{abi, Mpi, ENGINE};
use crate::op::ReduceOp;
use crate::operands::{check_arrays, Role};
use crate::work::Work;

/// An MPI communicator: the world, or one made from it by [`MpiComm::dup`] or
/// [`MpiComm::split`]. Cloning shares it; the last clone frees it (never the world).
#[derive(Clone)]
pub(crate) struct MpiComm {
    inner: Arc<Inner>,
}

struct Inner {
    mpi: Arc<Mpi>,
    /// The `MPI_Comm` handle, as an address.
    comm: usize,
    rank: i32,
    size: i32,
    /// Freed when the last clone drops (not the world).
    owned: bool,
    /// The consistency check's own communicator (`GPUPORT_COLLECTIVE_CHECK=1`).
    check: Option<super::check::Check>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut made: Vec<usize> = self.check.as_ref().map(|c| c.comm).into_iter().collect();
        if self.owned {
            made.push(self.comm);
        }
        if made.is_empty() || self.mpi.finalized() {
            return;
        }
        let mpi = self.mpi.clone();
        let free = move || {
            for comm in made {
                let mut handle = comm as abi::Comm;
                // SAFETY: a communicator gpuport made and frees once, here.
                if let Err(e) = mpi.call("MPI_Comm_free", |api| unsafe { (api.comm_free)(&mut handle) }) {
                    log::warn!("freeing an MPI communicator: {e}");
                }
            }
        };
        // Never on a stream worker or driver thread (work queued there may hold the last
        // clone): the release thread frees it.
        if gpuport_core::release::on_restricted_thread() {
            gpuport_core::release::defer(Box::new(free));
        } else {
            free();
        }
    }
}

/// What a rank is about to do, for the consistency check.
struct Intent {
    what: &'static str,
    /// Compared across ranks (collectives; not point-to-point calls, where ranks differ).
    checked: bool,
    op: Option<ReduceOp>,
    dtype: Option<DType>,
    count: usize,
    root: Option<usize>,
}

impl Intent {
    fn collective(what: &'static str, op: Option<ReduceOp>, x: &Array, root: Option<usize>) -> Intent {
        Intent { what, checked: true, op, dtype: Some(x.dtype()), count: x.numel(), root }
    }

    fn point_to_point(what: &'static str) -> Intent {
        Intent { what, checked: false, op: None, dtype: None, count: 0, root: None }
    }

    fn signature(&self, seq: u64) -> super::check::Signature {
        super::check::Signature {
            seq,
            what: self.what,
            op: self.op,
            dtype: self.dtype,
            count: self.count,
            root: self.root,
        }
    }
}

/// Host-accessible bytes the engine reads or writes: the array's own, or a pinned stage.
struct Region {
    buffer: Buffer,
    offset: usize,
    len: usize,
}

impl Region {
    fn ptr(&self) -> Result<*mut u8> {
        self.buffer.host_ptr(self.offset, self.len)
    }
}

impl MpiComm {
    /// Every rank of the job (`MPI_COMM_WORLD`), MPI initialised on first use — or joined,
    /// when the process initialised it already (it is then left for its owner to finalise).
    /// `EngineUnavailable` names why not: no MPI standard-ABI library, or a process no
    /// launcher started.
    pub(crate) fn world() -> Result<MpiComm> {
        let mpi = Mpi::get()?;
        Self::wrap(mpi, abi::COMM_WORLD, false)
    }

    fn wrap(mpi: Arc<Mpi>, comm: usize, owned: bool) -> Result<MpiComm> {
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: a live communicator and valid out-pointers.
        mpi.call("MPI_Comm_rank", |api| unsafe { (api.comm_rank)(comm as abi::Comm, &mut rank) })?;
        // SAFETY: as above.
        mpi.call("MPI_Comm_size", |api| unsafe { (api.comm_size)(comm as abi::Comm, &mut size) })?;
        let check = super::check::enabled().then(|| super::check::Check::new(&mpi, comm)).transpose()?;
        Ok(MpiComm { inner: Arc::new(Inner { mpi, comm, rank, size, owned, check }) })
    }

    /// This process's rank, from 0.
    pub(crate) fn rank(&self) -> usize {
        self.inner.rank as usize
    }

    /// The number of ranks.
    pub(crate) fn size(&self) -> usize {
        self.inner.size as usize
    }

    /// The library's version line.
    pub(crate) fn engine_version(&self) -> &str {
        self.inner.mpi.version()
    }

    /// Where the library was found.
    pub(crate) fn engine_library(&self) -> &str {
        self.inner.mpi.library()
    }

    /// A communicator of the same ranks whose traffic never mixes with this one's
    /// (`MPI_Comm_dup`). Collective: every rank calls it.
    pub(crate) fn dup(&self) -> Result<MpiComm> {
        let mut out: abi::Comm = std::ptr::null_mut();
        // SAFETY: a live communicator and a valid out-pointer.
        self.inner.mpi.call("MPI_Comm_dup", |api| unsafe { (api.comm_dup)(self.handle(), &mut out) })?;
        Self::wrap(self.inner.mpi.clone(), out as usize, true)
    }

    /// The ranks that pass the same `color` form a new communicator, ordered by `key` (then
    /// by rank here); a rank passing `None` joins none and gets `None` (`MPI_Comm_split`).
    /// Collective: every rank calls it.
    pub(crate) fn split(&self, color: Option<u32>, key: i32) -> Result<Option<MpiComm>> {
        let color = match color {
            None => abi::UNDEFINED,
            Some(c) => c_int::try_from(c)
                .map_err(|_| Error::invalid_argument(format!("split color {c} is past {}", c_int::MAX)))?,
        };
        let mut out: abi::Comm = std::ptr::null_mut();
        self.inner.mpi.call("MPI_Comm_split", |api| {
            // SAFETY: a live communicator and a valid out-pointer.
            unsafe { (api.comm_split)(self.handle(), color, key, &mut out) }
        })?;
        if out as usize == abi::COMM_NULL {
            return Ok(None);
        }
        Self::wrap(self.inner.mpi.clone(), out as usize, true).map(Some)
    }

    /// Blocks until every rank has called it (`MPI_Ibarrier`, waited for under the
    /// watchdog), on the calling thread.
    pub(crate) fn barrier(&self) -> Result<()> {
        let what = || format!("barrier on rank {} of {}", self.rank(), self.size());
        // SAFETY: a live communicator and the request to fill.
        self.inner.mpi.call_waiting("MPI_Ibarrier", what, |api, req| unsafe { (api.barrier)(self.handle(), req) })
    }

    /// Rank `root`'s `bytes` on every rank (`MPI_Ibcast`, waited for under the watchdog),
    /// on the calling thread: how a communicator's setup travels (an NCCL unique id).
    /// Collective: every rank calls it, with as many bytes.
    pub(crate) fn broadcast_bytes(&self, bytes: &mut [u8], root: usize) -> Result<()> {
        let count = abi::Count::try_from(bytes.len()).map_err(|_| Error::invalid_argument("too many bytes"))?;
        let root = c_int::try_from(root).map_err(|_| Error::invalid_argument(format!("root {root}")))?;
        let uint8 = abi::predefined(abi::datatype(DType::U8).unwrap_or(0x241));
        let what = || format!("a broadcast of setup data on rank {} of {}", self.rank(), self.size());
        // SAFETY: `bytes` holds `count` bytes and outlives the wait; a live communicator.
        self.inner.mpi.call_waiting("MPI_Ibcast_c", what, |api, req| unsafe {
            (api.bcast)(bytes.as_mut_ptr().cast(), count, uint8, root, self.handle(), req)
        })
    }

    fn handle(&self) -> abi::Comm {
        self.inner.comm as abi::Comm
    }

    /// `x` reduced over every rank, into `out` — or into `x` itself when `out` is `None`.
    pub(crate) fn all_reduce(
        &self,
        x: &Array,
        op: ReduceOp,
        out: Option<&Array>,
        stream: Option<&AnyStream>,
    ) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let mpi_op = self.op(op, x.dtype())?;
        let count = x.numel() as abi::Count;
        match out {
            None => self.queue(
                Intent::collective("all_reduce", Some(op), x, None),
                &[(x, Role::InOut)],
                stream,
                move |api, comm, p, req| {
                    // SAFETY: `p[0]` holds `count` elements of `dt`, read and written in place.
                    unsafe {
                        (api.allreduce)(abi::predefined(abi::IN_PLACE), p[0].cast(), count, h(dt), h(mpi_op), comm, req)
                    }
                },
            ),
            Some(out) => self.queue(
                Intent::collective("all_reduce", Some(op), x, None),
                &[(x, Role::In), (out, Role::Out)],
                stream,
                move |api, comm, p, req| {
                    // SAFETY: `p[0]` and `p[1]` each hold `count` elements of `dt`.
                    unsafe { (api.allreduce)(p[0].cast(), p[1].cast(), count, h(dt), h(mpi_op), comm, req) }
                },
            ),
        }
    }

    /// `x` of rank `root` copied into `x` on every rank.
    pub(crate) fn broadcast(&self, x: &Array, root: usize, stream: Option<&AnyStream>) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let root = root as c_int;
        let count = x.numel() as abi::Count;
        let role = if self.rank() == root as usize { Role::In } else { Role::Out };
        self.queue(
            Intent::collective("broadcast", None, x, Some(root as usize)),
            &[(x, role)],
            stream,
            move |api, comm, p, req| {
                // SAFETY: `p[0]` holds `count` elements of `dt`.
                unsafe { (api.bcast)(p[0].cast(), count, h(dt), root, comm, req) }
            },
        )
    }

    /// `x` reduced over every rank into rank `root`'s `out` — or its `x` when `out` is
    /// `None`; `out` is not used on the other ranks.
    pub(crate) fn reduce(
        &self,
        x: &Array,
        op: ReduceOp,
        root: usize,
        out: Option<&Array>,
        stream: Option<&AnyStream>,
    ) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let mpi_op = self.op(op, x.dtype())?;
        let root = root as c_int;
        let count = x.numel() as abi::Count;
        let at_root = self.rank() == root as usize;
        match out.filter(|_| at_root) {
            Some(out) => self.queue(
                Intent::collective("reduce", Some(op), x, Some(root as usize)),
                &[(x, Role::In), (out, Role::Out)],
                stream,
                move |api, comm, p, req| {
                    // SAFETY: `p[0]` and `p[1]` each hold `count` elements of `dt`.
                    unsafe { (api.reduce)(p[0].cast(), p[1].cast(), count, h(dt), h(mpi_op), root, comm, req) }
                },
            ),
            None if at_root => self.queue(
                Intent::collective("reduce", Some(op), x, Some(root as usize)),
                &[(x, Role::InOut)],
                stream,
                move |api, comm, p, req| {
                    // SAFETY: `p[0]` holds `count` elements of `dt`, reduced in place.
                    unsafe {
                        (api.reduce)(
                            abi::predefined(abi::IN_PLACE),
                            p[0].cast(),
                            count,
                            h(dt),
                            h(mpi_op),
                            root,
                            comm,
                            req,
                        )
                    }
                },
            ),
            None => self.queue(
                Intent::collective("reduce", Some(op), x, Some(root as usize)),
                &[(x, Role::In)],
                stream,
                move |api, comm, p, req| {
                    // SAFETY: `p[0]` holds `count` elements of `dt`; the receive buffer is not
                    // used away from the root.
                    unsafe { (api.reduce)(p[0].cast(), std::ptr::null_mut(), count, h(dt), h(mpi_op), root, comm, req) }
                },
            ),
        }
    }

    /// Every rank's `x`, in rank order, into `out` (`size` times `x`'s elements).
    pub(crate) fn all_gather(&self, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let count = x.numel() as abi::Count;
        self.queue(
            Intent::collective("all_gather", None, x, None),
            &[(x, Role::In), (out, Role::Out)],
            stream,
            move |api, comm, p, req| {
                // SAFETY: `p[0]` holds `count` elements of `dt`, `p[1]` `size` times that.
                unsafe { (api.allgather)(p[0].cast(), count, h(dt), p[1].cast(), count, h(dt), comm, req) }
            },
        )
    }

    /// `x` (`size` blocks of `out`'s elements) reduced over every rank; block `r` of the
    /// result into rank `r`'s `out`.
    pub(crate) fn reduce_scatter(
        &self,
        x: &Array,
        op: ReduceOp,
        out: &Array,
        stream: Option<&AnyStream>,
    ) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let mpi_op = self.op(op, x.dtype())?;
        let count = out.numel() as abi::Count;
        self.queue(
            Intent::collective("reduce_scatter", Some(op), x, None),
            &[(x, Role::In), (out, Role::Out)],
            stream,
            move |api, comm, p, req| {
                // SAFETY: `p[0]` holds `size × count` elements of `dt`, `p[1]` `count`.
                unsafe { (api.reduce_scatter_block)(p[0].cast(), p[1].cast(), count, h(dt), h(mpi_op), comm, req) }
            },
        )
    }

    /// Block `r` of `x` (`size` equal blocks) to rank `r`, which puts it at block `rank` of
    /// its `out` (as many elements as `x`).
    pub(crate) fn all_to_all(&self, x: &Array, out: &Array, stream: Option<&AnyStream>) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let block = (x.numel() / self.size()) as abi::Count;
        self.queue(
            Intent::collective("all_to_all", None, x, None),
            &[(x, Role::In), (out, Role::Out)],
            stream,
            move |api, comm, p, req| {
                // SAFETY: `p[0]` and `p[1]` each hold `size × block` elements of `dt`.
                unsafe { (api.alltoall)(p[0].cast(), block, h(dt), p[1].cast(), block, h(dt), comm, req) }
            },
        )
    }

    /// `x` to rank `dst`, matched by the `recv` there with the same `tag`.
    pub(crate) fn send(&self, x: &Array, dst: usize, tag: u16, stream: Option<&AnyStream>) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let dst = dst as c_int;
        let count = x.numel() as abi::Count;
        self.queue(Intent::point_to_point("send"), &[(x, Role::In)], stream, move |api, comm, p, req| {
            // SAFETY: `p[0]` holds `count` elements of `dt`.
            unsafe { (api.send)(p[0].cast(), count, h(dt), dst, c_int::from(tag), comm, req) }
        })
    }

    /// Into `x`, what rank `src` sends with the same `tag` (exactly `x`'s elements).
    pub(crate) fn recv(&self, x: &Array, src: usize, tag: u16, stream: Option<&AnyStream>) -> Result<Work> {
        let dt = self.datatype(x.dtype())?;
        let src = src as c_int;
        let count = x.numel() as abi::Count;
        self.queue(Intent::point_to_point("recv"), &[(x, Role::Out)], stream, move |api, comm, p, req| {
            // SAFETY: `p[0]` has room for `count` elements of `dt`.
            unsafe { (api.recv)(p[0].cast(), count, h(dt), src, c_int::from(tag), comm, req) }
        })
    }

    /// The engine's datatype for `dtype`, or `Unsupported` naming both.
    /// (A handle's value: handles cross to the stream worker as plain numbers.)
    fn datatype(&self, dtype: DType) -> Result<usize> {
        abi::datatype(dtype).ok_or_else(|| unsupported(format!("{dtype} arrays")))
    }

    /// The engine's operation for `op` on `dtype`.
    fn op(&self, op: ReduceOp, dtype: DType) -> Result<usize> {
        use gpuport_core::DTypeCode;
        let code = dtype.code();
        let value = match (op, code) {
            (ReduceOp::Avg, _) => return Err(unsupported("ReduceOp::Avg (MPI has no mean; sum and divide)".into())),
            (ReduceOp::Min | ReduceOp::Max, DTypeCode::Complex) => {
                return Err(unsupported(format!("ReduceOp::{op:?} on {dtype} arrays (complex numbers have no order)")))
            }
            (ReduceOp::Sum | ReduceOp::Prod, DTypeCode::Bool) => {
                return Err(unsupported(format!("ReduceOp::{op:?} on {dtype} arrays (use Max for or, Min for and)")))
            }
            (ReduceOp::Min, DTypeCode::Bool) => abi::LAND,
            (ReduceOp::Max, DTypeCode::Bool) => abi::LOR,
            (ReduceOp::Sum, _) => abi::SUM,
            (ReduceOp::Prod, _) => abi::PROD,
            (ReduceOp::Min, _) => abi::MIN,
            (ReduceOp::Max, _) => abi::MAX,
        };
        Ok(value)
    }

    /// Queues `call` on the stream after the arrays' pending work, with each array's bytes
    /// where the host reaches them (staged through pinned memory otherwise), and records it
    /// as their reader or writer.
    fn queue(
        &self,
        intent: Intent,
        arrays: &[(&Array, Role)],
        stream: Option<&AnyStream>,
        call: impl FnOnce(&crate::mpi::Api, abi::Comm, &[*mut u8], *mut abi::Request) -> c_int + Send + 'static,
    ) -> Result<Work> {
        let what = intent.what;
        let first = arrays.first().map(|(a, _)| *a).ok_or_else(|| Error::invalid_argument("no array"))?;
        let owned;
        let stream = match stream {
            Some(s) => s,
            None => {
                owned = first.device().default_stream(DefaultStream::Legacy)?;
                &owned
            }
        };
        let device =
            arrays.iter().map(|(a, _)| a.device()).find(|d| d.id() == stream.device_id()).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{what}: the stream is on {}, none of the arrays is",
                    stream.device_id()
                ))
            })?;
        check_arrays(ENGINE, what, arrays)?;
        for (a, _) in arrays {
            if !a.buffer().is_host_accessible() && a.device_id() != stream.device_id() {
                return Err(Error::invalid_argument(format!(
                    "{what}: an array on {} is queued on a stream of {}: a device array's collective runs on its \
                     own device's stream",
                    a.device_id(),
                    stream.device_id()
                )));
            }
        }
        let mut call = Some(call);
        if let Some(work) = self.run_at_once(what, arrays, stream, device, &mut call) {
            return work;
        }
        let call = call.ok_or_else(|| Error::invalid_argument(format!("{what}: started, yet not finished")))?;
        for (a, role) in arrays {
            let access = if *role == Role::In { Access::Read } else { Access::Write };
            a.wait_pending(stream, access)?;
        }
        // The bytes the engine sees: the arrays' own, or pinned stages filled on the stream.
        let mut regions = Vec::with_capacity(arrays.len());
        let mut staged = Vec::new();
        for (a, role) in arrays {
            let len = a.nbytes();
            if a.buffer().is_host_accessible() {
                regions.push(Region { buffer: a.buffer().clone(), offset: a.byte_offset(), len });
                continue;
            }
            let stage = a.device().alloc_pinned(len, Default::default())?;
            if *role != Role::Out {
                stream.copy(a.buffer(), a.byte_offset(), &stage, 0, len)?;
            }
            if *role != Role::In {
                staged.push((a, stage.clone()));
            }
            regions.push(Region { buffer: stage, offset: 0, len });
        }
        let call_state = self.new_call(what);
        let (mpi, comm, state) = (self.inner.mpi.clone(), self.inner.comm, call_state.clone());
        // The check's signature is numbered when the collective is queued: the order every
        // rank must issue them in.
        let signature = match (&self.inner.check, intent.checked) {
            (Some(check), true) => Some((check.comm, intent.signature(check.next()))),
            _ => None,
        };
        // The communicator stays alive (and unfreed) until the call has run.
        let keep = self.clone();
        stream.host_callback(Box::new(move || {
            let agreed = match &signature {
                Some((check_comm, signature)) => super::check::agree(&mpi, *check_comm, keep.size(), signature),
                None => Ok(()),
            };
            let ptrs = agreed.and_then(|()| regions.iter().map(Region::ptr).collect::<Result<Vec<_>>>());
            let started =
                ptrs.and_then(|ptrs| mpi.begin(call_name(what), |api, req| call(api, comm as abi::Comm, &ptrs, req)));
            state.started(started);
            state.drive();
            drop((regions, keep));
        }))?;
        for (a, stage) in staged {
            stream.copy(&stage, 0, a.buffer(), a.byte_offset(), a.nbytes())?;
        }
        for (a, role) in arrays {
            if *role != Role::Out {
                a.record_access(stream, Access::Read)?;
            }
            if *role != Role::In {
                a.record_access(stream, Access::Write)?;
            }
        }
        let event = device.create_event(EventFlags::DISABLE_TIMING)?;
        stream.record(&event)?;
        Ok(work(what, event, call_state))
    }

    /// A collective's call state, not started yet.
    fn new_call(&self, what: &'static str) -> Arc<Call> {
        Call::queued(self.inner.mpi.clone(), what, self.rank(), self.size())
    }

    /// Runs a collective on the calling thread when the stream would run it at once — the
    /// stream idle, nothing pending on its host-reachable arrays, the consistency check off
    /// (its exchange may wait for ranks that are busy elsewhere) — and so spares
    /// it the hand-off to the stream's worker and back, which costs more than a small
    /// collective between processes of one machine. The call is started and tested for up
    /// to [`AT_ONCE_LIMIT`](crate::mpi::AT_ONCE_LIMIT), the stream held meanwhile (work queued on it waits);
    /// one still in flight then is handed to the stream, where it completes like any
    /// other. `None` (`call` left in place) when the stream would not run it at once.
    fn run_at_once<C>(
        &self,
        what: &'static str,
        arrays: &[(&Array, Role)],
        stream: &AnyStream,
        device: &gpuport_runtime::AnyDevice,
        call: &mut Option<C>,
    ) -> Option<Result<Work>>
    where
        C: FnOnce(&crate::mpi::Api, abi::Comm, &[*mut u8], *mut abi::Request) -> c_int + Send + 'static,
    {
        let eligible = self.inner.check.is_none()
            && arrays.iter().all(|(a, _)| a.buffer().is_host_accessible() && a.has_pending_work().ok() == Some(false));
        if !eligible {
            return None;
        }
        let mut work = None;
        stream.run_if_idle(&mut || {
            if let Some(call) = call.take() {
                work = Some(self.start_here(what, arrays, stream, device, call));
            }
        });
        work
    }

    /// [`MpiComm::run_at_once`]'s part on the held stream.
    fn start_here(
        &self,
        what: &'static str,
        arrays: &[(&Array, Role)],
        stream: &AnyStream,
        device: &gpuport_runtime::AnyDevice,
        call: impl FnOnce(&crate::mpi::Api, abi::Comm, &[*mut u8], *mut abi::Request) -> c_int + Send + 'static,
    ) -> Result<Work> {
        let mpi = &self.inner.mpi;
        let regions: Vec<Region> = arrays
            .iter()
            .map(|(a, _)| Region { buffer: a.buffer().clone(), offset: a.byte_offset(), len: a.nbytes() })
            .collect();
        let comm = self.inner.comm;
        let ptrs = regions.iter().map(Region::ptr).collect::<Result<Vec<_>>>()?;
        // Never recorded, so complete: what a collective done before returning is waited by.
        let event = device.create_event(EventFlags::DISABLE_TIMING)?;
        let state = self.new_call(what);
        // Tested here before anyone else can see it: no lock around the tests.
        let mut flight = match mpi.begin(call_name(what), |api, req| call(api, comm as abi::Comm, &ptrs, req)) {
            Ok(flight) => flight,
            Err(e) => {
                state.finished(Err(e));
                return Ok(work(what, event, state));
            }
        };
        let mut pace = crate::mpi::Pace::new(mpi);
        loop {
            match mpi.poll(&mut flight, || state.describe()) {
                Ok(false) if pace.elapsed() < crate::mpi::AT_ONCE_LIMIT => pace.pause(),
                Ok(false) => break,
                done => {
                    state.finished(done.map(|_| ()));
                    return Ok(work(what, event, state));
                }
            }
        }
        state.started(Ok(flight));
        // Still in flight: the stream (held, so nothing queued meanwhile runs first) carries
        // it on, and the arrays' later users wait for the stream.
        let held: Vec<Buffer> = regions.iter().map(|r| r.buffer.clone()).collect();
        let (driven, keep) = (state.clone(), self.clone());
        let handed = stream.host_callback(Box::new(move || {
            driven.drive();
            drop((regions, keep));
        }));
        if let Err(e) = handed {
            // MPI is using the memory: complete the call here before anything is let go.
            state.drive();
            drop(held);
            return Err(e);
        }
        drop(held);
        for (a, role) in arrays {
            if *role != Role::Out {
                a.record_access(stream, Access::Read)?;
            }
            if *role != Role::In {
                a.record_access(stream, Access::Write)?;
            }
        }
        stream.record(&event)?;
        Ok(work(what, event, state))
    }
}

/// The [`Work`] of an MPI collective: its call, and `event` recorded after it.
fn work(what: &'static str, event: gpuport_runtime::AnyEvent, call: Arc<Call>) -> Work {
    Work::new(what, Arc::new(super::call::Followed { event, call }))
}

/// The MPI function a collective calls, for its errors.
fn call_name(what: &str) -> &'static str {
    match what {
        "all_reduce" => "MPI_Iallreduce_c",
        "broadcast" => "MPI_Ibcast_c",
        "reduce" => "MPI_Ireduce_c",
        "all_gather" => "MPI_Iallgather_c",
        "reduce_scatter" => "MPI_Ireduce_scatter_block_c",
        "all_to_all" => "MPI_Ialltoall_c",
        "send" => "MPI_Isend_c",
        "recv" => "MPI_Irecv_c",
        _ => "MPI",
    }
}

fn unsupported(what: String) -> Error {
    Error::EngineUnsupported { engine: ENGINE, what }
}

/// A predefined handle from its value.
fn h(value: usize) -> *mut std::ffi::c_void {
    abi::predefined(value)
}
