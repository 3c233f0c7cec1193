//! Modules and kernel launches, backend-neutral: module images, launch geometry and
//! arguments. Backends keep their own module/function handles inside [`Module`] and
//! [`Kernel`] and check the type when a launch comes back to them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::id::DeviceId;
use crate::memory::Buffer;

/// Code to load onto a device. Open to formats core does not know: a port with its own
/// binary format passes [`ModuleImage::Custom`] with its own format tag.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum ModuleImage<'a> {
    /// PTX source text (CUDA).
    Ptx(&'a str),
    /// A cubin or fatbin (CUDA).
    Cubin(&'a [u8]),
    /// An AMD GPU code object (ROCm).
    HipCodeObject(&'a [u8]),
    /// A module of Rust functions registered by name with a software backend (host, ext).
    Registered(&'a str),
    /// An image in a format of a port's own: a tag the port recognises (for example
    /// `"spirv"`, `"myaccel-bin"`) and the bytes.
    Custom {
        /// The format tag.
        format: &'a str,
        /// The image.
        bytes: &'a [u8],
    },
}

impl<'a> ModuleImage<'a> {
    /// A short name of the image format, for errors (the tag, for a custom format).
    pub fn kind_name(&self) -> &'a str {
        match self {
            ModuleImage::Ptx(_) => "PTX",
            ModuleImage::Cubin(_) => "cubin",
            ModuleImage::HipCodeObject(_) => "HIP code object",
            ModuleImage::Registered(_) => "registered module",
            ModuleImage::Custom { format, .. } => format,
        }
    }
}

type Handle = Arc<dyn Any + Send + Sync>;

/// A loaded module. Cloning shares it; it is unloaded when the last clone (and the last
/// [`Kernel`] taken from it) is dropped.
#[derive(Clone)]
pub struct Module {
    device: DeviceId,
    handle: Handle,
    /// Name expressions the module was compiled with, and the names they lowered to.
    lowered: Option<Arc<[(String, String)]>>,
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module").field("device", &self.device).finish_non_exhaustive()
    }
}

impl Module {
    /// Wraps a backend's module handle.
    pub fn new(device: DeviceId, handle: impl Any + Send + Sync) -> Self {
        Module { device, handle: Arc::new(handle), lowered: None }
    }
    /// The same module, knowing the lowered (mangled) name of each name expression it was
    /// compiled with: `(expression, lowered)` (a `Vec`, or an `Arc` shared by every module
    /// made from one compilation).
    pub fn with_lowered_names(mut self, names: impl Into<Arc<[(String, String)]>>) -> Self {
        let names = names.into();
        self.lowered = (!names.is_empty()).then_some(names);
        self
    }
    /// The name to look `name` up by in the image: the lowered name when `name` is a name
    /// expression the module was compiled with, else `name` itself.
    pub fn lowered_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.lowered
            .as_deref()
            .and_then(|names| names.iter().find(|(expr, _)| expr == name))
            .map_or(name, |(_, lowered)| lowered.as_str())
    }
    /// The device it was loaded on.
    pub fn device(&self) -> DeviceId {
        self.device
    }
    /// The backend's handle, when it is of type `T`.
    pub fn handle<T: Any>(&self) -> Option<&T> {
        self.handle.downcast_ref()
    }
    /// The backend's handle for use on `device` (see [`Kernel::handle_on`]).
    pub fn handle_on<T: Any>(&self, device: DeviceId, operation: &'static str) -> Result<&T> {
        checked(&self.handle, self.device, device, operation)
    }
}

/// The handle of a module or kernel of `found`, checked for use on `device`: the same
/// device and the backend's own handle type, else `BackendMismatch`. Two software
/// backends may share a handle type, so the type alone proves nothing.
fn checked<'h, T: Any>(
    handle: &'h Handle,
    found: DeviceId,
    device: DeviceId,
    operation: &'static str,
) -> Result<&'h T> {
    match handle.downcast_ref() {
        Some(h) if found == device => Ok(h),
        _ => Err(Error::BackendMismatch {
            operation,
            expected: format!("a module or kernel of {device}"),
            found: found.to_string(),
        }),
    }
}

/// A kernel function of a loaded module.
#[derive(Clone)]
pub struct Kernel {
    device: DeviceId,
    name: Arc<str>,
    handle: Handle,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel").field("device", &self.device).field("name", &self.name).finish_non_exhaustive()
    }
}

impl Kernel {
    /// Wraps a backend's function handle (which should keep its module loaded).
    pub fn new(device: DeviceId, name: &str, handle: impl Any + Send + Sync) -> Self {
        Kernel { device, name: name.into(), handle: Arc::new(handle) }
    }
    /// The device it was loaded on.
    pub fn device(&self) -> DeviceId {
        self.device
    }
    /// The function's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The backend's handle, when it is of type `T`; `None` means the kernel belongs to
    /// another backend.
    pub fn handle<T: Any>(&self) -> Option<&T> {
        self.handle.downcast_ref()
    }
    /// The backend's handle for use on `device`: `BackendMismatch` unless the kernel was
    /// looked up on `device` and its handle is of type `T`. Backends call this before
    /// every launch.
    pub fn handle_on<T: Any>(&self, device: DeviceId, operation: &'static str) -> Result<&T> {
        checked(&self.handle, self.device, device, operation)
    }
}

/// Launch geometry, as in CUDA and HIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch covering at least `n` items with `block` threads per block.
    pub fn for_items(n: u32, block: u32) -> Result<Self> {
        if block == 0 {
            return Err(Error::invalid_argument("block size must be at least 1"));
        }
        Ok(LaunchConfig { grid: [n.div_ceil(block).max(1), 1, 1], block: [block, 1, 1], shared_mem_bytes: 0 })
    }

    /// Checks that no dimension is zero.
    pub fn validate(&self) -> Result<()> {
        if self.grid.contains(&0) || self.block.contains(&0) {
            return Err(Error::invalid_argument(format!(
                "launch geometry has a zero dimension (grid {:?}, block {:?})",
                self.grid, self.block
            )));
        }
        Ok(())
    }
}

/// A scalar kernel argument, by value (at most 16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scalar {
    bytes: [u8; 16],
    dtype: DType,
}

impl Scalar {
    /// A scalar of `dtype` from its bytes in native byte order (as a launch across a C
    /// boundary carries it); `InvalidArgument` unless there are exactly `dtype`'s bytes,
    /// at most 16.
    pub fn from_raw(dtype: DType, bytes: &[u8]) -> Result<Self> {
        let size = dtype.itemsize()?;
        if size != bytes.len() || size > 16 {
            return Err(Error::invalid_argument(format!(
                "a kernel scalar of {dtype} is {size} bytes; {} were given (at most 16)",
                bytes.len()
            )));
        }
        let mut out = [0u8; 16];
        out[..size].copy_from_slice(bytes);
        Ok(Scalar { bytes: out, dtype })
    }
    /// The scalar's bytes, in native byte order.
    pub fn bytes(&self) -> &[u8] {
        // itemsize is at most 16 by construction.
        let n = self.dtype.itemsize().unwrap_or(0);
        &self.bytes[..n]
    }
    /// Its dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The value as `T`, when `T` has this scalar's dtype.
    pub fn get<T: Element>(&self) -> Result<T> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid_argument(format!(
                "kernel scalar is {} but {} was asked for",
                self.dtype,
                T::DTYPE
            )));
        }
        // SAFETY: `T: Element` is plain old data of exactly this dtype's size (≤ 16 bytes,
        // checked at construction); read_unaligned has no alignment requirement.
        Ok(unsafe { std::ptr::read_unaligned(self.bytes.as_ptr().cast::<T>()) })
    }
}

/// One kernel argument.
#[derive(Debug, Clone)]
pub enum KernelArg {
    /// A device pointer: the address of `offset` within `buffer`. The launch keeps the
    /// buffer alive until the kernel has run.
    Buffer {
        /// The buffer.
        buffer: Buffer,
        /// Byte offset into it.
        offset: usize,
    },
    /// A value passed by copy.
    Scalar(Scalar),
}

impl KernelArg {
    /// A pointer to the start of `buffer`.
    pub fn buffer(buffer: &Buffer) -> Self {
        KernelArg::Buffer { buffer: buffer.clone(), offset: 0 }
    }

    /// A scalar passed by value.
    pub fn scalar<T: Element>(value: T) -> Self {
        let mut bytes = [0u8; 16];
        const { assert!(std::mem::size_of::<T>() <= 16, "kernel scalars are at most 16 bytes") };
        let n = std::mem::size_of::<T>();
        // SAFETY: `T: Element` is plain old data of `n` bytes; `bytes` holds 16 ≥ n.
        unsafe { std::ptr::copy_nonoverlapping((&value as *const T).cast::<u8>(), bytes.as_mut_ptr(), n) };
        KernelArg::Scalar(Scalar { bytes, dtype: T::DTYPE })
    }
}
