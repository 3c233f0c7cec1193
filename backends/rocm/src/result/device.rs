//! The `result` layer of `device.rs` (the layers mirror each other by name, on purpose):
//! device queries, the current device and peer access: one checked call each. HIP names
//! devices by ordinal, so nothing here takes a handle that could dangle.

use std::ffi::{c_char, c_int};

use gpuport_core::Result;
use gpuport_vendor_kit::c_text::c_text;

use super::check;
use crate::sys::{self, hipUUID, Api, Runtime};

/// `hipGetDeviceCount`.
pub fn count(api: &Api) -> Result<c_int> {
    let mut count: c_int = 0;
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.hipGetDeviceCount)(&mut count) }, "hipGetDeviceCount")?;
    Ok(count)
}

/// `hipGetDevice`: the calling thread's current device.
pub fn get_current(api: &Api) -> Result<c_int> {
    let mut current: c_int = -1;
    // SAFETY: valid out-pointer.
    check(api, unsafe { (api.hipGetDevice)(&mut current) }, "hipGetDevice")?;
    Ok(current)
}

/// `hipSetDevice`.
pub fn set_current(api: &Api, ordinal: c_int) -> Result<()> {
    // SAFETY: the runtime checks the ordinal.
    check(api, unsafe { (api.hipSetDevice)(ordinal) }, "hipSetDevice")
}

/// `hipDeviceSynchronize` on the current device.
pub fn synchronize(api: &Api) -> Result<()> {
    // SAFETY: no arguments.
    check(api, unsafe { (api.hipDeviceSynchronize)() }, "hipDeviceSynchronize")
}

/// `hipDeviceGetName`, as text.
pub fn name(api: &Api, ordinal: c_int) -> Result<String> {
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes; the runtime checks the ordinal.
    check(api, unsafe { (api.hipDeviceGetName)(name.as_mut_ptr(), 256, ordinal) }, "hipDeviceGetName")?;
    Ok(c_text(&name))
}

/// `hipDeviceTotalMem`.
pub fn total_mem(api: &Api, ordinal: c_int) -> Result<usize> {
    let mut total = 0usize;
    // SAFETY: valid out-pointer; the runtime checks the ordinal.
    check(api, unsafe { (api.hipDeviceTotalMem)(&mut total, ordinal) }, "hipDeviceTotalMem")?;
    Ok(total)
}

/// `hipDeviceGetPCIBusId`, as text; `None` where the runtime cannot tell.
pub fn pci_bus_id(api: &Api, ordinal: c_int) -> Option<String> {
    let mut pci = [0 as c_char; 32];
    // SAFETY: the buffer holds 32 bytes; the runtime checks the ordinal.
    let ok = unsafe { (api.hipDeviceGetPCIBusId)(pci.as_mut_ptr(), 32, ordinal) } == sys::SUCCESS;
    ok.then(|| c_text(&pci))
}

/// `hipDeviceGetUuid`; `None` where the runtime cannot tell.
pub fn uuid(api: &Api, ordinal: c_int) -> Option<[u8; 16]> {
    let mut uuid = hipUUID::default();
    // SAFETY: valid out-pointer; the runtime checks the ordinal.
    let ok = unsafe { (api.hipDeviceGetUuid)(&mut uuid, ordinal) } == sys::SUCCESS;
    ok.then(|| uuid.bytes.map(|b| b as u8))
}

/// The device's `hipDeviceProp_t` as bytes, with the offset of `gcnArchName` in them: the
/// ROCm 6 layout through `hipGetDevicePropertiesR0600` where the runtime is 6 or newer,
/// else the ROCm 5 layout through `hipGetDeviceProperties`; `None` when neither answers.
pub fn properties(rt: &Runtime, ordinal: c_int) -> Option<(Vec<u8>, usize)> {
    let (get, offset) = match rt.device_properties_r0600() {
        Some(get) if rt.major() >= 6 => (get, sys::GCN_ARCH_NAME_OFFSET_R0600),
        _ => (rt.device_properties()?, sys::GCN_ARCH_NAME_OFFSET_R0000),
    };
    let mut props = vec![0u64; sys::DEVICE_PROP_BUFFER / 8];
    // SAFETY: the buffer is 8-byte aligned and larger than either hipDeviceProp_t layout;
    // the runtime checks the ordinal.
    if unsafe { get(props.as_mut_ptr().cast(), ordinal) } != sys::SUCCESS {
        return None;
    }
    Some((props.iter().flat_map(|w| w.to_ne_bytes()).collect(), offset))
}

/// `hipDeviceGetAttribute` (`attr` from hip_runtime_api.h).
pub fn attribute(api: &Api, ordinal: c_int, attr: c_int) -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: valid out-pointer; the runtime checks the attribute and the ordinal.
    check(api, unsafe { (api.hipDeviceGetAttribute)(&mut v, attr, ordinal) }, "hipDeviceGetAttribute")?;
    Ok(v)
}

/// `hipDeviceGetStreamPriorityRange` of the current device: (least, greatest).
pub fn stream_priority_range(api: &Api) -> Result<(c_int, c_int)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    let status = unsafe { (api.hipDeviceGetStreamPriorityRange)(&mut least, &mut greatest) };
    check(api, status, "hipDeviceGetStreamPriorityRange")?;
    Ok((least, greatest))
}

/// `hipDeviceCanAccessPeer`.
pub fn can_access_peer(api: &Api, ordinal: c_int, peer: c_int) -> Result<bool> {
    let mut can: c_int = 0;
    // SAFETY: valid out-pointer; the runtime checks both ordinals.
    check(api, unsafe { (api.hipDeviceCanAccessPeer)(&mut can, ordinal, peer) }, "hipDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// `hipDeviceEnablePeerAccess` from the current device to `peer`; already enabled is
/// success.
pub fn enable_peer_access(api: &Api, peer: c_int) -> Result<()> {
    // SAFETY: the runtime checks the ordinal; flags must be 0.
    let status = unsafe { (api.hipDeviceEnablePeerAccess)(peer, 0) };
    if status == sys::ERROR_PEER_ACCESS_ALREADY_ENABLED {
        return Ok(());
    }
    check(api, status, "hipDeviceEnablePeerAccess")
}
