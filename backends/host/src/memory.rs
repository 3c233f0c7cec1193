//! Host allocations: `gpuport-queue`'s aligned, cached blocks, entered in the host's pointer
//! registry (host memory only: other software devices keep registries of their own).

use gpuport_core::{Buffer, DeviceId, MemoryKind, PointerAttributes, Result};
use gpuport_queue::memory::{host_buffer, PointerRegistry};

static REGISTRY: PointerRegistry = PointerRegistry::new();

/// `bytes` of host memory of `kind` (contents unspecified), refused up front above `limit`.
pub(crate) fn allocate(bytes: usize, kind: MemoryKind, limit: u64) -> Result<Buffer> {
    host_buffer(&REGISTRY, DeviceId::HOST, bytes, kind, limit)
}

/// What the host registry knows about `addr`.
pub(crate) fn attributes(addr: u64) -> PointerAttributes {
    REGISTRY.attributes(addr)
}
