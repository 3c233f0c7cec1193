//! The `result` layer of `module.rs` (the layers mirror each other by name, on purpose):
//! modules and kernel lookup: one checked call each.

use std::ffi::{c_void, CStr};

use gpuport_core::{Error, Result};

use super::check;
use crate::sys::{self, hipFunction_t, hipModule_t, Api};

/// `hipModuleLoadData` on the current device.
///
/// # Safety
/// `image` must be a well-formed code object or offload bundle, alive for the call.
pub unsafe fn load_data(api: &Api, image: *const c_void) -> Result<hipModule_t> {
    let mut raw: hipModule_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the caller's contract for `image`.
    check(api, unsafe { (api.hipModuleLoadData)(&mut raw, image) }, "hipModuleLoadData")?;
    Ok(raw)
}

/// `hipModuleUnload`.
///
/// # Safety
/// `module` must be loaded by [`load_data`], unloaded once, with no kernel of it in use.
pub unsafe fn unload(api: &Api, module: hipModule_t) -> Result<()> {
    // SAFETY: the caller's contract.
    check(api, unsafe { (api.hipModuleUnload)(module) }, "hipModuleUnload")
}

/// `hipModuleGetFunction`; a name the module lacks is `InvalidArgument`.
///
/// # Safety
/// `module` must be live.
pub unsafe fn get_function(api: &Api, module: hipModule_t, name: &CStr) -> Result<hipFunction_t> {
    let mut func: hipFunction_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; NUL-terminated name; the caller's contract for `module`.
    let status = unsafe { (api.hipModuleGetFunction)(&mut func, module, name.as_ptr()) };
    if status == sys::ERROR_NOT_FOUND {
        return Err(Error::invalid_argument(format!("the module has no kernel named {name:?}")));
    }
    check(api, status, "hipModuleGetFunction")?;
    Ok(func)
}
