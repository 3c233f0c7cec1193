//! Owned host buffers for work queued on a stream: a copy of some bytes, which the work
//! may read after the caller's slice is gone, or zeroed bytes the work writes into; kept
//! alive by that work as every `Buffer` is.

use std::ptr::NonNull;

use gpuport_core::{Buffer, BufferDesc, DeviceId, MemoryKind, Release, Result};

/// The boxed bytes, freed when the buffer's last clone goes (queued work holds clones
/// until it has run).
struct Boxed(NonNull<[u8]>);

// SAFETY: the box is owned by this value alone; nothing else frees it.
unsafe impl Send for Boxed {}
// SAFETY: `release` takes `&mut self`; shared references do nothing with the pointer.
unsafe impl Sync for Boxed {}

impl Release for Boxed {
    fn release(&mut self, _addr: u64, _len: usize) -> Result<()> {
        // SAFETY: made by `Box::leak` in `owned`, released once (the `Release`
        // contract).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        Ok(())
    }
}

/// A host-accessible buffer owning a copy of `bytes` (which is not empty), ordinary host
/// memory of no device: every backend's streams reach it.
pub(crate) fn host_copy(bytes: &[u8]) -> Result<Buffer> {
    owned(Box::from(bytes))
}

/// A host-accessible buffer of `len` (not 0) zeroed bytes, as [`host_copy`]'s.
pub(crate) fn host_zeroed(len: usize) -> Result<Buffer> {
    owned(crate::fresh_memory::zeroed_bytes(len).into_boxed_slice())
}

fn owned(bytes: Box<[u8]>) -> Result<Buffer> {
    let len = bytes.len();
    let boxed = NonNull::from(Box::leak(bytes));
    let base = boxed.cast::<u8>();
    let desc = BufferDesc {
        addr: base.as_ptr().addr() as u64,
        len,
        device: DeviceId::HOST,
        memory: MemoryKind::Host,
        host_accessible: true,
    };
    // SAFETY: `desc` is exactly the leaked box, host memory valid until `Boxed::release`
    // frees it; `base` is its first byte, with the box's provenance.
    unsafe { Buffer::from_owned_host(base, desc, Box::new(Boxed(boxed))) }
}
