//! Modules (PTX, cubin, fatbin) and kernel functions.

use std::ffi::{c_void, CString};
use std::sync::Arc;

use gpuport_core::{Error, Kernel, Module, ModuleImage, Result};
use gpuport_driver::release::Deferred;

use crate::context::DeviceCtx;
use crate::result::check;
use crate::sys::{self, CUfunction, CUmodule};

struct ModuleInner {
    dev: Arc<DeviceCtx>,
    raw: CUmodule,
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
        let api = &self.dev.driver.api;
        // SAFETY: loaded by cuModuleLoadData, unloaded once (kernels hold the module).
        if let Err(e) = check(api, unsafe { (api.cuModuleUnload)(self.raw) }, "cuModuleUnload") {
            log::warn!("{e}");
        }
    }
}

/// A loaded CUDA module.
pub struct CudaModule(Arc<Deferred<ModuleInner>>);

/// A kernel function; keeps its module loaded.
pub struct CudaKernel {
    _module: Arc<Deferred<ModuleInner>>,
    pub(crate) func: CUfunction,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for CudaKernel {}
// SAFETY: as above.
unsafe impl Sync for CudaKernel {}

pub(crate) fn load(dev: &Arc<DeviceCtx>, image: ModuleImage<'_>) -> Result<Module> {
    let ptx;
    let data: *const c_void = match image {
        ModuleImage::Ptx(text) => {
            ptx = CString::new(text).map_err(|_| Error::invalid_argument("PTX text contains a NUL byte"))?;
            ptx.as_ptr().cast()
        }
        ModuleImage::Cubin(bytes) => {
            // A cubin is an ELF file, a fatbin starts with its own magic; refuse anything
            // else before the driver parses it.
            let elf = bytes.starts_with(b"\x7fELF");
            let fatbin =
                bytes.starts_with(&0xBA55_ED50u32.to_le_bytes()) || bytes.starts_with(&0x466243B1u32.to_le_bytes());
            if !(elf || fatbin) {
                return Err(Error::invalid_argument("not a cubin (ELF) or fatbin image"));
            }
            bytes.as_ptr().cast()
        }
        other => return Err(Error::unsupported("cuda", format!("loading a {}", other.kind_name()))),
    };
    dev.bind()?;
    let api = &dev.driver.api;
    let mut raw: CUmodule = std::ptr::null_mut();
    // SAFETY: `data` is a NUL-terminated PTX string or a checked image, alive for the call.
    check(api, unsafe { (api.cuModuleLoadData)(&mut raw, data) }, "cuModuleLoadData")?;
    Ok(Module::new(dev.id, CudaModule(Arc::new(Deferred::new(ModuleInner { dev: dev.clone(), raw })))))
}

pub(crate) fn kernel(dev: &Arc<DeviceCtx>, module: &Module, name: &str) -> Result<Kernel> {
    let CudaModule(inner) = module.handle_on::<CudaModule>(dev.id, "kernel lookup")?;
    let cname = CString::new(name).map_err(|_| Error::invalid_argument("kernel name contains a NUL byte"))?;
    dev.bind()?;
    let api = &dev.driver.api;
    let mut func: CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointer; live module; NUL-terminated name.
    let status = unsafe { (api.cuModuleGetFunction)(&mut func, inner.raw, cname.as_ptr()) };
    if status == sys::ERROR_NOT_FOUND {
        return Err(Error::invalid_argument(format!("the module has no kernel named {name:?}")));
    }
    check(api, status, "cuModuleGetFunction")?;
    Ok(Kernel::new(dev.id, name, CudaKernel { _module: inner.clone(), func }))
}
