//! [`NcclComm`]: one rank of an NCCL (or RCCL) communicator — its handle, its device —
//! freed with the last reference, or aborted by the watchdog with a cause every later use
//! is told.

use std::ffi::c_int;
use std::sync::{RwLock, RwLockReadGuard};

use gpuport_core::{BackendKind, Error, Result};
use gpuport_runtime::AnyDevice;

use super::{calls, Flavour, Loaded};

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
}

/// The engine a device's backend uses, or why it has none.
pub(crate) fn engine_for(device: &AnyDevice) -> Result<&'static Loaded> {
    let flavour = match device.id().kind {
        BackendKind::Cuda => Flavour::Nccl,
        BackendKind::Rocm => Flavour::Rccl,
        other => {
            return Err(Error::BackendMismatch {
                operation: "Communicator::init_all",
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
        let loaded = engine_for(first)?;
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
            let comm =
                NcclComm { loaded, handle: RwLock::new(Handle::Live(handle)), rank, size, device: device.clone() };
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
        let loaded = self.loaded;
        let destroy = move || {
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
