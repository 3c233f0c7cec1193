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

/// The device's target ID (`gfx90a:sramecc+:xnack-`), from `gcnArchName` in the device
/// properties: the ROCm 6 layout through `hipGetDevicePropertiesR0600` where the runtime
/// is 6 or newer, else the ROCm 5 layout. (The `gcnArch` attribute is no help: ROCm 5.x
/// does not answer it for newer chips and renders gfx90a as "gfx910".) `None` when neither
/// call answers.
pub(crate) fn target(rt: &Runtime, ordinal: u32) -> Option<Target> {
    let (bytes, offset) = result::device::properties(rt, ordinal as c_int)?;
    decode_target(&bytes, offset)
}

/// `gcnArchName` at `offset` of a device-properties buffer, with its feature settings.
fn decode_target(props: &[u8], offset: usize) -> Option<Target> {
    let field = props.get(offset..offset + 256)?;
    let text = field.split(|&b| b == 0).next()?;
    Target::parse(std::str::from_utf8(text).ok()?)
}

gpuport_vendor_kit::impl_vendor_device!(RocmDevice, RocmBackend, RocmStream, RocmEvent);

#[cfg(test)]
mod arch_tests {
    use super::*;

    fn props_with(offset: usize, name: &str) -> Vec<u8> {
        let mut props = vec![0u8; sys::DEVICE_PROP_BUFFER];
        props[offset..offset + name.len()].copy_from_slice(name.as_bytes());
        props
    }

    fn arch(props: &[u8], offset: usize) -> Option<String> {
        decode_target(props, offset).map(|t| t.to_string())
    }

    #[test]
    fn targets_decode_from_both_layouts_with_their_features() {
        let v5 = props_with(sys::GCN_ARCH_NAME_OFFSET_R0000, "gfx90a:sramecc+:xnack-");
        assert_eq!(arch(&v5, sys::GCN_ARCH_NAME_OFFSET_R0000).as_deref(), Some("gfx90a:sramecc+:xnack-"));
        let v6 = props_with(sys::GCN_ARCH_NAME_OFFSET_R0600, "gfx942:sramecc+:xnack-");
        assert_eq!(arch(&v6, sys::GCN_ARCH_NAME_OFFSET_R0600).as_deref(), Some("gfx942:sramecc+:xnack-"));
        // Read with the wrong layout, the field holds something else (here: nothing).
        assert_eq!(arch(&v6, sys::GCN_ARCH_NAME_OFFSET_R0000), None);
        assert_eq!(arch(&props_with(396, "gfx1100"), 396).as_deref(), Some("gfx1100"));
        assert_eq!(arch(&[0u8; 100], 396), None, "a short buffer is not read past its end");
    }

    #[test]
    fn proc_address_versions_are_100_major_plus_minor() {
        assert_eq!(sys::proc_address_version(60342134), 603);
        assert_eq!(sys::proc_address_version(60100000), 601);
        assert_eq!(sys::proc_address_version(50221153), 502);
        assert_eq!(sys::proc_address_version(-1), 0);
    }
}
