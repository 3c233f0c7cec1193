//! (Its checked calls are `result/device.rs`.) ROCm devices: their facts (the architecture
//! from the device properties of either ROCm
//! layout, compute units, PCI bus and UUID) are ROCm's own; everything else of `Device` is
//! the vendor kit's (`gpuport_vendor_kit::device`) over the runtime calls of `calls.rs`.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{BackendKind, DeviceId, DeviceInfo, Result};
use gpuport_vendor_kit::VendorDevice;

use crate::context::DeviceCtx;
use crate::event::RocmEvent;
use crate::result;
use crate::stream::RocmStream;
use crate::sys::{self, Runtime};
use crate::target::Target;
use crate::RocmBackend;

/// A ROCm device.
#[derive(Clone)]
pub struct RocmDevice(pub(crate) Arc<VendorDevice<DeviceCtx>>);

/// Facts about device `ordinal`, through `hipDeviceGetAttribute` and the small getters;
/// `target` is its target ID, read when it was opened.
pub(crate) fn info(rt: &Runtime, ordinal: u32, target: Option<&Target>) -> Result<DeviceInfo> {
    let api = &rt.api;
    let dev = ordinal as c_int;
    let attribute = |attr| result::device::attribute(api, dev, attr);
    let major = attribute(sys::ATTR_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(sys::ATTR_COMPUTE_CAPABILITY_MINOR)?;
    let cus = attribute(sys::ATTR_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceInfo {
        id: DeviceId::new(BackendKind::Rocm, ordinal),
        name: result::device::name(api, dev)?,
        total_memory: result::device::total_mem(api, dev)? as u64,
        compute_capability: Some((major as u32, minor as u32)),
        arch: target.map(Target::to_string),
        multiprocessors: Some(cus as u32),
        pci_bus_id: result::device::pci_bus_id(api, dev),
        uuid: result::device::uuid(api, dev),
    })
}

gpuport_vendor_kit::impl_vendor_device!(RocmDevice, RocmBackend, RocmStream, RocmEvent);

#[cfg(test)]
mod arch_tests {
    use super::*;

    #[test]
    fn proc_address_versions_are_100_major_plus_minor() {
        assert_eq!(sys::proc_address_version(60342134), 603);
        assert_eq!(sys::proc_address_version(60100000), 601);
        assert_eq!(sys::proc_address_version(50221153), 502);
        assert_eq!(sys::proc_address_version(-1), 0);
    }
}
