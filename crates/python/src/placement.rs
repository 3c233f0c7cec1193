//! Placing an array where the caller asked (`device=`, `copy=`): shared by `asarray` and
//! both DLPack import paths.

use gpuport::{AnyDevice, Array};
use pyo3::prelude::*;

use crate::errors::{to_py, Context};

/// `array` on `device` (a copy through the copy engine when it is elsewhere, or when
/// `copy=True`); `copy=False` with another device is an error of `context`'s kind.
pub fn place(
    py: Python<'_>,
    array: Array,
    device: Option<AnyDevice>,
    copy: Option<bool>,
    context: Context,
) -> PyResult<Array> {
    let target = device.unwrap_or_else(|| array.device().clone());
    if target.id() == array.device_id() && copy != Some(true) {
        return Ok(array);
    }
    if copy == Some(false) {
        let what = format!("copy=False, but the data is on {} and {} was asked for", array.device_id(), target.id());
        return Err(to_py(gpuport::Error::Interchange { what }, context));
    }
    py.detach(|| array.to_device(&target)).map_err(|e| to_py(e, context))
}
