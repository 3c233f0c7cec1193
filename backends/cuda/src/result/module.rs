//! The `result` layer of `module.rs` (the layers mirror each other by name, on purpose):
//! modules and kernel lookup: one checked call each.

use std::ffi::{c_void, CStr};

use gpuport_core::{Error, Result};

use super::check;
use crate::sys::{self, Api, CUfunction, CUmodule};

/// `cuModuleLoadData` in the current context.
///
/// # Safety
/// `image` must be a NUL-terminated PTX text or a well-formed cubin/fatbin, alive for the
/// call.
pub unsafe fn load_data(api: &Api, image: *const c_void) -> Result<CUmodule> {
    let mut raw: CUmodule = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the caller's contract for `image`.
    check(api, unsafe { (api.cuModuleLoadData)(&mut raw, image) }, "cuModuleLoadData")?;
    Ok(raw)
}

/// `cuModuleUnload`.
///
/// # Safety
/// `module` must be loaded by [`load_data`], unloaded once, with no kernel of it in use.
pub unsafe fn unload(api: &Api, module: CUmodule) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.cuModuleUnload)(module) }, "cuModuleUnload")
}

/// `cuModuleGetFunction`; a name the module lacks is `InvalidArgument`.
///
/// # Safety
/// `module` must be live.
pub unsafe fn get_function(api: &Api, module: CUmodule, name: &CStr) -> Result<CUfunction> {
    let mut func: CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointer; NUL-terminated name; the caller's contract for `module`.
    let status = unsafe { (api.cuModuleGetFunction)(&mut func, module, name.as_ptr()) };
    if status == sys::ERROR_NOT_FOUND {
        return Err(Error::invalid_argument(format!("the module has no kernel named {name:?}")));
    }
    check(api, status, "cuModuleGetFunction")?;
    Ok(func)
}
