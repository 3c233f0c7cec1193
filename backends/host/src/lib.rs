//! # gpuport-host
//!
//! The CPU as a gpuport backend. Not a stub: it is the default device and the test bed for
//! every ordering rule. Built from `gpuport-queue`, as any software device can be:
//!
//! - Each stream is an ordered queue, drained by a thread of gpuport-queue's pool while it
//!   has work; operations return at once and run asynchronously; `synchronize` waits for
//!   the queue to drain.
//! - Events are real completion markers: a record queues a marker, a wait blocks only the
//!   waiting stream's worker until the marker has run, and elapsed time is measured.
//! - Allocations are 256-byte aligned and registered, so `pointer_attributes` answers for
//!   host addresses. Freed blocks of 64 KiB and more are cached for reuse
//!   (`GPUPORT_HOST_CACHE_BYTES`, [`empty_cache`]); as with `cudaMalloc`, contents are
//!   unspecified (zero when fresh, a reused block's old bytes otherwise).
//! - Large copies are split across threads.
//! - Kernels are Rust functions registered with [`register_kernel`].

mod device;
mod event;
mod memory;
mod stream;

use gpuport_core::{
    Backend, BackendKind, DeviceId, DeviceInfo, DlDeviceType, DlpackDevices, Error, LoadOptions, Result,
};

pub use device::HostDevice;
pub use event::HostEvent;
pub use gpuport_queue::{register_kernel, HostKernelArgs, HostKernelFn};
pub use stream::HostStream;

/// Returns the freed host blocks the allocation cache keeps (those of the host device and
/// of every other software device in the process: they share one cache) to the system;
/// returns how many bytes went back. Live allocations are untouched.
pub fn empty_cache() -> usize {
    gpuport_queue::memory::cache::release_all()
}

/// The host backend. Loading it always succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostBackend;

impl Backend for HostBackend {
    const KIND: BackendKind = BackendKind::Host;
    // Host memory and the host's "pinned" memory are both plain CPU memory.
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::CPU, pinned_host: Some(DlDeviceType::CPU), managed: None };
    type Device = HostDevice;
    type Stream = HostStream;
    type Event = HostEvent;

    fn load(_opts: &LoadOptions) -> Result<Self> {
        Ok(HostBackend)
    }

    fn version(&self) -> String {
        format!("gpuport-host {} ({})", env!("CARGO_PKG_VERSION"), std::env::consts::ARCH)
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(vec![HostDevice::info_now()])
    }

    fn open(&self, ordinal: u32) -> Result<HostDevice> {
        if ordinal != 0 {
            return Err(Error::DeviceNotFound { device: DeviceId::new(BackendKind::Host, ordinal), count: 1 });
        }
        Ok(HostDevice::shared())
    }
}
