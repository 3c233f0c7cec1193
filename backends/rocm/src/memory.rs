//! (Its checked calls are `result/memory.rs`.) Pointer attributes: what the runtime says of
//! an address, as gpuport's
//! `PointerAttributes`, for both ROCm 5's and ROCm 6's memory-type numbering.
//! (Allocations are the vendor kit's, `gpuport_vendor_kit::memory`.)

use std::ffi::c_void;

use gpuport_core::{BackendKind, DeviceId, MemoryKind, PointerAttributes, Result};

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{self, hipPointerAttribute_t, MemoryType};

/// Decodes a `hipPointerAttribute_t` from a runtime of major version `major`.
pub(crate) fn decode_pointer(major: u32, attrs: &hipPointerAttribute_t) -> PointerAttributes {
    let (memory, host_accessible) = match sys::decode_memory_type(major, attrs.memoryType) {
        _ if attrs.isManaged != 0 => (MemoryKind::Managed, true),
        Some(MemoryType::Host) => (MemoryKind::PinnedHost, true),
        Some(MemoryType::Device) => (MemoryKind::Device, false),
        Some(MemoryType::Managed) => (MemoryKind::Managed, true),
        Some(MemoryType::Unregistered) | None => return PointerAttributes::unregistered(),
    };
    PointerAttributes {
        device: (attrs.device >= 0).then(|| DeviceId::new(BackendKind::Rocm, attrs.device as u32)),
        memory,
        host_accessible,
        device_accessible: true,
        managed: memory == MemoryKind::Managed,
        allocation: None,
    }
}

/// `hipPointerGetAttributes` for `addr`, and, for memory the runtime knows,
/// `hipMemGetAddressRange` for the allocation holding it (`hipPointerAttribute_t` has no
/// range): what lets an import be checked against the allocation it claims.
pub fn pointer_attributes(dev: &DeviceCtx, addr: u64) -> Result<PointerAttributes> {
    // NULL is nobody's memory. The runtime is not asked: it answers hipErrorInvalidValue
    // before HIP 7 and success (unregistered) from it.
    if addr == 0 {
        return Ok(PointerAttributes::unregistered());
    }
    dev.bind()?;
    let ptr = addr as usize as *const c_void;
    Ok(match result::memory::pointer_attributes(&dev.rt.api, ptr)? {
        Some(attrs) => {
            let mut decoded = decode_pointer(dev.rt.major(), &attrs);
            if decoded.memory != MemoryKind::Unregistered {
                decoded.allocation = result::memory::address_range(&dev.rt, ptr);
            }
            decoded
        }
        // Unregistered host memory, or an address nobody allocated.
        None => PointerAttributes::unregistered(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_int;

    fn attrs(memory_type: c_int, device: c_int, managed: bool) -> hipPointerAttribute_t {
        hipPointerAttribute_t {
            memoryType: memory_type,
            device,
            devicePointer: std::ptr::null_mut(),
            hostPointer: std::ptr::null_mut(),
            isManaged: c_int::from(managed),
            allocationFlags: 0,
        }
    }

    #[test]
    fn rocm5_and_rocm6_memory_types_decode() {
        let d5 = decode_pointer(5, &attrs(sys::memory_type_v5::DEVICE, 1, false));
        assert_eq!((d5.memory, d5.device), (MemoryKind::Device, Some(DeviceId::new(BackendKind::Rocm, 1))));
        let d6 = decode_pointer(6, &attrs(sys::memory_type_v6::DEVICE, 0, false));
        assert_eq!(d6.memory, MemoryKind::Device);
        // The same number means different things in 5 and 6.
        assert_eq!(decode_pointer(5, &attrs(1, 0, false)).memory, MemoryKind::Device);
        assert_eq!(decode_pointer(6, &attrs(1, 0, false)).memory, MemoryKind::PinnedHost);
        assert_eq!(decode_pointer(5, &attrs(0, 0, false)).memory, MemoryKind::PinnedHost);
        assert_eq!(decode_pointer(6, &attrs(0, -1, false)), PointerAttributes::unregistered());
        let m = decode_pointer(5, &attrs(sys::memory_type_v5::DEVICE, 0, true));
        assert!(m.managed && m.host_accessible);
        assert_eq!(decode_pointer(6, &attrs(77, 0, false)), PointerAttributes::unregistered());
    }
}
