//! Launching a kernel on arrays: the launch waits for the pending work of every array it
//! is given (as a writer: a kernel's arguments may be written), runs on the stream, and is
//! recorded as each array's latest writer, so later users of any view order after it — the
//! same protocol the copy engine follows for its copies.

use gpuport_core::{Error, Kernel, KernelArg, LaunchConfig, Result, Scalar};

use crate::dynamic::AnyStream;
use crate::pending::Access;
use crate::Array;

/// One argument of [`launch_on_arrays`].
#[derive(Clone)]
pub enum LaunchArg {
    /// The address of the array's element at index 0 (its strides are the kernel's to
    /// know, as with CuPy's `RawKernel`). A read-only array is passed for reading.
    Array(Array),
    /// A value passed by copy.
    Scalar(Scalar),
}

/// Launches `kernel` on `stream` with `args`, ordered after every array argument's
/// pending work and recorded as its latest access. Every array must live on the stream's
/// device.
pub fn launch_on_arrays(stream: &AnyStream, kernel: &Kernel, config: &LaunchConfig, args: &[LaunchArg]) -> Result<()> {
    let device = stream.device_id();
    let access = |a: &Array| if a.is_read_only() { Access::Read } else { Access::Write };
    let mut kernel_args = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        kernel_args.push(match arg {
            LaunchArg::Array(a) => {
                if a.device_id() != device {
                    return Err(Error::invalid_argument(format!(
                        "kernel argument {i} is an array on {}, the launch is on {device}",
                        a.device_id()
                    )));
                }
                KernelArg::Buffer { buffer: a.buffer().clone(), offset: a.byte_offset() }
            }
            LaunchArg::Scalar(s) => KernelArg::Scalar(*s),
        });
    }
    for arg in args {
        if let LaunchArg::Array(a) = arg {
            a.wait_pending(stream, access(a))?;
        }
    }
    stream.launch(kernel, config, &kernel_args)?;
    for arg in args {
        if let LaunchArg::Array(a) = arg {
            a.record_access(stream, access(a))?;
        }
    }
    Ok(())
}
