//! Kernels compiled from source at run time: what a caller hands [`crate::Device::compile`]
//! — the source, its in-memory headers and the options — in words both vendors' runtime
//! compilers take (NVRTC for CUDA, hiprtc for ROCm). The backend picks the compiler and
//! the target from the device; a software device answers `Unsupported`.

/// Kernel source: CUDA C++ (the subset HIP also accepts; `docs/kernels.md`), with the
/// headers it includes that are not files.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelSource {
    /// The name the compiler's log gives the source (`scale.cu`).
    pub name: String,
    /// The text.
    pub code: String,
    /// In-memory headers: `(include name, text)`. gpuport's portability header
    /// `<gpuport/kernel.h>` is always available beside these.
    pub headers: Vec<(String, String)>,
}

impl KernelSource {
    /// `code`, named `kernel.cu` in logs, with no headers of its own.
    pub fn new(code: impl Into<String>) -> Self {
        KernelSource { name: "kernel.cu".into(), code: code.into(), headers: Vec::new() }
    }

    /// The same source under `name` in the compiler's log.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds an in-memory header, included as `#include "<include_name>"`.
    pub fn header(mut self, include_name: impl Into<String>, text: impl Into<String>) -> Self {
        self.headers.push((include_name.into(), text.into()));
        self
    }
}

/// What a compilation produces for a CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CudaOutput {
    /// Machine code for the device's architecture (`sm_XY` cubin) where the compiler
    /// knows the architecture, else PTX for it, which the driver compiles at load.
    #[default]
    Native,
    /// PTX for the device's `compute_XY`, compiled by the driver at load.
    Ptx,
}

/// How to compile. The target comes from the device (`sm_90`, `gfx942:sramecc+:xnack-`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CompileOptions {
    /// `-D NAME` (`None`) or `-D NAME=VALUE`.
    pub defines: Vec<(String, Option<String>)>,
    /// Include directories searched for headers that are files.
    pub include_dirs: Vec<std::path::PathBuf>,
    /// The C++ standard (`c++17`); the compiler's default when `None`.
    pub std: Option<String>,
    /// Faster, less exact floating point (`--use_fast_math`, `-ffast-math`).
    pub fast_math: bool,
    /// Source line information for profilers.
    pub line_info: bool,
    /// Device debug information (slow code).
    pub debug: bool,
    /// C++ names of template instantiations (or other functions) to look up by that name
    /// afterwards: `scale<float>`; `Device::kernel(&module, "scale<float>")` then finds the
    /// compiler's lowered (mangled) name.
    pub name_expressions: Vec<String>,
    /// CUDA only: cubin or PTX.
    pub cuda_output: CudaOutput,
    /// Further options passed to the compiler as they are (vendor-specific).
    pub extra: Vec<String>,
}

impl CompileOptions {
    /// Adds `-D NAME=VALUE`.
    pub fn define(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.defines.push((name.into(), Some(value.into())));
        self
    }

    /// Adds a name expression (`scale<float>`) to find by that name.
    pub fn name_expression(mut self, expr: impl Into<String>) -> Self {
        self.name_expressions.push(expr.into());
        self
    }
}
