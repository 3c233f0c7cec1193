//! Device mapping, both ways, read from what each backend declares
//! (`Backend::DLPACK`): no table here names a backend, so a registered plugin maps like a
//! built-in one.

use gpuport::{AnyDevice, Array, BackendKind, DlDeviceType, Error, MemoryKind, Result, Runtime};

use crate::abi::DLDevice;

/// The `DLDevice` an array exports as: its backend's declared type for the kind of memory
/// its allocation is (a pinned buffer is `kDLCUDAHost`, not `kDLCPU`), with the device's
/// ordinal (0 for pinned and managed memory, as the header asks).
pub fn dl_device_of(array: &Array) -> Result<DLDevice> {
    let memory = array.buffer().memory();
    let declared = array.device().dlpack_devices();
    let ty = declared.for_memory(memory).ok_or_else(|| Error::Interchange {
        what: format!("{:?} memory of {} has no DLPack device type", memory, array.device_id()),
    })?;
    let device_id = match memory {
        MemoryKind::Device | MemoryKind::Host => array.device_id().ordinal as i32,
        _ => 0,
    };
    Ok(DLDevice { device_type: ty.0, device_id })
}

/// Where a `DLDevice` lives in gpuport.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The device that owns (or, for pinned and managed memory, registered) the memory.
    pub device: AnyDevice,
    /// What kind of memory the type denotes.
    pub memory: MemoryKind,
}

/// The gpuport device and memory kind of `dl`: the first available backend declaring the
/// type for its device memory, else for its pinned or managed memory. `kDLCPU` is the host.
/// An unknown or unsupported type, or an ordinal past the backend's devices, is an error
/// naming it.
pub fn resolve(rt: &Runtime, dl: DLDevice) -> Result<Resolved> {
    let ty = DlDeviceType(dl.device_type);
    if ty == DlDeviceType::CPU {
        // The runtime's report hands out the opened host device without a lookup by name
        // string; `Runtime::device` gives the error when the host was left out.
        let device = match rt.report_for(BackendKind::Host.name()) {
            Some(host) => host.open(0)?,
            None => rt.device(BackendKind::Host.name())?,
        };
        return Ok(Resolved { device, memory: MemoryKind::Host });
    }
    let declared = |want_device: bool| {
        rt.reports().iter().find_map(|r| {
            let decl = r.dlpack_devices()?;
            let memory = decl.memory_for(ty)?;
            (want_device == (memory == MemoryKind::Device)).then_some((r, memory))
        })
    };
    let (report, memory) = declared(true).or_else(|| declared(false)).ok_or_else(|| Error::Interchange {
        what: format!("no available backend handles DLPack {ty} (device_id {})", dl.device_id),
    })?;
    let ordinal = u32::try_from(dl.device_id)
        .map_err(|_| Error::Interchange { what: format!("a negative device_id {} for {ty}", dl.device_id) })?;
    Ok(Resolved { device: report.open(ordinal)?, memory })
}
