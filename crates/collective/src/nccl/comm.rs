//! [`NcclComm`]: one rank of an NCCL (or RCCL) communicator — its handle, its device —
//! freed with the last reference, or aborted by the watchdog with a cause every later use
//! is told.

use std::ffi::c_int;
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use gpuport_core::{BackendKind, DefaultStream, Error, Result};
use gpuport_runtime::AnyDevice;

use super::calls::{State, UNIQUE_ID_BYTES};
use super::{calls, Flavour, Loaded};
use crate::timeout::{limit, TIMEOUT_ENV};

/// The communicator's handle, until it is aborted.
enum Handle {
    Live(usize),
    /// Aborted: why (the watchdog's words).
    Aborted(String),
}

/// One rank of an NCCL or RCCL communicator.
pub(crate) struct NcclComm {
    pub(crate) loaded: &'static Loaded,
    handle: RwLock<Handle>,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    /// The rank's device: its arrays and streams are this device's.
    pub(crate) device: AnyDevice,
    /// Made non-blocking (`ncclCommInitRankConfig`): its calls may answer `ncclInProgress`,
    /// and [`NcclComm::settle`] waits for what they started.
    pub(crate) non_blocking: bool,
    /// The handle of the device's per-thread default stream, for a non-blocking
    /// communicator (which refuses it); `None` otherwise or where there is none.
    pub(crate) per_thread_stream: Option<usize>,
}

/// The engine a device's backend uses, or why it has none (`operation` names the call
/// that asked).
pub(crate) fn engine_for(device: &AnyDevice, operation: &'static str) -> Result<&'static Loaded> {
    let flavour = match device.id().kind {
        BackendKind::Cuda => Flavour::Nccl,
        BackendKind::Rocm => Flavour::Rccl,
        other => {
            return Err(Error::BackendMismatch {
                operation,
                expected: "cuda or rocm (NCCL or RCCL)".into(),
                found: other.to_string(),
            })
        }
    };
    super::loaded(flavour)
}

impl NcclComm {
    /// One communicator over `devices` (all of one backend, each once), one rank per
    /// device in their order (`ncclCommInitAll`).
    pub(crate) fn init_all(devices: &[AnyDevice]) -> Result<Vec<NcclComm>> {
        let first = devices.first().ok_or_else(|| Error::invalid_argument("Communicator::init_all: no devices"))?;
        for (i, d) in devices.iter().enumerate() {
            if d.id().kind != first.id().kind {
                return Err(Error::BackendMismatch {
                    operation: "Communicator::init_all",
                    expected: first.id().kind.to_string(),
                    found: d.id().to_string(),
                });
            }
            if devices[..i].iter().any(|e| e.id() == d.id()) {
                return Err(Error::invalid_argument(format!(
                    "Communicator::init_all: {} is named twice (a communicator has one rank per device)",
                    d.id()
                )));
            }
        }
        let loaded = engine_for(first, "Communicator::init_all")?;
        let ordinals = devices
            .iter()
            .map(|d| {
                c_int::try_from(d.id().ordinal).map_err(|_| Error::invalid_argument("a device ordinal past c_int"))
            })
            .collect::<Result<Vec<_>>>()?;
        let handles = calls::comm_init_all(loaded, &ordinals)?;
        // Each handle is owned from here: one that fails its checks is still freed.
        let mut out = Vec::with_capacity(handles.len());
        let mut first_error = None;
        for (handle, device) in handles.into_iter().zip(devices) {
            let checked = calls::comm_rank_size(loaded, handle);
            let (rank, size) = *checked.as_ref().unwrap_or(&(0, 0));
            let comm = NcclComm {
                loaded,
                handle: RwLock::new(Handle::Live(handle)),
                rank,
                size,
                device: device.clone(),
                non_blocking: false,
                per_thread_stream: None,
            };
            match checked {
                Ok(_) => out.push(comm),
                // `comm` is freed as it drops here; the others with `out`.
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Rank `rank` of `size` on `device` (`ncclCommInitRankConfig`, non-blocking), returned
    /// once every rank has joined with the same `id` — from this process's threads or other
    /// processes. Ranks that have not all joined within `GPUPORT_COLLECTIVE_TIMEOUT` abort
    /// the initialisation: an error, never a hang.
    pub(crate) fn init_rank(
        device: &AnyDevice,
        id: &[u8; UNIQUE_ID_BYTES],
        size: usize,
        rank: usize,
    ) -> Result<NcclComm> {
        const WHAT: &str = "Communicator::init_rank";
        if rank >= size {
            return Err(Error::invalid_argument(format!("{WHAT}: rank {rank} of {size}")));
        }
        let loaded = engine_for(device, WHAT)?;
        let ranks = c_int::try_from(size).map_err(|_| Error::invalid_argument(format!("{WHAT}: {size} ranks")))?;
        // `rank < size`, so it fits too.
        let r = rank as c_int;
        // NCCL takes the rank's device from the calling thread.
        device.make_current()?;
        let handle = calls::comm_init_rank(loaded, id, ranks, r)?;
        let mut comm = NcclComm::non_blocking(loaded, handle, device, (rank, size));
        comm.settle("ncclCommInitRankConfig", "initialising the communicator (every rank joining)")?;
        let engine_says = comm.ready()?;
        if engine_says != (rank, size) {
            return Err(Error::Collective {
                engine: loaded.flavour.name(),
                call: "ncclCommUserRank",
                code: 0,
                message: format!("asked for rank {rank} of {size}, made rank {} of {}", engine_says.0, engine_says.1),
            });
        }
        Ok(comm)
    }

    /// A non-blocking communicator of `device` whose initialisation is under way, owned
    /// from here; `(rank, size)` names it in errors until [`NcclComm::ready`] reads its own.
    fn non_blocking(loaded: &'static Loaded, handle: usize, device: &AnyDevice, (rank, size): (usize, usize)) -> Self {
        NcclComm {
            loaded,
            handle: RwLock::new(Handle::Live(handle)),
            rank,
            size,
            device: device.clone(),
            non_blocking: true,
            per_thread_stream: device.default_stream(DefaultStream::PerThread).ok().map(|s| s.raw_handle()),
        }
    }

    /// Reads the engine's rank and size of a communicator whose initialisation has settled.
    fn ready(&mut self) -> Result<(usize, usize)> {
        let (rank, size) = self.with_live(|h| calls::comm_rank_size(self.loaded, h))?;
        (self.rank, self.size) = (rank, size);
        Ok((rank, size))
    }

    /// Splits `parents` — ranks of one communicator driven by this thread: one, or several
    /// as [`NcclComm::init_all`] made them — together, in one group (`ncclCommSplit`, NCCL
    /// 2.18): each `(color, key)` of `how` for its parent; a parent with no color gets
    /// `None`. The new communicators are non-blocking, waited for under the collectives'
    /// timeout.
    pub(crate) fn split_all(parents: &[&NcclComm], how: &[(Option<u32>, i32)]) -> Result<Vec<Option<NcclComm>>> {
        const WHAT: &str = "Communicator::split";
        let first = parents.first().ok_or_else(|| Error::invalid_argument(format!("{WHAT}: no communicators")))?;
        if how.len() != parents.len() {
            return Err(Error::invalid_argument(format!(
                "{WHAT}: {} colors and keys for {} communicators",
                how.len(),
                parents.len()
            )));
        }
        if super::group::Group::is_open() {
            return Err(Error::invalid_argument(format!(
                "{WHAT} inside a group: the new communicators exist only once the group ends; split outside it \
                 (several ranks of one thread together with Communicator::split_all)"
            )));
        }
        let loaded = first.loaded;
        let mut colors = Vec::with_capacity(how.len());
        for (p, &(color, _)) in parents.iter().zip(how) {
            if !std::ptr::eq(p.loaded, loaded) {
                return Err(Error::BackendMismatch {
                    operation: WHAT,
                    expected: loaded.flavour.name().into(),
                    found: p.loaded.flavour.name().into(),
                });
            }
            colors.push(match color {
                None => -1, // NCCL_SPLIT_NOCOLOR
                Some(c) => c_int::try_from(c)
                    .map_err(|_| Error::invalid_argument(format!("{WHAT}: color {c} is past {}", c_int::MAX)))?,
            });
        }
        // One slot per parent, not moved until the group has ended and written them.
        let mut outs = vec![0usize; parents.len()];
        calls::group_start(loaded)?;
        let mut issued = Ok(());
        for (i, p) in parents.iter().enumerate() {
            let out: *mut usize = &mut outs[i];
            // SAFETY: a live parent (held by `with_live`); `outs` stays in place until the
            // group below has ended.
            issued = p.with_live(|h| unsafe { calls::comm_split(loaded, h, colors[i], how[i].1, out) });
            if issued.is_err() {
                break;
            }
        }
        let ended = calls::group_end(loaded);
        // Every handle that came back is owned from here (freed if anything failed).
        let mut made: Vec<Option<NcclComm>> = outs
            .iter()
            .zip(parents)
            .map(|(&h, p)| (h != 0).then(|| NcclComm::non_blocking(loaded, h, &p.device, (p.rank, p.size))))
            .collect();
        issued.and(ended)?;
        for comm in made.iter_mut().flatten() {
            comm.settle("ncclCommSplit", "splitting the communicator (every rank calling)")?;
            comm.ready()?;
        }
        Ok(made)
    }

    /// Waits until what `call` started on a non-blocking communicator — `what`, in words —
    /// has finished (at once for a blocking one). The engine's error, or a timeout past
    /// `GPUPORT_COLLECTIVE_TIMEOUT`, aborts the communicator and is returned, naming the
    /// call, the rank and the cause.
    pub(crate) fn settle(&self, call: &'static str, what: &str) -> Result<()> {
        if !self.non_blocking {
            return Ok(());
        }
        let state = poll_until_done(|| self.with_live(|h| calls::comm_state(self.loaded, h)))?;
        let cause = match state {
            State::Ready => return Ok(()),
            State::Failed(e) => format!("{what}: {e}"),
            State::InProgress => {
                format!("{what} did not finish within {} s ({TIMEOUT_ENV})", limit().as_secs_f64())
            }
        };
        self.abort(&cause);
        Err(Error::Collective {
            engine: self.loaded.flavour.name(),
            call,
            code: 0,
            message: format!("rank {} of {}: {cause}; the communicator was aborted", self.rank, self.size),
        })
    }

    fn handle(&self) -> RwLockReadGuard<'_, Handle> {
        self.handle.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with the live handle (held live meanwhile: the watchdog's abort waits);
    /// the abort's cause once it was aborted.
    pub(crate) fn with_live<T>(&self, f: impl FnOnce(usize) -> Result<T>) -> Result<T> {
        match &*self.handle() {
            Handle::Live(h) => f(*h),
            Handle::Aborted(why) => Err(self.aborted(why)),
        }
    }

    fn aborted(&self, why: &str) -> Error {
        Error::Collective {
            engine: self.loaded.flavour.name(),
            call: "ncclCommAbort",
            code: 0,
            message: format!("rank {} of {}: the communicator was aborted: {why}", self.rank, self.size),
        }
    }

    /// The error the communicator has met (`ncclCommGetAsyncError`), or why it was aborted;
    /// `None` while it is well.
    pub(crate) fn fault(&self) -> Option<Error> {
        match &*self.handle() {
            Handle::Live(h) => calls::comm_async_error(self.loaded, *h).unwrap_or_else(Some),
            Handle::Aborted(why) => Some(self.aborted(why)),
        }
    }

    /// Aborts the communicator (`ncclCommAbort`): its work in flight ends, and every later
    /// use is told `cause`. Once; later calls change nothing.
    pub(crate) fn abort(&self, cause: &str) {
        let mut handle = self.handle.write().unwrap_or_else(|p| p.into_inner());
        if let Handle::Live(h) = *handle {
            log::error!(
                "{} rank {} of {}: aborting the communicator: {cause}",
                self.loaded.flavour.name(),
                self.rank,
                self.size
            );
            // SAFETY: a live handle, replaced below so it is never used again.
            if let Err(e) = unsafe { calls::comm_abort(self.loaded, h) } {
                log::warn!("aborting a communicator: {e}");
            }
            *handle = Handle::Aborted(cause.to_owned());
        }
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        let handle =
            std::mem::replace(self.handle.get_mut().unwrap_or_else(|p| p.into_inner()), Handle::Aborted(String::new()));
        let Handle::Live(h) = handle else { return };
        let (loaded, non_blocking) = (self.loaded, self.non_blocking);
        let destroy = move || {
            // A non-blocking communicator is finalised first, as NCCL asks, and aborted
            // when that fails or does not finish.
            if non_blocking {
                // SAFETY: the last reference to a live communicator, given no more work.
                let finalized = unsafe { calls::comm_finalize(loaded, h) }
                    .and_then(|()| poll_until_done(|| calls::comm_state(loaded, h)));
                if !matches!(finalized, Ok(State::Ready)) {
                    log::warn!("finalising a communicator did not finish ({finalized:?}): aborting it");
                    // SAFETY: as above; not used again.
                    if let Err(e) = unsafe { calls::comm_abort(loaded, h) } {
                        log::warn!("aborting a communicator: {e}");
                    }
                    return;
                }
            }
            // SAFETY: the last reference to a live communicator; no work of it is in flight
            // (each holds a reference until it is done).
            if let Err(e) = unsafe { calls::comm_destroy(loaded, h) } {
                log::warn!("freeing a communicator: {e}");
            }
        };
        if gpuport_core::release::on_restricted_thread() {
            gpuport_core::release::defer(Box::new(destroy));
        } else {
            destroy();
        }
    }
}

/// Polls `state` until it is no longer `InProgress` or the collectives' timeout has passed
/// (then `InProgress`): briefly at first — a launch is usually done at once — then every
/// millisecond.
fn poll_until_done(mut state: impl FnMut() -> Result<State>) -> Result<State> {
    let deadline = Instant::now() + limit();
    let mut pause = Duration::from_micros(10);
    loop {
        let now = state()?;
        if !matches!(now, State::InProgress) || Instant::now() >= deadline {
            return Ok(now);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}
