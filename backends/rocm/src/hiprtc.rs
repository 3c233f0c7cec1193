//! hiprtc, the HIP runtime compiler, found and loaded on first use (once per process; a
//! failure is remembered): `GPUPORT_HIPRTC_LIBRARY`, else `libhiprtc.so.7`, `.so.6` where
//! ROCm puts them (`locate.rs`), else the HIP runtime's own `hiprtc*` functions, where
//! ROCm before 5.6 keeps the compiler. Compilation runs in the code-object manager
//! (comgr), on the CPU: it needs no GPU.
//!
//! The target is the device's target ID with its feature settings
//! (`--offload-arch=gfx90a:sramecc+:xnack-`), so the code object runs on the device as it
//! is configured; the image is a code object for `hipModuleLoadData`.

use std::sync::{Arc, OnceLock};

use gpuport_core::{BackendKind, CompileOptions, KernelSource, Result};
use gpuport_vendor_kit::compile::{
    option_arguments, Compiled, Concurrency, Failure, ImageKind, Rtc, RuntimeCompiler, Spelling,
};

/// Variable naming an exact hiprtc library file.
pub const HIPRTC_ENV: &str = "GPUPORT_HIPRTC_LIBRARY";

/// hiprtc, loaded, with the processors its code generator knows (`None`: not known).
pub struct Hiprtc(Rtc, Option<Vec<String>>);

/// The process-wide hiprtc. The runtime's own functions are looked for in the runtime
/// gpuport loads (`GPUPORT_HIP_LIBRARY`, else the same search), so no device is needed.
pub fn hiprtc() -> Result<Arc<Hiprtc>> {
    static HIPRTC: OnceLock<Result<Arc<Hiprtc>>> = OnceLock::new();
    HIPRTC
        .get_or_init(|| {
            let candidates = match std::env::var_os(HIPRTC_ENV).filter(|v| !v.is_empty()) {
                Some(path) => vec![path.to_string_lossy().into_owned()],
                None => {
                    let mut c = crate::locate::library_candidates(crate::locate::HIPRTC_NAMES);
                    match std::env::var_os(crate::loader::LIBRARY_ENV).filter(|v| !v.is_empty()) {
                        Some(runtime) => c.push(runtime.to_string_lossy().into_owned()),
                        None => c.extend(crate::locate::library_candidates(crate::loader::DEFAULT_NAMES)),
                    }
                    c
                }
            };
            // One compilation at a time: ROCm 5.2's hiprtc crashes when two threads compile
            // at once (seen here with two tests compiling in parallel); later releases are
            // not known to be safer, and compilations are rare (cached).
            // SAFETY: hiprtc libraries, the HIP runtime already loaded, or the file the
            // user named.
            let rtc =
                unsafe { Rtc::open(&candidates, BackendKind::Rocm, HIPRTC_ENV, "hiprtc", Concurrency::OneAtATime) }?;
            let known = crate::comgr::known_processors(&rtc.library);
            Ok(Arc::new(Hiprtc(rtc, known)))
        })
        .clone()
}

/// Compiles `source` into a code object for the AMD target `arch` (`gfx942`,
/// `gfx90a:sramecc+:xnack-`) without a device, through the kernel cache, as
/// `Device::compile` does: for building images ahead of time, or for several targets
/// into one offload bundle ([`crate::offload_bundle`]).
pub fn compile_for_arch(arch: &str, source: &KernelSource, options: &CompileOptions) -> Result<Vec<u8>> {
    let target = crate::target::Target::parse(arch)
        .ok_or_else(|| gpuport_core::Error::invalid_argument(format!("{arch} is not an AMD GPU target")))?;
    gpuport_vendor_kit::compile::compile_for(hiprtc()?.as_ref(), &target.to_string(), source, options).map(|c| c.image)
}

impl RuntimeCompiler for Hiprtc {
    fn backend(&self) -> BackendKind {
        BackendKind::Rocm
    }
    fn describe(&self) -> String {
        format!("hiprtc {}.{} ({})", self.0.version.0, self.0.version.1, self.0.library)
    }
    fn arguments(&self, target: &str, options: &CompileOptions) -> Result<(Vec<String>, ImageKind)> {
        const SPELLING: Spelling = Spelling { fast_math: "-ffast-math", line_info: "-gline-tables-only", debug: "-g" };
        let processor = target.split(':').next().unwrap_or(target);
        if let Some(known) = self.1.as_ref().filter(|k| !k.iter().any(|p| p == processor)) {
            return Err(gpuport_core::Error::unsupported(
                BackendKind::Rocm,
                format!(
                    "compiling for {processor} with {}, whose code generator (comgr) knows only {}",
                    self.describe(),
                    known.join(", ")
                ),
            ));
        }
        let mut args = vec![format!("--offload-arch={target}")];
        args.extend(option_arguments(options, &SPELLING)?);
        Ok((args, ImageKind::HipCodeObject))
    }
    fn rtc(&self) -> &Rtc {
        &self.0
    }
    fn compile(
        &self,
        source: &KernelSource,
        headers: &[(&str, &str)],
        arguments: &[String],
        name_expressions: &[String],
        kind: ImageKind,
    ) -> std::result::Result<Compiled, Failure> {
        self.0.compile(source, headers, arguments, name_expressions, kind).map_err(|failure| match failure {
            Failure::Log(log) => Failure::Log(name_the_source(&log, &source.name)),
            other => other,
        })
    }
}

/// hiprtc before 6 names the source in its log by comgr's temporary path
/// (`/tmp/comgr-0a4b8a/input/CompileSource:2:38: error: …`), whatever name the program was
/// given: the log a caller reads names their source instead.
fn name_the_source(log: &str, name: &str) -> String {
    const PLACEHOLDER: &str = "CompileSource";
    let mut out = String::with_capacity(log.len());
    let mut rest = log;
    while let Some(at) = rest.find(PLACEHOLDER) {
        let before = &rest[..at];
        // The path's start: after the last whitespace (or the line's start) before it.
        let start = before.rfind(|c: char| c.is_whitespace()).map_or(0, |i| i + 1);
        let path = &before[start..];
        if path.is_empty() || path.ends_with('/') {
            out.push_str(&before[..start]);
            out.push_str(name);
        } else {
            out.push_str(before);
            out.push_str(PLACEHOLDER);
        }
        rest = &rest[at + PLACEHOLDER.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_log_names_the_callers_source() {
        let log = "/tmp/comgr-0a4b8a/input/CompileSource:2:38: error: use of undeclared identifier 'x'\n  x = 1;\n";
        assert_eq!(
            super::name_the_source(log, "scale.cu"),
            "scale.cu:2:38: error: use of undeclared identifier 'x'\n  x = 1;\n"
        );
        assert_eq!(super::name_the_source("MyCompileSource is fine", "a.cu"), "MyCompileSource is fine");
        assert_eq!(super::name_the_source("no path", "a.cu"), "no path");
    }
}
