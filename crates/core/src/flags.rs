//! Flag sets and small enums shared by every backend.

use bitflags::bitflags;

bitflags! {
    /// Stream creation flags (mirroring `CU_STREAM_*` / `hipStream*`).
    ///
    /// Every backend keeps CUDA's and ROCm's rule for the legacy default stream
    /// (`DefaultStream::Legacy`). A stream created without `NON_BLOCKING` (and a
    /// per-thread default stream) is a *blocking* stream: work queued on it waits for the
    /// work queued earlier on the legacy default stream, and work queued on the legacy
    /// default stream waits for the work queued earlier on every blocking stream of the
    /// device. A `NON_BLOCKING` stream never synchronizes implicitly, and blocking streams
    /// do not wait for each other. Libraries that order their streams explicitly (with
    /// events) create them `NON_BLOCKING`, so an unrelated use of the legacy stream cannot
    /// serialize them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// The stream does not synchronize implicitly with the legacy default stream
        /// (see [`StreamFlags`] for the rule a stream without it follows).
        const NON_BLOCKING = 1 << 0;
    }
}

bitflags! {
    /// Event creation flags (mirroring `CU_EVENT_*` / `hipEvent*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// Host synchronization blocks the thread instead of spinning.
        const BLOCKING_SYNC = 1 << 0;
        /// The event records no timestamp (cheaper; elapsed time is then an error).
        const DISABLE_TIMING = 1 << 1;
        /// The event may be shared between processes (vendor backends only).
        const INTERPROCESS = 1 << 2;
    }
}

bitflags! {
    /// Pinned host allocation flags (mirroring `CU_MEMHOSTALLOC_*` / `hipHostMalloc*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostAllocFlags: u32 {
        /// Pinned for every context, not only the allocating one.
        const PORTABLE = 1 << 0;
        /// Mapped into the device address space.
        const DEVICE_MAP = 1 << 1;
        /// Write-combined: fast for the device to read, slow for the host to read.
        const WRITE_COMBINED = 1 << 2;
    }
}

/// Whether a handle owns its resource. An owned handle destroys or frees it when the last
/// clone is dropped; a borrowed handle (a foreign stream handed over by DLPack or the CUDA
/// Array Interface, a pointer someone else allocated) never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ownership {
    /// gpuport created the resource and releases it.
    Owned,
    /// Someone else owns the resource; gpuport only uses it.
    Borrowed,
}

impl Ownership {
    /// `Owned` when `owned`, else `Borrowed`.
    pub fn from_owned(owned: bool) -> Self {
        if owned {
            Ownership::Owned
        } else {
            Ownership::Borrowed
        }
    }
}

/// Which default stream to ask a device for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefaultStream {
    /// The legacy default stream, shared by the whole device (CUDA's stream 0 / handle 1).
    Legacy,
    /// The per-thread default stream (CUDA handle 2), where the vendor has one.
    PerThread,
}
