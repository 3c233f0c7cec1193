//! (Its checked calls are `result/device.rs`.) CUDA devices: their facts (compute
//! capability, multiprocessors, PCI bus and UUID) are
//! CUDA's own; everything else of `Device` is the vendor kit's
//! (`gpuport_vendor_kit::device`) over the driver calls of `calls.rs`.

use std::ffi::c_int;
use std::sync::Arc;

use gpuport_core::{DeviceId, DeviceInfo, Result};
use gpuport_vendor_kit::VendorDevice;

use crate::context::DeviceCtx;
use crate::event::CudaEvent;
use crate::result;
use crate::stream::CudaStream;
use crate::sys::{CUdevice_attribute, Driver};
use crate::CudaBackend;

/// A CUDA device; handles share its retained primary context.
#[derive(Clone)]
pub struct CudaDevice(pub(crate) Arc<VendorDevice<DeviceCtx>>);

/// Facts about device `ordinal` (no context needed).
pub(crate) fn info(driver: &Driver, ordinal: u32) -> Result<DeviceInfo> {
    let api = &driver.api;
    let dev = result::device::get(api, ordinal as c_int)?;
    let attribute = |attr| result::device::attribute(api, dev, attr);
    let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(DeviceInfo {
        id: DeviceId::new(gpuport_core::BackendKind::Cuda, ordinal),
        name: result::device::name(api, dev)?,
        total_memory: result::device::total_mem(api, dev)? as u64,
        compute_capability: Some((major as u32, minor as u32)),
        arch: Some(format!("sm_{major}{minor}")),
        multiprocessors: Some(sms as u32),
        pci_bus_id: result::device::pci_bus_id(api, dev),
        uuid: result::device::uuid(api, dev),
    })
}

gpuport_vendor_kit::impl_vendor_device!(CudaDevice, CudaBackend, CudaStream, CudaEvent);
