//! NVRTC without a device: gpuport's test kernels compiled to PTX and to a cubin, with a
//! template's lowered name, and a compile error's log. NVRTC comes from
//! `GPUPORT_NVRTC_LIBRARY` (`cargo xtask` names the Python test environment's
//! `nvidia-cuda-nvrtc-cu12` wheel) or the usual places; when none is named and none is
//! found, the tests say so and check nothing else. Each test runs again in a child with the
//! kernel cache off, so that NVRTC itself compiles every time (a cache hit answers for it).

use std::process::Command;

use gpuport_core::{CompileOptions, CudaOutput, Error, KernelSource};
use gpuport_cuda::{compile_for_arch, ImageKind};

fn source() -> KernelSource {
    KernelSource::new(include_str!("../../../tests/python/fill_and_scale.cu")).named("fill.cu")
}

/// `None` when NVRTC is absent and may be.
fn compile(arch: &str, options: &CompileOptions) -> Option<gpuport_cuda::Compiled> {
    match compile_for_arch(arch, &source(), options) {
        Ok(c) => Some(c),
        Err(e @ Error::LibraryNotFound { .. }) if std::env::var_os("GPUPORT_NVRTC_LIBRARY").is_none() => {
            eprintln!("skipped: no NVRTC here and none named ({e})");
            None
        }
        Err(e) => panic!("{arch}: {e}"),
    }
}

#[test]
fn ptx_and_cubins_with_lowered_template_names() {
    let options = CompileOptions::default().name_expression("scale<float>");
    let ptx_options = CompileOptions { cuda_output: CudaOutput::Ptx, ..options.clone() };
    let Some(ptx) = compile("sm_80", &ptx_options) else { return };
    assert_eq!(ptx.kind, ImageKind::Ptx);
    let text = std::str::from_utf8(&ptx.image).expect("PTX is text");
    assert!(!text.contains('\0'), "PTX is text, without the C string's terminating NUL");
    assert!(text.contains(".target sm_80") && text.contains(".entry fill_u32"), "{text}");
    let (expr, lowered) = &ptx.lowered[0];
    assert_eq!(expr, "scale<float>");
    assert!(lowered.starts_with("_Z") && text.contains(lowered.as_str()), "{lowered} is an entry of the PTX");
    for arch in ["sm_80", "sm_90"] {
        let cubin = compile(arch, &options).expect("NVRTC was found above");
        assert_eq!(cubin.kind, ImageKind::Cubin, "{arch}: this NVRTC knows the architecture");
        assert!(cubin.image.starts_with(b"\x7fELF"), "{arch}: a cubin is an ELF file");
        // Whole: its section header table (at `e_shoff`, `e_shnum` entries of `e_shentsize`
        // bytes, ELF64) ends inside the image, so no trailing bytes were cut.
        let field =
            |at: usize, n: usize| cubin.image[at..at + n].iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b));
        let table_end = field(0x28, 8) + field(0x3a, 2) * field(0x3c, 2);
        assert!(
            table_end <= cubin.image.len() as u64,
            "{arch}: the cubin is cut short ({table_end} > {})",
            cubin.image.len()
        );
        let name = |n: &str| cubin.image.windows(n.len()).any(|w| w == n.as_bytes());
        assert!(name("fill_u32") && name(&cubin.lowered[0].1), "{arch}: both kernels are in the cubin");
    }
}

#[test]
fn a_compile_error_carries_nvrtcs_log_and_a_bad_architecture_is_refused() {
    if compile("sm_80", &CompileOptions::default()).is_none() {
        return;
    }
    let broken = KernelSource::new("extern \"C\" __global__ void f(int* p) { *p = nope; }").named("broken.cu");
    match compile_for_arch("sm_80", &broken, &CompileOptions::default()) {
        Err(Error::Compile { log, compiler, .. }) => {
            assert!(log.contains("broken.cu") && log.contains("nope"), "{log}");
            assert!(compiler.starts_with("NVRTC "), "{compiler}");
        }
        other => panic!("expected a compile error, got {:?}", other.map(|c| c.kind)),
    }
    assert!(matches!(
        compile_for_arch("gfx90a", &source(), &CompileOptions::default()),
        Err(Error::InvalidArgument { .. })
    ));
}

/// Set in the child that runs a test again with the kernel cache off.
const UNCACHED: &str = "NVRTC_TEST_UNCACHED";

#[test]
fn nvrtc_itself_compiles_with_the_kernel_cache_off() {
    if std::env::var_os(UNCACHED).is_some() {
        return;
    }
    for test in [
        "ptx_and_cubins_with_lowered_template_names",
        "a_compile_error_carries_nvrtcs_log_and_a_bad_architecture_is_refused",
    ] {
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(UNCACHED, "1")
            .env("GPUPORT_KERNEL_CACHE", "off")
            .status()
            .unwrap();
        assert!(status.success(), "{test}, with the kernel cache off");
    }
}
