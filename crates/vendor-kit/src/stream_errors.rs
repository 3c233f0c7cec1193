//! The first error of a stream's work found outside a call (a panicking host callback, a
//! failed stream-ordered free): kept for the stream's next synchronize and, sticky, for
//! the device's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gpuport_core::{Error, Result};

use crate::lock;

/// The first error of one stream's work found outside a call, shared with its device.
#[derive(Default)]
pub struct StreamErrors {
    pub(super) first: Mutex<Option<Error>>,
    /// Set when the stream's last handle is gone: the device is then its only reporter.
    pub(super) orphaned: AtomicBool,
}

impl StreamErrors {
    /// Keeps `err` unless an earlier error is kept.
    pub fn record(&self, err: Error) {
        lock(&self.first).get_or_insert(err);
    }

    /// Whether the device must keep these: the stream lives, or it is gone with an error
    /// not yet reported.
    pub(super) fn still_reports(self: &Arc<Self>) -> bool {
        !(self.orphaned.load(Ordering::SeqCst) && lock(&self.first).is_none())
    }

    /// Reports and clears the kept error (the stream's synchronize).
    pub(super) fn take(&self) -> Result<()> {
        lock(&self.first).take().map_or(Ok(()), Err)
    }
}
