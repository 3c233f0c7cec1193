//! Code objects and kernel functions.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use gpuport_core::{BackendKind, Error, Kernel, Module, ModuleImage, Result};
use gpuport_driver::release::Deferred;

use crate::context::DeviceCtx;
use crate::result;
use crate::sys::{hipFunction_t, hipModule_t};

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
        // SAFETY: loaded by hipModuleLoadData, unloaded once (kernels hold the module).
        if let Err(e) = unsafe { result::module::unload(&self.dev.rt.api, self.raw) } {
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
        other => return Err(Error::unsupported(BackendKind::Rocm, format!("loading a {}", other.kind_name()))),
    };
    dev.bind()?;
    // SAFETY: `data` is a checked image alive for the call.
    let raw = unsafe { result::module::load_data(&dev.rt.api, data) }?;
    Ok(Module::new(dev.id, RocmModule(Arc::new(Deferred::new(ModuleInner { dev: dev.clone(), raw })))))
}

pub(crate) fn kernel(dev: &Arc<DeviceCtx>, module: &Module, name: &str) -> Result<Kernel> {
    let RocmModule(inner) = module.handle_on::<RocmModule>(dev.id, "kernel lookup")?;
    let cname = CString::new(name).map_err(|_| Error::invalid_argument("kernel name contains a NUL byte"))?;
    dev.bind()?;
    // SAFETY: `inner` keeps the module loaded.
    let func = unsafe { result::module::get_function(&dev.rt.api, inner.raw, &cname) }?;
    Ok(Kernel::new(dev.id, name, RocmKernel { _module: inner.clone(), func }))
}
