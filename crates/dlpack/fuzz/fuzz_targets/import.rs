//! Arbitrary bytes as the fields of a producer's `DLManagedTensorVersioned` (version,
//! ndim, dtype, shape, strides or NULL, byte offset, data pointer or NULL), fed to the
//! importer's validation. It must never crash or read past the shape and strides it was
//! given, and the producer's deleter must run exactly once.

#![no_main]

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpuport_dlpack::abi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use gpuport_dlpack::{validate, ManagedTensor};
use libfuzzer_sys::fuzz_target;

/// Counts deleter calls: an atomic add, which cannot panic (no catch_unwind needed).
unsafe extern "C" fn count(t: *mut DLManagedTensorVersioned) {
    // SAFETY: `manager_ctx` points at the counter on the fuzz target's frame.
    unsafe { &*((*t).manager_ctx as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
}

struct Bytes<'a>(&'a [u8]);
impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let [major, minor, ndim, code, bits, lanes, flags, shape_len] = b.take::<8>();
    let mut shape: Vec<i64> = (0..shape_len % 9).map(|_| i64::from_le_bytes(b.take::<8>())).collect();
    let mut strides: Vec<i64> = (0..shape_len % 9).map(|_| i64::from_le_bytes(b.take::<8>())).collect();
    let byte_offset = u64::from_le_bytes(b.take::<8>());
    let mut memory = [0u8; 256];
    let calls = AtomicUsize::new(0);
    let mut tensor = DLManagedTensorVersioned {
        version: DLPackVersion { major: u32::from(major % 3), minor: u32::from(minor) },
        manager_ctx: (&calls as *const AtomicUsize).cast_mut().cast(),
        deleter: Some(count),
        flags: u64::from(flags),
        dl_tensor: DLTensor {
            data: if flags & 0x80 != 0 { null_mut() } else { memory.as_mut_ptr().cast::<c_void>() },
            device: DLDevice { device_type: 1, device_id: 0 },
            // The field may claim more dimensions than given only when shape is NULL:
            // otherwise the producer's promise (ndim entries at shape) is kept.
            ndim: if flags & 0x40 != 0 { i32::from(ndim as i8) } else { shape.len() as i32 },
            dtype: DLDataType { code, bits, lanes: u16::from(lanes) },
            shape: if flags & 0x40 != 0 { null_mut() } else { shape.as_mut_ptr() },
            strides: if flags & 0x20 != 0 { null_mut() } else { strides.as_mut_ptr() },
            byte_offset,
        },
    };
    // SAFETY: the tensor lives on this frame past the handle, which deletes it once.
    let owned = unsafe { ManagedTensor::from_versioned(&mut tensor) }.unwrap();
    if let Ok(v) = validate(&owned) {
        assert!(v.layout.ndim() <= 64);
        assert!(v.element0 <= v.len || v.len == 0);
    }
    drop(owned);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
});
