//! # gpuport-ext
//!
//! A software device with its own memory space, on DLPack's `kDLExtDev` (12): the second,
//! genuinely separate device that lets cross-device behaviour (staged copies, DLPack's
//! IS_COPIED path, mirrored storage) be tested on machines without a GPU.
//!
//! It is ported onto gpuport the way an out-of-tree vendor would port a device:
//!
//! - it implements `gpuport-core`'s traits ([`ExtBackend`], [`ExtDevice`], [`ExtStream`],
//!   [`ExtEvent`]) and builds them from `gpuport-queue` (asynchronous queues, events,
//!   registered kernels) and `gpuport-vendor-kit` (the host memory limit) — helper crates any
//!   port may use; it does not depend on the host backend;
//! - it names itself: its kind is `BackendKind::Plugin("ext")`, and it declares its DLPack
//!   device type (`kDLExtDev`) through `Backend::DLPACK`;
//! - addresses it hands out are not host pointers (they live at `0xE0_0000_0000_00` and
//!   up); its memory is reached only through its own copies;
//! - it reaches the runtime only through `gpuport::Runtime::register_plugin`:
//!
//! ```text
//! gpuport::Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default())?)?;
//! let dev = gpuport::Runtime::discover().device("ext:1")?;
//! ```
//!
//! `GPUPORT_EXT_DEVICES` sets the number of devices (default 2) and
//! `GPUPORT_EXT_MEMORY_MIB` each device's memory (default 4096), read at the first load.

mod device;
mod memory;
mod stream;

use std::sync::{Arc, OnceLock};

use gpuport_core::{
    Backend, BackendKind, Buffer, DeviceId, DeviceInfo, DlDeviceType, DlpackDevices, Error, LoadOptions, Result,
};
use gpuport_queue::memory::PointerRegistry;
use gpuport_queue::QueueDevice;

pub use device::ExtDevice;
pub use stream::{ExtEvent, ExtStream};

/// The ext device's backend kind: a plugin that names itself.
pub const KIND: BackendKind = BackendKind::Plugin("ext");

/// Pinned host memory allocated through ext devices (host-accessible, so it needs a
/// registry of its own for `pointer_attributes`; it is not the host backend's memory).
static PINNED: PointerRegistry = PointerRegistry::new();

/// State shared by every ext handle of the process.
pub(crate) struct Shared {
    spaces: Vec<Arc<memory::AddressSpace>>,
    /// Per device: queues, the legacy default stream, streams, events, modules.
    devices: Vec<QueueDevice<ExtStream>>,
    host_limit: u64,
}

impl Shared {
    /// The hidden host pointer for a range of `buffer` as seen from device `from`: memory
    /// of any ext device (reached through that device's address space), or host-accessible
    /// memory. Anything else belongs to another backend.
    fn translate(
        &self,
        from: DeviceId,
        buffer: &Buffer,
        offset: usize,
        len: usize,
        op: &'static str,
    ) -> Result<*mut u8> {
        let dev = buffer.device();
        if dev.kind == KIND && !buffer.is_host_accessible() {
            let space = self
                .spaces
                .get(dev.ordinal as usize)
                .ok_or_else(|| Error::invalid_handle(format!("{dev} does not exist in this process")))?;
            return space.translate(buffer, offset, len);
        }
        if buffer.is_host_accessible() {
            return buffer.host_ptr(offset, len);
        }
        Err(Error::BackendMismatch {
            operation: op,
            expected: format!("{from} or host-accessible memory"),
            found: format!("{:?} memory of {dev}", buffer.memory()),
        })
    }
}

fn env_number(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::invalid_argument(format!("{name}={v:?} is not a non-negative integer"))),
    }
}

/// The ext backend. Every load returns a handle to the same process-wide devices.
#[derive(Clone)]
pub struct ExtBackend {
    shared: Arc<Shared>,
}

impl Backend for ExtBackend {
    const KIND: BackendKind = KIND;
    // Pinned ext memory is ordinary CPU memory; ext has no managed memory.
    const DLPACK: DlpackDevices =
        DlpackDevices { device: DlDeviceType::EXT_DEV, pinned_host: Some(DlDeviceType::CPU), managed: None };
    type Device = ExtDevice;
    type Stream = ExtStream;
    type Event = ExtEvent;

    fn load(_opts: &LoadOptions) -> Result<Self> {
        static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
        if let Some(shared) = SHARED.get() {
            return Ok(ExtBackend { shared: shared.clone() });
        }
        let count = env_number("GPUPORT_EXT_DEVICES", 2)?;
        let mib = env_number("GPUPORT_EXT_MEMORY_MIB", 4096)?;
        if count > 64 {
            return Err(Error::invalid_argument(format!("GPUPORT_EXT_DEVICES={count}: at most 64 ext devices")));
        }
        let capacity =
            mib.checked_mul(1 << 20).ok_or_else(|| Error::invalid_argument("GPUPORT_EXT_MEMORY_MIB overflows"))?;
        let spaces =
            (0..count as u32).map(|i| memory::AddressSpace::new(DeviceId::new(KIND, i), capacity)).collect::<Vec<_>>();
        let devices = (0..count as u32).map(|i| QueueDevice::new(DeviceId::new(KIND, i))).collect();
        let host_limit = gpuport_core::host_memory::host_memory_limit();
        let shared = Arc::new(Shared { spaces, devices, host_limit });
        Ok(ExtBackend { shared: SHARED.get_or_init(|| shared).clone() })
    }

    fn version(&self) -> String {
        format!("gpuport-ext {} ({} devices)", env!("CARGO_PKG_VERSION"), self.shared.spaces.len())
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok((0..self.shared.spaces.len() as u32).map(|i| ExtDevice::info_for(&self.shared, i)).collect())
    }

    fn open(&self, ordinal: u32) -> Result<ExtDevice> {
        if ordinal as usize >= self.shared.spaces.len() {
            return Err(Error::DeviceNotFound {
                device: DeviceId::new(KIND, ordinal),
                count: self.shared.spaces.len() as u32,
            });
        }
        Ok(ExtDevice::new(self.shared.clone(), ordinal))
    }
}
