//! # gpuport-host
//!
//! The CPU as a gpuport backend. Not a stub: it is the default device and the test bed for
//! every ordering rule.
//!
//! - Each stream is an ordered queue run by its own worker thread; operations return at
//!   once and run asynchronously; `synchronize` waits for the queue to drain.
//! - Events are real completion markers: a record queues a marker, a wait blocks only the
//!   waiting stream's worker until the marker has run, and elapsed time is measured.
//! - Allocations are 256-byte aligned, zero-filled and registered, so
//!   `pointer_attributes` answers for host addresses.
//! - Large copies are split across threads.
//!
//! The queue machinery ([`queue::WorkQueue`], [`EventState`]) and host kernels
//! ([`kernels`]) are public so other software devices can reuse them.

mod device;
mod event;
mod handles;
pub mod kernels;
pub mod memory;
pub mod queue;
mod stream;

use gpuport_core::{Backend, BackendKind, DeviceId, DeviceInfo, Error, LoadOptions, Result};

pub use device::HostDevice;
pub use event::{EventState, HostEvent};
pub use handles::{HandleRegistry, OwnerGuard};
pub use kernels::{register_kernel, HostKernelArgs, HostKernelFn};
pub use stream::{host_range, resolve_args, HostStream};

/// The host backend. Loading it always succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostBackend;

impl Backend for HostBackend {
    const KIND: BackendKind = BackendKind::Host;
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
            return Err(Error::DeviceNotFound {
                device: DeviceId::new(BackendKind::Host, ordinal),
                backend: "host".into(),
                count: 1,
            });
        }
        Ok(HostDevice::shared())
    }
}
