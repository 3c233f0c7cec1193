//! Kernel arguments packed for a vendor launch (`cuLaunchKernel`, `hipModuleLaunchKernel`
//! take an array of pointers, one per parameter, each pointing at the parameter's bytes).

use gpuport_core::{Buffer, Error, KernelArg, Result};

use crate::parking::Keep;

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
        assert_eq!(packed.values, vec![[0x1008, 0], [7, 0]]);
        assert_eq!(packed.keep.len(), 1);
        assert!(pack_kernel_args(&[KernelArg::Buffer { buffer: b.clone(), offset: 65 }], |_| Ok(())).is_err());
        assert!(pack_kernel_args(&[KernelArg::buffer(&b)], |_| Err(Error::invalid_argument("no"))).is_err());
    }
}
