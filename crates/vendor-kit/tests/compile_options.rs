//! What the vendor kit hands a runtime compiler, checked without one: the option
//! arguments (each vendor's spelling, then the common `-D`/`-I`/`-std=`, then the caller's
//! own), what is refused before any compiler is called (a macro name a compiler would read
//! differently, a NUL byte anywhere), and a cached image of another kind never answered.
//! One process: `compile_for` reads the cache's variable, which only the last test sets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gpuport_core::{BackendKind, CompileOptions, Error, KernelSource, Result};
use gpuport_vendor_kit::compile::{
    compile_for, option_arguments, Compiled, Failure, ImageKind, Rtc, RuntimeCompiler, Spelling, CACHE_ENV,
};

const SPELLING: Spelling = Spelling { fast_math: "--fast", line_info: "--lines", debug: "--debug" };

#[test]
fn arguments_come_in_the_vendors_spelling_then_the_common_ones_then_the_callers() {
    let mut options = CompileOptions::default().define("WIDTH", "4");
    options.defines.push(("FAST_PATH".into(), None));
    options.fast_math = true;
    options.line_info = true;
    options.debug = true;
    options.include_dirs.push("/opt/include".into());
    options.std = Some("c++17".into());
    options.extra.push("--extra".into());
    let args = option_arguments(&options, &SPELLING).unwrap();
    assert_eq!(
        args,
        ["--fast", "--lines", "--debug", "-DWIDTH=4", "-DFAST_PATH", "-I/opt/include", "-std=c++17", "--extra"]
    );
    assert!(option_arguments(&CompileOptions::default(), &SPELLING).unwrap().is_empty());
}

#[test]
fn a_macro_name_a_compiler_would_misread_and_a_nul_byte_are_refused() {
    for bad in ["", "A=B", "A B", "A\0"] {
        let options = CompileOptions::default().define(bad, "1");
        assert!(
            matches!(option_arguments(&options, &SPELLING), Err(Error::InvalidArgument { .. })),
            "macro name {bad:?}"
        );
    }
    let value = CompileOptions::default().define("A", "1\0");
    assert!(matches!(option_arguments(&value, &SPELLING), Err(Error::InvalidArgument { .. })), "a NUL in a value");
    let mut extra = CompileOptions::default();
    extra.extra.push("-x\0".into());
    assert!(matches!(option_arguments(&extra, &SPELLING), Err(Error::InvalidArgument { .. })), "a NUL in an option");
}

/// A compiler that compiles nothing: it counts its calls and answers an image of the kind
/// it is told to make.
struct Counting {
    calls: AtomicUsize,
    kind: Mutex<ImageKind>,
}

impl RuntimeCompiler for Counting {
    fn backend(&self) -> BackendKind {
        BackendKind::Cuda
    }
    fn describe(&self) -> String {
        "a counting compiler".into()
    }
    fn arguments(&self, target: &str, options: &CompileOptions) -> Result<(Vec<String>, ImageKind)> {
        let mut args = vec![format!("--target={target}")];
        args.extend(option_arguments(options, &SPELLING)?);
        Ok((args, *self.kind.lock().unwrap()))
    }
    fn rtc(&self) -> &Rtc {
        unreachable!("compile is overridden: there is no compiler library")
    }
    fn compile(
        &self,
        _source: &KernelSource,
        _headers: &[(&str, &str)],
        _arguments: &[String],
        _name_expressions: &[String],
        kind: ImageKind,
    ) -> std::result::Result<Compiled, Failure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Compiled { image: vec![1, 2, 3], kind, lowered: Vec::new() })
    }
}

fn counting(kind: ImageKind) -> Counting {
    Counting { calls: AtomicUsize::new(0), kind: Mutex::new(kind) }
}

#[test]
fn a_nul_byte_in_the_source_a_header_or_a_name_expression_is_refused_uncompiled() {
    let compiler = counting(ImageKind::Ptx);
    let options = CompileOptions::default();
    let cases = [
        (KernelSource::new("__global__ void k() {}\0"), options.clone(), "the code"),
        (KernelSource::new("__global__ void k() {}").named("k\0.cu"), options.clone(), "the source's name"),
        (KernelSource::new("#include \"h.h\"").header("h\0.h", "// h"), options.clone(), "a header's name"),
        (KernelSource::new("#include \"h.h\"").header("h.h", "// h\0"), options.clone(), "a header's text"),
        (KernelSource::new("__global__ void k() {}"), options.clone().name_expression("k\0"), "a name expression"),
    ];
    for (source, options, what) in cases {
        let result = compile_for(&compiler, "sm_90", &source, &options);
        assert!(matches!(result, Err(Error::InvalidArgument { .. })), "a NUL in {what}");
    }
    assert_eq!(compiler.calls.load(Ordering::SeqCst), 0, "the compiler was called");
}

#[test]
fn a_cached_image_of_another_kind_is_compiled_again() {
    let dir = std::env::temp_dir().join(format!("gpuport-compile-kind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The only test that compiles: the others are refused before the cache is read.
    std::env::set_var(CACHE_ENV, &dir);
    let compiler = counting(ImageKind::Ptx);
    let source = KernelSource::new("__global__ void k() {}");
    let options = CompileOptions::default();
    assert_eq!(compile_for(&compiler, "sm_90", &source, &options).unwrap().kind, ImageKind::Ptx);
    assert_eq!(compile_for(&compiler, "sm_90", &source, &options).unwrap().kind, ImageKind::Ptx);
    assert_eq!(compiler.calls.load(Ordering::SeqCst), 1, "the second compile was not read from the cache");
    // The same arguments now make another kind: the cached PTX is not it.
    *compiler.kind.lock().unwrap() = ImageKind::Cubin;
    assert_eq!(compile_for(&compiler, "sm_90", &source, &options).unwrap().kind, ImageKind::Cubin);
    assert_eq!(compiler.calls.load(Ordering::SeqCst), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}
