//! A vendor device's modules and kernels, written once over [`VendorCalls`]' module calls:
//! a module is unloaded when its last user is gone — its `Module` handle, a `Kernel` of
//! it, or a launch still queued (the stream parks the kernel) — and never on a driver
//! callback thread.

use std::any::Any;
use std::ffi::CString;
use std::sync::{Arc, Weak};

use gpuport_core::{DeviceId, Error, Kernel, Module, ModuleImage, Result};

use crate::calls::VendorCalls;
use crate::device::VendorDevice;
use crate::release::Deferred;

/// A loaded module, unloaded on drop.
struct LoadedModule<V: VendorCalls> {
    dev: Arc<VendorDevice<V>>,
    raw: V::Module,
}

// SAFETY: module handles may be used from any thread (CUDA and HIP both say so); the
// struct is immutable.
unsafe impl<V: VendorCalls> Send for LoadedModule<V> {}
// SAFETY: as above.
unsafe impl<V: VendorCalls> Sync for LoadedModule<V> {}

impl<V: VendorCalls> Drop for LoadedModule<V> {
    fn drop(&mut self) {
        if self.dev.bind().is_err() {
            return;
        }
        // SAFETY: loaded by `module_load`, unloaded once; every kernel of it holds this
        // value, so none is left.
        if let Err(e) = unsafe { self.dev.module_unload(self.raw) } {
            log::warn!("{e}");
        }
    }
}

/// What a vendor device's `Module` holds.
struct VendorModule<V: VendorCalls>(Arc<Deferred<LoadedModule<V>>>);

/// What a vendor device's `Kernel` holds: the function, and its module kept loaded.
struct VendorKernel<V: VendorCalls> {
    _module: Arc<Deferred<LoadedModule<V>>>,
    function: V::Function,
}

// SAFETY: function handles may be used from any thread; the struct is immutable.
unsafe impl<V: VendorCalls> Send for VendorKernel<V> {}
// SAFETY: as above.
unsafe impl<V: VendorCalls> Sync for VendorKernel<V> {}

/// `Device::load_module`: the backend checks and loads the image.
pub(crate) fn load<V: VendorCalls>(dev: &Arc<VendorDevice<V>>, image: ModuleImage<'_>) -> Result<Module> {
    load_shared(dev, image).map(|(module, _)| module)
}

/// [`load`], with a weak reference to the loaded module: the in-process compile cache
/// hands the module out again while someone holds it, without keeping it loaded itself.
pub(crate) fn load_shared<V: VendorCalls>(
    dev: &Arc<VendorDevice<V>>,
    image: ModuleImage<'_>,
) -> Result<(Module, Weak<dyn Any + Send + Sync>)> {
    dev.bind()?;
    let raw = dev.module_load(image)?;
    let loaded = Arc::new(Deferred::new(LoadedModule { dev: dev.clone(), raw }));
    let shared: Arc<dyn Any + Send + Sync> = loaded.clone();
    Ok((Module::new(dev.device_id(), VendorModule(loaded)), Arc::downgrade(&shared)))
}

/// The module behind a weak reference from [`load_shared`], while it is still loaded.
pub(crate) fn revive<V: VendorCalls>(dev: &VendorDevice<V>, weak: &Weak<dyn Any + Send + Sync>) -> Option<Module> {
    let loaded = weak.upgrade()?.downcast::<Deferred<LoadedModule<V>>>().ok()?;
    Some(Module::new(dev.device_id(), VendorModule(loaded)))
}

/// `Device::kernel`: the kernel `name` of a module of this device (a name expression the
/// module was compiled with is looked up by its lowered name).
pub(crate) fn kernel<V: VendorCalls>(dev: &VendorDevice<V>, module: &Module, name: &str) -> Result<Kernel> {
    let VendorModule(loaded) = module.handle_on::<VendorModule<V>>(dev.device_id(), "kernel lookup")?;
    let cname = CString::new(module.lowered_name(name))
        .map_err(|_| Error::invalid_argument("kernel name contains a NUL byte"))?;
    dev.bind()?;
    // SAFETY: `loaded` keeps the module loaded for the call.
    let function = unsafe { dev.module_function(loaded.raw, &cname) }?;
    Ok(Kernel::new(dev.device_id(), name, VendorKernel::<V> { _module: loaded.clone(), function }))
}

/// The function of a kernel of `device` (another device's or backend's is
/// `BackendMismatch`). The kernel keeps its module loaded while the caller holds it.
pub(crate) fn function<V: VendorCalls>(kernel: &Kernel, device: DeviceId) -> Result<V::Function> {
    Ok(kernel.handle_on::<VendorKernel<V>>(device, "launch")?.function)
}
