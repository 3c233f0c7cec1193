//! Mirrored arrays: one logical array kept as a host buffer and a device buffer, with a
//! shared sync state, in the manner of GT4Py's software-managed GPU storage.
//!
//! The state belongs to the pair of base buffers, so every view of a mirrored array sees
//! and changes the same state, and copies always move the whole base buffers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use gpuport_core::{DType, Error, Result};

use crate::array::Array;
use crate::copy::CopyEngine;
use crate::dynamic::AnyDevice;
use crate::pending::Access;

/// Which side holds changes the other has not seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncState {
    /// Both sides hold the same data.
    #[default]
    Clean,
    /// The host side was modified.
    HostDirty,
    /// The device side was modified.
    DeviceDirty,
}

/// The sync state of one pair of buffers, shared by every view of them — and, when
/// buffers taken out of one mirrored array are wrapped again
/// ([`MirroredArray::from_parts_sharing`]), by the new mirrored array too. Clones share
/// one state.
#[derive(Debug, Clone, Default)]
pub struct SharedSyncState(Arc<Mutex<SyncState>>);

impl SharedSyncState {
    /// A new state.
    pub fn new(state: SyncState) -> Self {
        SharedSyncState(Arc::new(Mutex::new(state)))
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current state.
    pub fn get(&self) -> SyncState {
        *self.lock()
    }

    /// Sets the state (what `set_host_modified` and friends do).
    pub fn set(&self, state: SyncState) {
        *self.lock() = state;
    }

    /// True when both are the same state.
    pub fn same_as(&self, other: &SharedSyncState) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

struct Base {
    host: Array,
    device: Array,
    state: SharedSyncState,
    engine: CopyEngine,
    host_to_device: AtomicUsize,
    device_to_host: AtomicUsize,
}

#[derive(Debug, Clone)]
enum ViewOp {
    Slice { axis: usize, start: usize, stop: Option<usize>, step: isize },
    Permute(Vec<usize>),
    Index { axis: usize, index: usize },
}

/// A host buffer and a device buffer of one logical array, kept in sync on demand.
#[derive(Clone)]
pub struct MirroredArray {
    base: Arc<Base>,
    view: Vec<ViewOp>,
}

impl MirroredArray {
    /// Zero-filled host and device buffers of `shape` and `dtype`, in sync.
    pub fn zeros(host: &AnyDevice, device: &AnyDevice, shape: &[usize], dtype: DType) -> Result<Self> {
        Self::from_parts(Array::zeros(host, shape, dtype)?, Array::zeros(device, shape, dtype)?, SyncState::Clean)
    }

    /// Wraps existing host and device arrays without copying. `state` says which side, if
    /// any, holds data the other lacks. Both must be C-contiguous with one shape and dtype,
    /// and the host side must be host-accessible.
    pub fn from_parts(host: Array, device: Array, state: SyncState) -> Result<Self> {
        Self::from_parts_sharing(host, device, SharedSyncState::new(state))
    }

    /// [`MirroredArray::from_parts`] with a state shared with other mirrored arrays (the
    /// state of the mirrored array the buffers were taken from).
    pub fn from_parts_sharing(host: Array, device: Array, state: SharedSyncState) -> Result<Self> {
        if host.shape() != device.shape() || host.dtype() != device.dtype() {
            return Err(Error::invalid_argument(format!(
                "host {:?} {} and device {:?} {} differ",
                host.shape(),
                host.dtype(),
                device.shape(),
                device.dtype()
            )));
        }
        if !host.buffer().is_host_accessible() {
            return Err(Error::invalid_argument(format!(
                "the host side on {} is not host-accessible",
                host.device_id()
            )));
        }
        if !host.layout().is_c_contiguous() || !device.layout().is_c_contiguous() {
            return Err(Error::invalid_layout("both sides of a mirrored array must be C-contiguous base arrays"));
        }
        Ok(MirroredArray {
            base: Arc::new(Base {
                host,
                device,
                state,
                engine: CopyEngine::default(),
                host_to_device: AtomicUsize::new(0),
                device_to_host: AtomicUsize::new(0),
            }),
            view: Vec::new(),
        })
    }

    fn state_lock(&self) -> MutexGuard<'_, SyncState> {
        self.base.state.lock()
    }

    /// The shared state object (Python's `MirroredArray.sync_state`).
    pub fn sync_state(&self) -> &SharedSyncState {
        &self.base.state
    }

    /// The current sync state (shared by every view).
    pub fn state(&self) -> SyncState {
        *self.state_lock()
    }

    /// Marks the host side modified: the device side is refreshed before its next access.
    pub fn set_host_modified(&self) {
        *self.state_lock() = SyncState::HostDirty;
    }

    /// Marks the device side modified: the host side is refreshed before its next access.
    pub fn set_device_modified(&self) {
        *self.state_lock() = SyncState::DeviceDirty;
    }

    /// Marks both sides equal (after the caller synchronized them by other means).
    pub fn set_synchronized(&self) {
        *self.state_lock() = SyncState::Clean;
    }

    /// Copies host → device when the host side is modified (or `force`); then the sides are
    /// in sync. Returns whether a copy was made.
    pub fn host_to_device(&self, force: bool) -> Result<bool> {
        let mut state = self.state_lock();
        self.sync_locked(&mut state, SyncState::HostDirty, force)
    }

    /// Copies device → host when the device side is modified (or `force`); then the sides
    /// are in sync. Returns whether a copy was made.
    pub fn device_to_host(&self, force: bool) -> Result<bool> {
        let mut state = self.state_lock();
        self.sync_locked(&mut state, SyncState::DeviceDirty, force)
    }

    /// Copies whichever side is modified to the other. Returns whether a copy was made.
    pub fn synchronize(&self) -> Result<bool> {
        let mut state = self.state_lock();
        let dirty = *state;
        self.sync_locked(&mut state, dirty, false)
    }

    fn sync_locked(&self, state: &mut SyncState, direction: SyncState, force: bool) -> Result<bool> {
        if !force && (*state != direction || direction == SyncState::Clean) {
            return Ok(false);
        }
        let b = &self.base;
        match direction {
            SyncState::DeviceDirty => {
                b.engine.copy(&b.device, &b.host)?;
                b.device_to_host.fetch_add(1, Ordering::Relaxed);
            }
            SyncState::HostDirty | SyncState::Clean => {
                b.engine.copy(&b.host, &b.device)?;
                b.host_to_device.fetch_add(1, Ordering::Relaxed);
            }
        }
        *state = SyncState::Clean;
        Ok(true)
    }

    /// The host side, made current first (device → host if the device is modified). With
    /// [`Access::Write`] (a write marks the side it acquires modified) the host side is then
    /// marked modified.
    pub fn acquire_host(&self, access: Access) -> Result<Array> {
        let mut state = self.state_lock();
        self.sync_locked(&mut state, SyncState::DeviceDirty, false)?;
        if access == Access::Write {
            *state = SyncState::HostDirty;
        }
        self.apply(&self.base.host)
    }

    /// The device side, made current first (host → device if the host is modified). With
    /// [`Access::Write`] the device side is then marked modified.
    pub fn acquire_device(&self, access: Access) -> Result<Array> {
        let mut state = self.state_lock();
        self.sync_locked(&mut state, SyncState::HostDirty, false)?;
        if access == Access::Write {
            *state = SyncState::DeviceDirty;
        }
        self.apply(&self.base.device)
    }

    /// The host side as it is, without synchronizing (mark changes with
    /// [`MirroredArray::set_host_modified`]).
    pub fn host_unsynchronized(&self) -> Result<Array> {
        self.apply(&self.base.host)
    }

    /// The device side as it is, without synchronizing.
    pub fn device_unsynchronized(&self) -> Result<Array> {
        self.apply(&self.base.device)
    }

    /// Copies made so far: (host → device, device → host), over every view.
    pub fn copy_counts(&self) -> (usize, usize) {
        (self.base.host_to_device.load(Ordering::Relaxed), self.base.device_to_host.load(Ordering::Relaxed))
    }

    /// The device of the device side.
    pub fn device(&self) -> &AnyDevice {
        self.base.device.device()
    }

    /// Shape of this view.
    pub fn shape(&self) -> Result<Vec<usize>> {
        Ok(self.apply(&self.base.host)?.shape().to_vec())
    }

    fn apply(&self, base: &Array) -> Result<Array> {
        let mut a = base.clone();
        for op in &self.view {
            a = match op {
                ViewOp::Slice { axis, start, stop, step } => a.slice(*axis, *start, *stop, *step)?,
                ViewOp::Permute(axes) => a.permute(axes)?,
                ViewOp::Index { axis, index } => a.index_axis(*axis, *index)?,
            };
        }
        Ok(a)
    }

    fn with(&self, op: ViewOp) -> Result<Self> {
        let mut view = self.view.clone();
        view.push(op);
        let v = MirroredArray { base: self.base.clone(), view };
        v.apply(&self.base.host)?; // validate once
        Ok(v)
    }

    /// A view: a strided slice along one axis (see [`Array::slice`]), sharing the state.
    pub fn slice(&self, axis: usize, start: usize, stop: Option<usize>, step: isize) -> Result<Self> {
        self.with(ViewOp::Slice { axis, start, stop, step })
    }

    /// A view at one index along `axis`, that axis removed (see [`Array::index_axis`]).
    pub fn index_axis(&self, axis: usize, index: usize) -> Result<Self> {
        self.with(ViewOp::Index { axis, index })
    }

    /// A view with permuted axes, sharing the state.
    pub fn permute(&self, axes: &[usize]) -> Result<Self> {
        self.with(ViewOp::Permute(axes.to_vec()))
    }

    /// True when both handles are views of one mirrored array.
    pub fn shares_state_with(&self, other: &MirroredArray) -> bool {
        Arc::ptr_eq(&self.base, &other.base)
    }

    /// The host side's device.
    pub fn host_device(&self) -> &AnyDevice {
        self.base.host.device()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.base.host.dtype()
    }

    /// The id of the device side's device.
    pub fn device_id(&self) -> gpuport_core::DeviceId {
        self.base.device.device().id()
    }
}
