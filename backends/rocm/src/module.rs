//! Code objects and kernel functions.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use gpuport_core::{Error, Kernel, Module, ModuleImage, Result};
use gpuport_driver::release::Deferred;

use crate::context::DeviceCtx;
use crate::result::check;
use crate::sys::{self, hipFunction_t, hipModule_t};

struct ModuleInner {
    dev: Arc<DeviceCtx>,
    raw: hipModule_t,
}

// SAFETY: module handles may be used from any thread.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.dev.bind().is_err() {
            return;
        }
        let api = &self.dev.rt.api;
        // SAFETY: loaded by hipModuleLoadData, unloaded once.
        if let Err(e) = check(api, unsafe { (api.hipModuleUnload)(self.raw) }, "hipModuleUnload") {
            log::warn!("{e}");
        }
    }
}

/// A loaded code object.
pub struct RocmModule(Arc<Deferred<ModuleInner>>);

/// A kernel function; keeps its module loaded.
pub struct RocmKernel {
    _module: Arc<Deferred<ModuleInner>>,
    pub(crate) func: hipFunction_t,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for RocmKernel {}
// SAFETY: as above.
unsafe impl Sync for RocmKernel {}

pub(crate) fn load(dev: &Arc<DeviceCtx>, image: ModuleImage<'_>) -> Result<Module> {
    let data: *const c_void = match image {
        // Code objects are ELF files, possibly in a clang offload bundle.
        ModuleImage::HipCodeObject(bytes)
            if bytes.starts_with(b"\x7fELF") || bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") =>
        {
            bytes.as_ptr().cast()
        }
        ModuleImage::HipCodeObject(_) => {
            return Err(Error::invalid_argument("not an AMD GPU code object (ELF or offload bundle)"))
        }
        other => return Err(Error::unsupported("rocm", format!("loading a {}", other.kind_name()))),
    };
    dev.bind()?;
    let api = &dev.rt.api;
    let mut raw: hipModule_t = std::ptr::null_mut();
    // SAFETY: `data` is a checked image alive for the call.
    check(api, unsafe { (api.hipModuleLoadData)(&mut raw, data) }, "hipModuleLoadData")?;
    Ok(Module::new(dev.id, RocmModule(Arc::new(Deferred::new(ModuleInner { dev: dev.clone(), raw })))))
}

pub(crate) fn kernel(dev: &Arc<DeviceCtx>, module: &Module, name: &str) -> Result<Kernel> {
    let RocmModule(inner) = module.handle_on::<RocmModule>(dev.id, "kernel lookup")?;
    let cname = CString::new(name).map_err(|_| Error::invalid_argument("kernel name contains a NUL byte"))?;
    dev.bind()?;
    let api = &dev.rt.api;
    let mut func: hipFunction_t = std::ptr::null_mut();
    // SAFETY: valid out-pointer; live module; NUL-terminated name.
    let status = unsafe { (api.hipModuleGetFunction)(&mut func, inner.raw, cname.as_ptr()) };
    if status == sys::ERROR_NOT_FOUND {
        return Err(Error::invalid_argument(format!("the module has no kernel named {name:?}")));
    }
    check(api, status, "hipModuleGetFunction")?;
    Ok(Kernel::new(dev.id, name, RocmKernel { _module: inner.clone(), func }))
}
