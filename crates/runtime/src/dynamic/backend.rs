//! [`DynBackend`], the object-safe view of a loaded backend the runtime keeps: the trait
//! and its blanket impl, which checks that a backend hands out only its own devices.

use gpuport_core::{Backend, BackendKind, DeviceId, DeviceInfo, DlpackDevices, Error, Result};

use super::{device_into_any, AnyDevice};

/// Object-safe view of a loaded backend.
pub trait DynBackend: Send + Sync + 'static {
    /// Its kind.
    fn kind(&self) -> BackendKind;
    /// Its DLPack device types (see [`Backend::dlpack_devices`]).
    fn dlpack_devices(&self) -> DlpackDevices;
    /// Runtime and driver versions.
    fn version(&self) -> String;
    /// Its devices.
    fn devices(&self) -> Result<Vec<DeviceInfo>>;
    /// Opens a device.
    fn open(&self, ordinal: u32) -> Result<AnyDevice>;
}

impl<B: Backend> DynBackend for B {
    fn kind(&self) -> BackendKind {
        Backend::kind(self)
    }
    fn dlpack_devices(&self) -> DlpackDevices {
        Backend::dlpack_devices(self)
    }
    fn version(&self) -> String {
        Backend::version(self)
    }
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let devices = Backend::devices(self)?;
        devices.iter().try_for_each(|d| check_kind(Backend::kind(self), d.id))?;
        Ok(devices)
    }
    fn open(&self, ordinal: u32) -> Result<AnyDevice> {
        let device = Backend::open(self, ordinal)?;
        check_kind(Backend::kind(self), gpuport_core::Device::id(&device))?;
        Ok(device_into_any(device))
    }
}

/// A backend hands out only its own devices: one device has one representation (a plugin
/// cannot pass a built-in backend's device off as its own).
fn check_kind(kind: BackendKind, id: DeviceId) -> Result<()> {
    if id.kind != kind {
        return Err(Error::invalid_argument(format!("backend `{kind}` opened {id}, a device of another backend")));
    }
    Ok(())
}
