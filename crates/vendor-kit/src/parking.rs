//! Keeping queued work's handles alive on vendor streams. A vendor stream cannot hold Rust
//! values, so the handles an operation touches (buffers, kernels) are parked beside the
//! stream: in an open batch, sealed every [`BATCH`] handles behind a vendor event, and
//! released once that event has completed — or all at once when the stream is known idle.
//! Shared by every vendor backend; the event calls are the vendor's [`Fence`].

use std::collections::VecDeque;

use gpuport_core::{Buffer, Kernel, Result};

/// Handles parked per batch before the batch is sealed behind an event.
pub const BATCH: usize = 64;

/// Something queued work must keep alive until it has run.
#[derive(Debug)]
pub enum Keep {
    /// A buffer the work reads or writes.
    Buffer(Buffer),
    /// A kernel (and so its module) the work runs.
    Kernel(Kernel),
}

/// A vendor's event calls, for sealing batches.
pub trait Fence {
    /// The vendor event handle.
    type Handle: Copy;
    /// Creates an event and records it at the current end of the stream.
    fn seal(&self) -> Result<Self::Handle>;
    /// Whether the event has completed.
    fn done(&self, handle: Self::Handle) -> Result<bool>;
    /// Destroys the event (errors are the fence's to log).
    fn destroy(&self, handle: Self::Handle);
}

/// Parked handles of one stream.
#[derive(Debug)]
pub struct Parked<H> {
    open: Vec<Keep>,
    sealed: VecDeque<(H, Vec<Keep>)>,
}

impl<H> Default for Parked<H> {
    fn default() -> Self {
        Parked { open: Vec::new(), sealed: VecDeque::new() }
    }
}

impl<H: Copy> Parked<H> {
    /// Parks handles of work just queued; every [`BATCH`] handles, seals the open batch and
    /// releases the batches whose events have completed.
    pub fn park<F: Fence<Handle = H>>(&mut self, items: impl IntoIterator<Item = Keep>, fence: &F) -> Result<()> {
        self.open.extend(items);
        if self.open.len() < BATCH {
            return Ok(());
        }
        let handle = fence.seal()?;
        self.sealed.push_back((handle, std::mem::take(&mut self.open)));
        while let Some(&(front, _)) = self.sealed.front() {
            if !fence.done(front)? {
                break;
            }
            self.sealed.pop_front();
            fence.destroy(front);
        }
        Ok(())
    }

    /// Releases everything; only when the stream is known idle (after a synchronize).
    pub fn release_all<F: Fence<Handle = H>>(&mut self, fence: &F) {
        self.open.clear();
        while let Some((handle, _)) = self.sealed.pop_front() {
            fence.destroy(handle);
        }
    }

    /// Takes every parked handle out, destroying the batches' events (a vendor destroys an
    /// event whose work is pending once that work completes): the handles must then be
    /// kept until the stream is known to have reached this point, by whoever takes them.
    pub fn take_all<F: Fence<Handle = H>>(&mut self, fence: &F) -> Vec<Keep> {
        let mut keep = std::mem::take(&mut self.open);
        while let Some((handle, batch)) = self.sealed.pop_front() {
            fence.destroy(handle);
            keep.extend(batch);
        }
        keep
    }

    /// True when nothing is parked.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.sealed.is_empty()
    }
}
