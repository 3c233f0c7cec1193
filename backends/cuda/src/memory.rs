//! (Its checked calls are `result/memory.rs`.) Pointer attributes: what the driver says of
//! an address, as gpuport's
//! `PointerAttributes`. (Allocations are the vendor kit's, `gpuport_vendor_kit::memory`.)

use std::ffi::{c_int, c_uint};

use gpuport_core::{BackendKind, DeviceId, MemoryKind, PointerAttributes, Result};

use crate::context::DeviceCtx;
use crate::result;
use crate::sys;

/// Decodes `cuPointerGetAttributes` answers.
pub(crate) fn decode_pointer(
    memory_type: c_uint,
    ordinal: c_int,
    managed: bool,
    start: u64,
    size: usize,
) -> PointerAttributes {
    let device = (ordinal >= 0).then(|| DeviceId::new(BackendKind::Cuda, ordinal as u32));
    let (memory, host_accessible) = match (memory_type, managed) {
        (_, true) => (MemoryKind::Managed, true),
        (sys::MEMORYTYPE_HOST, _) => (MemoryKind::PinnedHost, true),
        (sys::MEMORYTYPE_DEVICE | sys::MEMORYTYPE_ARRAY, _) => (MemoryKind::Device, false),
        (sys::MEMORYTYPE_UNIFIED, _) => (MemoryKind::Managed, true),
        _ => return PointerAttributes::unregistered(),
    };
    PointerAttributes {
        device,
        memory,
        host_accessible,
        device_accessible: true,
        managed: memory == MemoryKind::Managed,
        allocation: (start != 0).then_some((start, size)),
    }
}

/// `cuPointerGetAttributes` for `addr`.
pub fn pointer_attributes(dev: &DeviceCtx, addr: u64) -> Result<PointerAttributes> {
    dev.bind()?;
    Ok(match result::memory::pointer_attributes(&dev.driver.api, addr)? {
        Some(p) => decode_pointer(p.memory_type, p.ordinal, p.managed, p.start, p.size),
        // Unregistered host memory, or an address nobody allocated.
        None => PointerAttributes::unregistered(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_attributes_decode() {
        let d = decode_pointer(sys::MEMORYTYPE_DEVICE, 1, false, 0x7000, 4096);
        assert_eq!(d.device, Some(DeviceId::new(BackendKind::Cuda, 1)));
        assert_eq!((d.memory, d.host_accessible, d.managed), (MemoryKind::Device, false, false));
        assert_eq!(d.allocation, Some((0x7000, 4096)));
        let p = decode_pointer(sys::MEMORYTYPE_HOST, 0, false, 0x1000, 64);
        assert_eq!((p.memory, p.host_accessible), (MemoryKind::PinnedHost, true));
        let m = decode_pointer(sys::MEMORYTYPE_DEVICE, 0, true, 0x2000, 64);
        assert_eq!((m.memory, m.host_accessible, m.managed), (MemoryKind::Managed, true, true));
        assert_eq!(decode_pointer(0, -1, false, 0, 0), PointerAttributes::unregistered());
        assert_eq!(decode_pointer(sys::MEMORYTYPE_DEVICE, -1, false, 0, 0).device, None);
    }
}
