//! A vendor device's modules and kernels, written once over [`VendorCalls`]' module calls
//! (and modules compiled from source: `compile`, over the kit's `compile` module):
//! a module is unloaded when its last user is gone — its `Module` handle, a `Kernel` of
//! it, or a launch still queued (the stream parks the kernel) — and never on a driver
//! callback thread.

use std::any::Any;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use gpuport_core::{CompileOptions, DeviceId, Error, Kernel, KernelSource, Module, ModuleImage, Result};

use crate::calls::VendorCalls;
use crate::compile::{compile_for, CompileTarget, Compiled};
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

/// One compilation remembered in the process.
struct Remembered {
    device: DeviceId,
    source: KernelSource,
    options: CompileOptions,
    compiled: Arc<Compiled>,
    /// The image's lowered names, shared by every module handed out for it.
    lowered: Arc<[(String, String)]>,
    loaded: Weak<dyn Any + Send + Sync>,
}

type Memory = Mutex<HashMap<u64, Vec<Remembered>>>;

fn memory() -> &'static Memory {
    static MEMORY: OnceLock<Memory> = OnceLock::new();
    MEMORY.get_or_init(Default::default)
}

fn memory_key(device: DeviceId, source: &KernelSource, options: &CompileOptions) -> u64 {
    let mut h = DefaultHasher::new();
    (device, source, options).hash(&mut h);
    h.finish()
}

/// `Device::compile` for a vendor device: the in-process cache (a compilation of the same
/// source with the same options for the same device costs a hash lookup while the module
/// it made is still held, and the image is kept, so a module dropped since is reloaded
/// without compiling), then [`compile_for`] (the disk cache, then the compiler), then the
/// image loaded as any module is, knowing its name expressions' lowered names.
pub(crate) fn compile<V: VendorCalls>(
    dev: &Arc<VendorDevice<V>>,
    source: &KernelSource,
    options: &CompileOptions,
) -> Result<Module> {
    let id = dev.device_id();
    let mkey = memory_key(id, source, options);
    let remembered = {
        let map = memory().lock().unwrap_or_else(|p| p.into_inner());
        map.get(&mkey).and_then(|list| {
            list.iter()
                .find(|r| r.device == id && r.source == *source && r.options == *options)
                .map(|r| (revive(dev, &r.loaded), r.compiled.clone(), r.lowered.clone()))
        })
    };
    let (compiled, lowered) = match remembered {
        // The hit: no allocation but the module handle's.
        Some((Some(module), _, lowered)) => return Ok(module.with_lowered_names(lowered)),
        Some((None, compiled, lowered)) => (compiled, lowered),
        None => {
            let compiled = compile_or_read(dev, source, options)?;
            let lowered: Arc<[(String, String)]> = compiled.lowered.clone().into();
            (Arc::new(compiled), lowered)
        }
    };
    let (module, loaded) = load_shared(dev, compiled.module_image()?)?;
    let mut map = memory().lock().unwrap_or_else(|p| p.into_inner());
    let list = map.entry(mkey).or_default();
    list.retain(|r| !(r.device == id && r.source == *source && r.options == *options));
    list.push(Remembered {
        device: id,
        source: source.clone(),
        options: options.clone(),
        compiled,
        lowered: lowered.clone(),
        loaded,
    });
    Ok(module.with_lowered_names(lowered))
}

/// The image from the disk cache, or compiled (and stored there).
fn compile_or_read<V: VendorCalls>(
    dev: &VendorDevice<V>,
    source: &KernelSource,
    options: &CompileOptions,
) -> Result<Compiled> {
    let CompileTarget { compiler, arch } = dev.compile_target()?;
    compile_for(compiler.as_ref(), &arch, source, options)
}
