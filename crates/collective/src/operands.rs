//! A collective's arrays as every engine takes them: each one's part (read, written, or
//! both) and the checks every engine makes of them.

use gpuport_core::{Error, Result};
use gpuport_runtime::Array;

/// One array's part in a collective: whether the engine reads it, writes it, or both.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    In,
    Out,
    InOut,
}

/// The checks every engine makes of a collective's arrays: an output is writable, each is
/// contiguous, each dtype has a size.
pub(crate) fn check_arrays(engine: &'static str, what: &str, arrays: &[(&Array, Role)]) -> Result<()> {
    for (a, role) in arrays {
        if *role != Role::In && a.is_read_only() {
            return Err(Error::invalid_argument(format!(
                "{what}: it writes its result into a read-only array (shape {:?} on {})",
                a.shape(),
                a.device_id()
            )));
        }
        if !a.layout().is_c_contiguous() {
            return Err(Error::invalid_argument(format!(
                "{what}: a strided array (shape {:?}, strides {:?}) — collectives take contiguous arrays; copy it first",
                a.shape(),
                a.strides()
            )));
        }
        if a.dtype().itemsize().is_err() {
            return Err(Error::EngineUnsupported { engine, what: format!("{} arrays", a.dtype()) });
        }
    }
    Ok(())
}
