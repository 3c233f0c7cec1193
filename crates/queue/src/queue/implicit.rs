//! The legacy default stream's implicit synchronisation, as CUDA and ROCm define it, for
//! software devices: work queued on a *blocking* stream (one created without
//! `StreamFlags::NON_BLOCKING`, per-thread default streams included) waits for the work
//! queued before it on the device's legacy default stream, and work queued on the legacy
//! default stream waits for the work queued before it on every blocking stream of the
//! device. Non-blocking streams take part in neither, and blocking streams do not wait
//! for each other.
//!
//! A queue learns its role when it is made ([`ImplicitRole`]); before each operation it
//! queues a [`Op::Follow`](super::ops::Op) marker per predecessor with work still pending,
//! naming the predecessor's submitted count at that moment, and its drainer waits until
//! the predecessor has completed that many. A count read before the marker is queued can
//! only name work queued before it, so two queues following each other never wait in a
//! cycle. Queues with nothing pending cost two atomic loads; a non-blocking stream's
//! enqueue costs nothing more.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use gpuport_core::LiveList;

use super::QueueCore;
use crate::wait::lock;

/// What one device's queues share for the implicit synchronisation: its legacy default
/// stream's queue (once made) and its blocking streams' queues (while they live).
#[derive(Default)]
pub struct ImplicitSync {
    legacy: OnceLock<Weak<QueueCore>>,
    blocking: Mutex<LiveList<Weak<QueueCore>>>,
}

/// A queue's part in its device's implicit synchronisation.
#[derive(Clone, Default)]
pub enum ImplicitRole {
    /// Takes no part: a non-blocking stream, or a queue outside any device.
    #[default]
    Independent,
    /// A blocking stream: follows the legacy default stream.
    Blocking(Arc<ImplicitSync>),
    /// The legacy default stream: follows every blocking stream.
    Legacy(Arc<ImplicitSync>),
}

/// A queue with work submitted and not yet completed: the count to wait for.
fn pending(queue: &Weak<QueueCore>) -> Option<u64> {
    let core = queue.upgrade()?;
    let submitted = core.submitted.load(Ordering::SeqCst);
    (core.completed.load(Ordering::SeqCst) < submitted).then_some(submitted)
}

impl ImplicitRole {
    /// Registers `core`, just made, with its device.
    pub(super) fn join(&self, core: &Arc<QueueCore>) {
        match self {
            ImplicitRole::Independent => {}
            ImplicitRole::Blocking(sync) => {
                lock(&sync.blocking).push(Arc::downgrade(core), |q| q.strong_count() > 0);
            }
            ImplicitRole::Legacy(sync) => {
                // A device makes its legacy stream once; a second one would not be followed.
                let _ = sync.legacy.set(Arc::downgrade(core));
            }
        }
    }

    /// Calls `follow` with each predecessor that has work pending, and the count to wait
    /// for.
    pub(super) fn predecessors(&self, mut follow: impl FnMut(&Weak<QueueCore>, u64)) {
        match self {
            ImplicitRole::Independent => {}
            ImplicitRole::Blocking(sync) => {
                if let Some(legacy) = sync.legacy.get() {
                    if let Some(target) = pending(legacy) {
                        follow(legacy, target);
                    }
                }
            }
            ImplicitRole::Legacy(sync) => {
                for queue in lock(&sync.blocking).items() {
                    if let Some(target) = pending(queue) {
                        follow(queue, target);
                    }
                }
            }
        }
    }

    /// Whether a predecessor has work pending (then an operation may not run at once on
    /// the caller's thread).
    pub(super) fn has_pending_predecessor(&self) -> bool {
        let mut any = false;
        self.predecessors(|_, _| any = true);
        any
    }
}
