//! Kernels compiled from source at run time, written once for every vendor backend: a
//! backend supplies its compiler ([`RuntimeCompiler`]: NVRTC for CUDA, hiprtc for ROCm)
//! and the device's target through `VendorCalls::compile_target`; this module holds the
//! compilers' shared C API ([`Rtc`]), the options' common spelling, the portability
//! header, the disk cache ([`DiskCache`], across processes and runs) and
//! [`compile_for`], a compilation for a named target. A device's `compile` (its loading,
//! and the in-process cache) is the `module` module's: this one sits below the call table
//! and imports nothing of the kit.

mod cache;
mod header;
mod rtc;

use std::sync::Arc;

use gpuport_core::{BackendKind, CompileOptions, Error, KernelSource, ModuleImage, Result};

pub use cache::{key, DiskCache, CACHE_ENV, CACHE_MAX_ENV, DEFAULT_MAX_BYTES};
pub use header::{KERNEL_HEADER, KERNEL_HEADER_NAME};
pub use rtc::{Concurrency, Rtc};

/// The kind of image a compiler made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// PTX text (NUL-free; loaded as [`ModuleImage::Ptx`]).
    Ptx,
    /// A cubin.
    Cubin,
    /// An AMD GPU code object.
    HipCodeObject,
}

/// A compiled image and the lowered names of the name expressions it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The image.
    pub image: Vec<u8>,
    /// Its kind.
    pub kind: ImageKind,
    /// `(name expression, lowered name)`.
    pub lowered: Vec<(String, String)>,
}

impl Compiled {
    /// The image as a module image of its kind.
    pub fn module_image(&self) -> Result<ModuleImage<'_>> {
        Ok(match self.kind {
            ImageKind::Ptx => ModuleImage::Ptx(
                std::str::from_utf8(&self.image)
                    .map_err(|_| Error::invalid_argument("the compiled PTX is not text"))?,
            ),
            ImageKind::Cubin => ModuleImage::Cubin(&self.image),
            ImageKind::HipCodeObject => ModuleImage::HipCodeObject(&self.image),
        })
    }
}

/// Why a compilation produced nothing.
#[derive(Debug)]
pub enum Failure {
    /// The source did not compile: the compiler's log.
    Log(String),
    /// Anything else (the compiler refused its arguments, ran out of memory, …).
    Other(Error),
}

/// One vendor's runtime compiler, loaded.
pub trait RuntimeCompiler: Send + Sync {
    /// The backend it compiles for.
    fn backend(&self) -> BackendKind;
    /// The compiler and its version (`NVRTC 12.9`), for errors and the cache key.
    fn describe(&self) -> String;
    /// The compiler's arguments for `target` (`sm_90`, `gfx942:sramecc+:xnack-`) and
    /// `options`, and the kind of image they make.
    fn arguments(&self, target: &str, options: &CompileOptions) -> Result<(Vec<String>, ImageKind)>;
    /// The loaded compiler's C API.
    fn rtc(&self) -> &Rtc;
    /// Compiles `source` with `headers` (include name, text) and `arguments`, resolving
    /// `name_expressions`. The provided method is [`Rtc::compile`]; a backend overrides it
    /// to adjust what the compiler says.
    fn compile(
        &self,
        source: &KernelSource,
        headers: &[(&str, &str)],
        arguments: &[String],
        name_expressions: &[String],
        kind: ImageKind,
    ) -> std::result::Result<Compiled, Failure> {
        self.rtc().compile(source, headers, arguments, name_expressions, kind)
    }
}

/// How a compiler spells the options that differ between vendors.
pub struct Spelling {
    /// Faster, less exact floating point.
    pub fast_math: &'static str,
    /// Source line information.
    pub line_info: &'static str,
    /// Device debug information.
    pub debug: &'static str,
}

/// What [`VendorCalls::compile_target`](crate::VendorCalls::compile_target) gives: the compiler, and the device's target.
pub struct CompileTarget {
    /// The compiler.
    pub compiler: Arc<dyn RuntimeCompiler>,
    /// The target (`sm_90`, `gfx90a:sramecc+:xnack-`).
    pub arch: String,
}

/// The arguments for `options` after the target: the ones a compiler spells its own way
/// (`spelling`), then those every vendor's spells alike (`-D`, `-I`, `-std=`), then
/// `extra` as given.
pub fn option_arguments(options: &CompileOptions, spelling: &Spelling) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for (wanted, flag) in [
        (options.fast_math, spelling.fast_math),
        (options.line_info, spelling.line_info),
        (options.debug, spelling.debug),
    ] {
        if wanted {
            args.push(flag.to_owned());
        }
    }
    for (name, value) in &options.defines {
        if name.is_empty() || name.contains(['=', ' ', '\0']) {
            return Err(Error::invalid_argument(format!("{name:?} is not a macro name")));
        }
        args.push(match value {
            Some(v) => format!("-D{name}={v}"),
            None => format!("-D{name}"),
        });
    }
    for dir in &options.include_dirs {
        args.push(format!("-I{}", dir.display()));
    }
    if let Some(std) = &options.std {
        args.push(format!("-std={std}"));
    }
    if args.iter().chain(&options.extra).any(|a| a.contains('\0')) {
        return Err(Error::invalid_argument("a compiler option contains a NUL byte"));
    }
    args.extend(options.extra.iter().cloned());
    Ok(args)
}

/// Compiles `source` with `compiler` for the target `arch` (`sm_90`, `gfx942:xnack-`),
/// through the disk cache, without a device: what a backend offers for building images
/// ahead of time, and what [`VendorCalls::compile_target`](crate::VendorCalls::compile_target)'s devices compile with.
pub fn compile_for(
    compiler: &dyn RuntimeCompiler,
    arch: &str,
    source: &KernelSource,
    options: &CompileOptions,
) -> Result<Compiled> {
    let (arguments, kind) = compiler.arguments(arch, options)?;
    let mut headers: Vec<(&str, &str)> = vec![(KERNEL_HEADER_NAME, KERNEL_HEADER)];
    headers.extend(source.headers.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    if headers
        .iter()
        .chain([(source.name.as_str(), source.code.as_str())].iter())
        .any(|(n, t)| n.contains('\0') || t.contains('\0'))
        || options.name_expressions.iter().any(|e| e.contains('\0'))
    {
        return Err(Error::invalid_argument("kernel source, header or name expression contains a NUL byte"));
    }
    let describe = compiler.describe();
    let mut parts: Vec<&[u8]> =
        vec![env!("CARGO_PKG_VERSION").as_bytes(), describe.as_bytes(), arch.as_bytes(), source.name.as_bytes()];
    parts.push(source.code.as_bytes());
    for (name, text) in &headers {
        parts.extend([name.as_bytes(), text.as_bytes()]);
    }
    parts.extend(arguments.iter().map(|a| a.as_bytes()));
    parts.push(b"--");
    parts.extend(options.name_expressions.iter().map(|e| e.as_bytes()));
    let disk_key = key(&parts);
    let disk = DiskCache::from_env();
    if let Some(hit) = disk.as_ref().and_then(|d| d.get(&disk_key)) {
        if hit.kind == kind {
            return Ok(hit);
        }
    }
    let compiled = compiler.compile(source, &headers, &arguments, &options.name_expressions, kind).map_err(
        |failure| match failure {
            Failure::Log(log) => Error::Compile {
                backend: compiler.backend(),
                compiler: describe.clone(),
                source_name: source.name.clone(),
                log,
            },
            Failure::Other(e) => e,
        },
    )?;
    if let Some(disk) = &disk {
        disk.put(&disk_key, &compiled);
    }
    Ok(compiled)
}
