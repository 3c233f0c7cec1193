//! Kernel arguments packed for a vendor launch: each argument's bytes in a slot of its
//! own, with what it is. `cuLaunchKernel` and `hipModuleLaunchKernel` take an array of
//! pointers, one per parameter, each pointing at the parameter's bytes
//! ([`param_pointers`]); a plugin's launch takes the slots with their kinds and sizes.

use std::ffi::c_void;

use gpuport_core::{Buffer, DType, Error, KernelArg, Result};

use crate::parking::Keep;

/// One packed kernel argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgSlot {
    /// The argument's bytes: a device address in `value[0]`, or a scalar's bytes from the
    /// first byte on.
    pub value: [u64; 2],
    /// How many bytes of `value` the argument is (8 for an address).
    pub size: u32,
    /// Whether it is a device address (a buffer's, at its offset).
    pub is_address: bool,
    /// Its element type (`u64` for an address).
    pub dtype: DType,
}

/// One pointer per argument, to its bytes: the `kernelParams` array vendor launches take
/// (they only read through it).
pub fn param_pointers(args: &mut [ArgSlot]) -> Vec<*mut c_void> {
    args.iter_mut().map(|a| a.value.as_mut_ptr().cast()).collect()
}

/// Kernel arguments packed for a vendor launch, and the handles the launch must keep
/// alive.
pub struct PackedArgs {
    /// One slot per argument.
    pub values: Vec<ArgSlot>,
    /// Buffers the launch touches.
    pub keep: Vec<Keep>,
}

/// Packs kernel arguments; `accept` checks that a buffer is memory the device may use.
pub fn pack_kernel_args(args: &[KernelArg], accept: impl Fn(&Buffer) -> Result<()>) -> Result<PackedArgs> {
    let mut values = Vec::with_capacity(args.len());
    let mut keep = Vec::with_capacity(args.len());
    for arg in args {
        let mut slot = ArgSlot { value: [0; 2], size: 8, is_address: false, dtype: DType::U64 };
        match arg {
            KernelArg::Buffer { buffer, offset } => {
                accept(buffer)?;
                let len = buffer.len().checked_sub(*offset).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "kernel argument offset {offset} is past a {}-byte buffer",
                        buffer.len()
                    ))
                })?;
                slot.value[0] = buffer.range_addr(*offset, len)?;
                slot.is_address = true;
                keep.push(Keep::Buffer(buffer.clone()));
            }
            KernelArg::Scalar(s) => {
                let bytes = s.bytes();
                // SAFETY: a scalar is at most 16 bytes; the slot holds 16.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot.value.as_mut_ptr().cast::<u8>(), bytes.len())
                };
                slot.size = bytes.len() as u32;
                slot.dtype = s.dtype();
            }
        }
        values.push(slot);
    }
    Ok(PackedArgs { values, keep })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuport_core::{BufferDesc, DeviceId, MemoryKind};

    #[test]
    fn kernel_arguments_pack_into_slots() {
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
        let address = ArgSlot { value: [0x1008, 0], size: 8, is_address: true, dtype: DType::U64 };
        let scalar = ArgSlot { value: [7, 0], size: 4, is_address: false, dtype: DType::U32 };
        assert_eq!(packed.values, vec![address, scalar]);
        assert_eq!(packed.keep.len(), 1);
        assert!(pack_kernel_args(&[KernelArg::Buffer { buffer: b.clone(), offset: 65 }], |_| Ok(())).is_err());
        assert!(pack_kernel_args(&[KernelArg::buffer(&b)], |_| Err(Error::invalid_argument("no"))).is_err());
    }
}
