//! Shared by the vendor backends: mapping raw status codes to [`Error`] and packing kernel
//! arguments. HIP mirrors CUDA's numbering for the codes used here, so one table serves
//! both; each backend supplies its name and how to name a status.

use crate::error::{Error, Result};
use crate::id::DeviceId;
use crate::kernel::KernelArg;
use crate::memory::Buffer;
use crate::parking::Keep;

/// `CUDA_SUCCESS` / `hipSuccess`.
pub const SUCCESS: u32 = 0;
/// `…_INVALID_VALUE`.
pub const INVALID_VALUE: u32 = 1;
/// `…_OUT_OF_MEMORY`.
pub const OUT_OF_MEMORY: u32 = 2;
/// `…_NOT_READY`.
pub const NOT_READY: u32 = 600;

/// A vendor runtime that can name its status codes.
pub trait StatusNames {
    /// The backend name used in errors (`cuda`, `rocm`).
    const BACKEND: &'static str;
    /// The status's name and description, in the vendor's words.
    fn describe(&self, status: u32) -> (String, String);
}

/// Fallbacks for a status the runtime could not name.
pub fn fallback_names(status: u32, name: Option<String>, text: Option<String>, kind: &str) -> (String, String) {
    (name.unwrap_or_else(|| format!("{kind}({status})")), text.unwrap_or_else(|| "unknown error".to_owned()))
}

/// A `Vendor` error for a failed call.
pub fn vendor_error<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Error {
    let (name, message) = names.describe(status);
    Error::Vendor { backend: N::BACKEND, call, code: i64::from(status), name, message }
}

/// `Ok` on success, else the vendor error.
pub fn check<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Result<()> {
    if status == SUCCESS {
        Ok(())
    } else {
        Err(vendor_error(names, status, call))
    }
}

/// For allocations: out-of-memory (and sizes rejected as invalid because no device could
/// ever give them) become `OutOfMemory`.
pub fn check_alloc<N: StatusNames>(
    names: &N,
    status: u32,
    call: &'static str,
    device: DeviceId,
    bytes: usize,
) -> Result<()> {
    match status {
        SUCCESS => Ok(()),
        OUT_OF_MEMORY => Err(Error::OutOfMemory { device, bytes }),
        INVALID_VALUE if bytes > isize::MAX as usize => Err(Error::OutOfMemory { device, bytes }),
        _ => Err(vendor_error(names, status, call)),
    }
}

/// For queries: `Ok(true)` when done, `Ok(false)` for not-ready.
pub fn check_ready<N: StatusNames>(names: &N, status: u32, call: &'static str) -> Result<bool> {
    match status {
        SUCCESS => Ok(true),
        NOT_READY => Ok(false),
        _ => Err(vendor_error(names, status, call)),
    }
}

/// Kernel arguments packed for a vendor launch: one 16-byte slot per argument (a device
/// address or a scalar's bytes), and the handles the launch must keep alive.
pub struct PackedArgs {
    /// One slot per argument; pass `slot.as_mut_ptr()` for each as `kernelParams`.
    pub values: Vec<[u64; 2]>,
    /// Buffers the launch touches.
    pub keep: Vec<Keep>,
}

/// Packs kernel arguments; `accept` checks that a buffer is memory the device may use.
pub fn pack_kernel_args(args: &[KernelArg], accept: impl Fn(&Buffer) -> Result<()>) -> Result<PackedArgs> {
    let mut values = Vec::with_capacity(args.len());
    let mut keep = Vec::with_capacity(args.len());
    for arg in args {
        let mut slot = [0u64; 2];
        match arg {
            KernelArg::Buffer { buffer, offset } => {
                accept(buffer)?;
                let len = buffer.len().checked_sub(*offset).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "kernel argument offset {offset} is past a {}-byte buffer",
                        buffer.len()
                    ))
                })?;
                slot[0] = buffer.range_addr(*offset, len)?;
                keep.push(Keep::Buffer(buffer.clone()));
            }
            KernelArg::Scalar(s) => {
                let bytes = s.bytes();
                // SAFETY: a scalar is at most 16 bytes; the slot holds 16.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot.as_mut_ptr().cast::<u8>(), bytes.len()) };
            }
        }
        values.push(slot);
    }
    Ok(PackedArgs { values, keep })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::BackendKind;

    struct Stub;
    impl StatusNames for Stub {
        const BACKEND: &'static str = "stub";
        fn describe(&self, status: u32) -> (String, String) {
            fallback_names(status, (status == 1).then(|| "ERROR_INVALID_VALUE".into()), None, "Status")
        }
    }

    #[test]
    fn statuses_map_to_errors() {
        let dev = DeviceId::new(BackendKind::Cuda, 0);
        assert!(check(&Stub, SUCCESS, "x").is_ok());
        assert!(matches!(
            check(&Stub, 1, "copy"),
            Err(Error::Vendor { backend: "stub", call: "copy", code: 1, ref name, .. }) if name == "ERROR_INVALID_VALUE"
        ));
        assert!(matches!(check_alloc(&Stub, 2, "alloc", dev, 64), Err(Error::OutOfMemory { bytes: 64, .. })));
        assert!(matches!(check_alloc(&Stub, 1, "alloc", dev, usize::MAX), Err(Error::OutOfMemory { .. })));
        assert!(matches!(check_alloc(&Stub, 1, "alloc", dev, 64), Err(Error::Vendor { .. })));
        assert!(check_ready(&Stub, SUCCESS, "q").unwrap());
        assert!(!check_ready(&Stub, NOT_READY, "q").unwrap());
        assert!(check_ready(&Stub, 700, "q").is_err());
        assert!(check(&Stub, 4242, "init").unwrap_err().to_string().contains("Status(4242)"));
    }

    #[test]
    fn kernel_arguments_pack_into_slots() {
        use crate::memory::{BufferDesc, MemoryKind};
        let desc = BufferDesc {
            addr: 0x1000,
            len: 64,
            device: DeviceId::HOST,
            memory: MemoryKind::Device,
            host_accessible: false,
        };
        // SAFETY: never dereferenced.
        let b = unsafe { Buffer::from_borrowed(desc, None) }.unwrap();
        let packed = pack_kernel_args(
            &[KernelArg::Buffer { buffer: b.clone(), offset: 8 }, KernelArg::scalar(7u32)],
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(packed.values, vec![[0x1008, 0], [7, 0]]);
        assert_eq!(packed.keep.len(), 1);
        assert!(pack_kernel_args(&[KernelArg::Buffer { buffer: b.clone(), offset: 65 }], |_| Ok(())).is_err());
        assert!(pack_kernel_args(&[KernelArg::buffer(&b)], |_| Err(Error::invalid_argument("no"))).is_err());
    }
}
