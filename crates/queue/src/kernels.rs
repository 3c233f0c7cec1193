//! Kernels of software devices: Rust functions registered by module and name, launched on
//! a stream. They are a software device's equivalent of PTX modules, and let tests observe
//! ordering.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use gpuport_core::{
    BackendKind, Buffer, DeviceId, Element, Error, Kernel, KernelArg, LaunchConfig, Module, Result, Scalar,
};

/// A host kernel: called once per launch with the launch geometry and its arguments.
pub type HostKernelFn = fn(&LaunchConfig, &HostKernelArgs) -> Result<()>;

type ModuleTable = HashMap<String, HostKernelFn>;

static MODULES: RwLock<Option<HashMap<String, Arc<ModuleTable>>>> = RwLock::new(None);

/// Registers (or replaces) kernel `name` in module `module`. Modules loaded before the call
/// keep the table they were loaded with.
pub fn register_kernel(module: &str, name: &str, f: HostKernelFn) {
    let mut modules = MODULES.write().unwrap_or_else(|p| p.into_inner());
    let modules = modules.get_or_insert_with(HashMap::new);
    let mut table: ModuleTable = modules.get(module).map(|t| (**t).clone()).unwrap_or_default();
    table.insert(name.to_owned(), f);
    modules.insert(module.to_owned(), Arc::new(table));
}

/// The registered table of `module`.
pub fn module_table(module: &str) -> Result<Arc<ModuleTable>> {
    let modules = MODULES.read().unwrap_or_else(|p| p.into_inner());
    modules
        .as_ref()
        .and_then(|m| m.get(module).cloned())
        .ok_or_else(|| Error::invalid_argument(format!("no host module named {module:?} is registered")))
}

/// A module handle of registered kernels.
pub struct HostModule(pub Arc<ModuleTable>);

/// A registered kernel handle.
#[derive(Clone, Copy)]
pub struct HostKernel(pub HostKernelFn);

/// `Device::load_module` for a software device of `kind`: registered modules only.
pub fn load_module(kind: BackendKind, device: DeviceId, image: gpuport_core::ModuleImage<'_>) -> Result<Module> {
    match image {
        gpuport_core::ModuleImage::Registered(name) => Ok(Module::new(device, HostModule(module_table(name)?))),
        other => Err(Error::unsupported(
            kind,
            format!(
                "loading a {} (register Rust functions with gpuport_queue::register_kernel instead)",
                other.kind_name()
            ),
        )),
    }
}

/// `Device::kernel` for a software device of `kind`; a module of another device or backend
/// is `BackendMismatch`.
pub fn kernel(kind: BackendKind, device: DeviceId, module: &Module, name: &str) -> Result<Kernel> {
    let HostModule(table) = module.handle_on::<HostModule>(device, "kernel lookup")?;
    let f = table
        .get(name)
        .ok_or_else(|| Error::invalid_argument(format!("{kind} module has no kernel named {name:?}")))?;
    Ok(Kernel::new(device, name, HostKernel(*f)))
}

/// Translates kernel arguments to host pointers, checking every buffer, and returns the
/// buffers the launch must keep alive. `translate(buffer, offset, len)` gives the host
/// pointer for a range of a buffer (software devices translate their own addresses).
pub fn translate_args(
    args: &[KernelArg],
    translate: impl Fn(&Buffer, usize, usize) -> Result<*mut u8>,
) -> Result<(HostKernelArgs, Vec<Buffer>)> {
    let mut translated = Vec::with_capacity(args.len());
    let mut keep = Vec::new();
    for arg in args {
        match arg {
            KernelArg::Buffer { buffer, offset } => {
                let len = buffer.len().checked_sub(*offset).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "kernel argument offset {offset} is past a {}-byte buffer",
                        buffer.len()
                    ))
                })?;
                translated.push(HostArg::Ptr(translate(buffer, *offset, len)?, len));
                keep.push(buffer.clone());
            }
            KernelArg::Scalar(s) => translated.push(HostArg::Scalar(*s)),
        }
    }
    Ok((HostKernelArgs::new(translated), keep))
}

/// One translated argument of a host kernel.
#[derive(Debug, Clone, Copy)]
pub enum HostArg {
    /// A host pointer and the bytes available from it.
    Ptr(*mut u8, usize),
    /// A value.
    Scalar(Scalar),
}

/// The arguments of one host kernel launch. The launch keeps every buffer alive and
/// ordered for the duration of the call.
pub struct HostKernelArgs {
    args: Vec<HostArg>,
}

// SAFETY: the pointers refer to buffers the queued launch keeps alive; the stream orders
// all access to them.
unsafe impl Send for HostKernelArgs {}

impl HostKernelArgs {
    /// Arguments from translated pointers and scalars.
    pub fn new(args: Vec<HostArg>) -> Self {
        HostKernelArgs { args }
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.args.len()
    }
    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    fn arg(&self, i: usize) -> Result<&HostArg> {
        self.args.get(i).ok_or_else(|| {
            Error::invalid_argument(format!("kernel argument {i} is missing ({} given)", self.args.len()))
        })
    }

    /// Argument `i` as a pointer and the number of bytes reachable from it.
    pub fn ptr(&self, i: usize) -> Result<(*mut u8, usize)> {
        match self.arg(i)? {
            HostArg::Ptr(p, n) => Ok((*p, *n)),
            HostArg::Scalar(_) => {
                Err(Error::invalid_argument(format!("kernel argument {i} is a scalar, not a buffer")))
            }
        }
    }

    /// Argument `i` as a mutable slice of `T`, covering every whole `T` reachable.
    ///
    /// # Safety
    /// No other live reference (including another argument) may alias the slice while it
    /// is used, and the bytes must be valid `T`s (true for every [`Element`]).
    // A kernel argument is a raw device pointer, like a CUDA kernel's: handing out `&mut`
    // from `&self` is the point, and the aliasing rule is the caller's (see Safety).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut<T: Element>(&self, i: usize) -> Result<&mut [T]> {
        let (p, n) = self.ptr(i)?;
        if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::invalid_argument(format!("kernel argument {i} is not aligned for {}", T::DTYPE)));
        }
        // SAFETY: `p` is valid for `n` bytes (checked when the launch was queued), aligned
        // for T (checked above), and the caller rules out aliasing.
        Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<T>(), n / std::mem::size_of::<T>()) })
    }

    /// Argument `i` as a scalar of type `T`.
    pub fn scalar<T: Element>(&self, i: usize) -> Result<T> {
        match self.arg(i)? {
            HostArg::Scalar(s) => s.get::<T>(),
            HostArg::Ptr(..) => Err(Error::invalid_argument(format!("kernel argument {i} is a buffer, not a scalar"))),
        }
    }
}
