//! NVRTC, CUDA's runtime compiler, found and loaded on first use (once per process; a
//! failure is remembered): `GPUPORT_NVRTC_LIBRARY`, else `libnvrtc.so.13`, `.so.12` by
//! soname, then in `$CUDA_PATH`/`$CUDA_HOME` and `/usr/local/cuda*` (newest first) under
//! `lib64`, then in the `nvidia-cuda-nvrtc` wheels of the Python environment gpuport runs
//! in (`$VIRTUAL_ENV`, `$CONDA_PREFIX`, and the site-packages folders the Python module
//! registers with [`add_python_site_packages`]), as PyTorch's environments carry it.
//!
//! The target is the device's: `sm_XY` machine code (a cubin) when this NVRTC knows the
//! architecture, else PTX for `compute_XY`, which the driver compiles at load (and PTX
//! whenever `CudaOutput::Ptx` asks for it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use gpuport_core::{BackendKind, CompileOptions, CudaOutput, Error, KernelSource, Result};
use gpuport_vendor_kit::compile::{option_arguments, Compiled, Concurrency, ImageKind, Rtc, RuntimeCompiler, Spelling};
use gpuport_vendor_kit::loading::newest_first;

/// Variable naming an exact NVRTC library file.
pub const NVRTC_ENV: &str = "GPUPORT_NVRTC_LIBRARY";

/// Sonames tried, newest first.
pub const NVRTC_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12"];

/// Site-packages folders registered by the Python module.
fn python_dirs() -> &'static Mutex<Vec<PathBuf>> {
    static DIRS: OnceLock<Mutex<Vec<PathBuf>>> = OnceLock::new();
    DIRS.get_or_init(Default::default)
}

/// Adds a Python `site-packages` folder whose `nvidia/*/lib` may hold NVRTC (the Python
/// module registers its interpreter's before NVRTC is first looked for).
pub fn add_python_site_packages(dir: impl Into<PathBuf>) {
    python_dirs().lock().unwrap_or_else(|p| p.into_inner()).push(dir.into());
}

/// Every candidate file, in the order tried (see the module documentation).
pub fn nvrtc_candidates() -> Vec<String> {
    let mut out: Vec<String> = NVRTC_NAMES.iter().map(|s| s.to_string()).collect();
    let mut dirs: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME"]
        .iter()
        .filter_map(|v| std::env::var_os(v).filter(|v| !v.is_empty()))
        .map(|root| PathBuf::from(root).join("lib64"))
        .collect();
    dirs.extend(newest_first(Path::new("/usr/local"), "cuda").into_iter().map(|d| d.join("lib64")));
    let mut site: Vec<PathBuf> = python_dirs().lock().unwrap_or_else(|p| p.into_inner()).clone();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            site.extend(
                newest_first(&PathBuf::from(prefix).join("lib"), "python3")
                    .into_iter()
                    .map(|p| p.join("site-packages")),
            );
        }
    }
    for s in site {
        // nvidia-cuda-nvrtc (13.x) installs into nvidia/cu13/lib, nvidia-cuda-nvrtc-cu12
        // into nvidia/cuda_nvrtc/lib.
        dirs.extend(["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"].iter().map(|sub| s.join(sub)));
    }
    for dir in dirs {
        for name in NVRTC_NAMES {
            let path = dir.join(name);
            if path.is_file() {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out.dedup();
    out
}

/// NVRTC, loaded.
pub struct Nvrtc {
    rtc: Rtc,
    /// The architectures it compiles machine code for (`nvrtcGetSupportedArchs`), when it says.
    archs: Vec<i32>,
}

/// The process-wide NVRTC.
pub fn nvrtc() -> Result<Arc<Nvrtc>> {
    static NVRTC: OnceLock<Result<Arc<Nvrtc>>> = OnceLock::new();
    NVRTC
        .get_or_init(|| {
            let candidates = match std::env::var_os(NVRTC_ENV).filter(|v| !v.is_empty()) {
                Some(path) => vec![path.to_string_lossy().into_owned()],
                None => nvrtc_candidates(),
            };
            // SAFETY: NVRTC libraries, or the file the user named for it.
            let rtc =
                unsafe { Rtc::open(&candidates, BackendKind::Cuda, NVRTC_ENV, "nvrtc", Concurrency::Concurrent) }?;
            let archs = supported_archs(&rtc).unwrap_or_default();
            Ok(Arc::new(Nvrtc { rtc, archs }))
        })
        .clone()
}

/// `nvrtcGetNumSupportedArchs` / `nvrtcGetSupportedArchs` (NVRTC 11.2 and later).
fn supported_archs(rtc: &Rtc) -> Option<Vec<i32>> {
    type NumFn = unsafe extern "C" fn(*mut std::ffi::c_int) -> std::ffi::c_int;
    type ListFn = unsafe extern "C" fn(*mut std::ffi::c_int) -> std::ffi::c_int;
    // SAFETY: reopening the loaded (resident) file only adds a reference; looked-up
    // functions are called with their documented signatures and a buffer of the size NVRTC
    // gave.
    unsafe {
        let lib = gpuport_vendor_kit::loading::open_resident(&rtc.library).ok()?;
        let num = *lib.get::<NumFn>(b"nvrtcGetNumSupportedArchs\0").ok()?;
        let list = *lib.get::<ListFn>(b"nvrtcGetSupportedArchs\0").ok()?;
        let mut n = 0;
        if num(&mut n) != 0 || n <= 0 {
            return None;
        }
        let mut archs = vec![0; n as usize];
        (list(archs.as_mut_ptr()) == 0).then_some(archs)
    }
}

/// Compiles `source` for the CUDA architecture `arch` (`sm_90`) without a device: a cubin
/// where this NVRTC knows the architecture (and `options` ask for native code), else PTX
/// for it. Through the kernel cache, as `Device::compile` is.
pub fn compile_for_arch(arch: &str, source: &KernelSource, options: &CompileOptions) -> Result<Compiled> {
    gpuport_vendor_kit::compile::compile_for(nvrtc()?.as_ref(), arch, source, options)
}

impl RuntimeCompiler for Nvrtc {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }
    fn describe(&self) -> String {
        format!("NVRTC {}.{}", self.rtc.version.0, self.rtc.version.1)
    }
    fn arguments(&self, target: &str, options: &CompileOptions) -> Result<(Vec<String>, ImageKind)> {
        let cc: i32 = target
            .strip_prefix("sm_")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Error::invalid_argument(format!("{target} is not a CUDA architecture")))?;
        let native = options.cuda_output == CudaOutput::Native && self.archs.contains(&cc);
        let (arch, kind) =
            if native { (format!("sm_{cc}"), ImageKind::Cubin) } else { (format!("compute_{cc}"), ImageKind::Ptx) };
        const SPELLING: Spelling =
            Spelling { fast_math: "--use_fast_math", line_info: "--generate-line-info", debug: "--device-debug" };
        let mut args = vec![format!("--gpu-architecture={arch}")];
        args.extend(option_arguments(options, &SPELLING)?);
        Ok((args, kind))
    }
    fn rtc(&self) -> &Rtc {
        &self.rtc
    }
}
