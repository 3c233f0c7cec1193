//! Kernels compiled from source, checked the same way on CUDA (NVRTC) and ROCm (hiprtc):
//! one source for both vendors through `<gpuport/kernel.h>`, run and read back; a compile
//! error with the compiler's log; a template kernel by its name expression. On a driver
//! double the compiled image is real (the double runs gpuport's `fill_u32` by name); the
//! template's lowered name is looked up but the double cannot run it.

use gpuport_core::{CompileOptions, Device, Error, KernelArg, KernelSource, LaunchConfig, Stream, StreamFlags};

/// One source, both vendors (shared with the Python tests of `RawKernel`).
pub const SOURCE: &str = include_str!("../../tests/python/fill_and_scale.cu");

/// Whether the compiler may be missing here: only when no variable names it (`cargo xtask`
/// names the ones it finds — NVRTC from the Python environment's wheel, hiprtc from
/// Debian's ROCm 5.2 runtime — and a named one that is missing fails).
fn compiler_optional() -> bool {
    ["GPUPORT_NVRTC_LIBRARY", "GPUPORT_HIPRTC_LIBRARY"].iter().all(|v| std::env::var_os(v).is_none())
}

/// The first compilation: `None` (said, not passed silently) when the compiler is absent
/// and may be.
fn first_compile<D: Device>(dev: &D, source: &KernelSource, options: &CompileOptions) -> Option<gpuport_core::Module> {
    match dev.compile(source, options) {
        Ok(module) => Some(module),
        Err(e @ Error::LibraryNotFound { .. }) if compiler_optional() => {
            eprintln!("skipped: no runtime compiler here and none named ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn on_double<D: Device>(dev: &D) -> bool {
    dev.info().is_ok_and(|i| i.name.contains("driver double"))
}

/// `fill_u32` compiled from [`SOURCE`] fills memory; `scale<float>` is found by its name
/// expression (and, on a GPU, scales).
pub fn a_compiled_kernel_runs<D: Device>(dev: &D) {
    let options = CompileOptions::default().name_expression("scale<float>");
    let Some(module) = first_compile(dev, &KernelSource::new(SOURCE).named("fill.cu"), &options) else { return };
    let fill = dev.kernel(&module, "fill_u32").unwrap();
    let n = 1000u32;
    let buf = dev.alloc(n as usize * 4).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let config = LaunchConfig::for_items(n, 256).unwrap();
    s.launch(&fill, &config, &[KernelArg::buffer(&buf), KernelArg::scalar(n), KernelArg::scalar(0x5EED_u32)]).unwrap();
    let back: Vec<u32> = s.read_vec(&buf, 0, n as usize).unwrap();
    assert!(back.iter().all(|&w| w == 0x5EED), "the compiled kernel did not fill the buffer");
    assert_ne!(module.lowered_name("scale<float>"), "scale<float>", "the name expression was lowered");
    match dev.kernel(&module, "scale<float>") {
        Ok(scale) => {
            let floats = dev.alloc(n as usize * 4).unwrap();
            s.write_slice(&vec![1.5f32; n as usize], &floats, 0).unwrap();
            s.launch(&scale, &config, &[KernelArg::buffer(&floats), KernelArg::scalar(n), KernelArg::scalar(2.0f32)])
                .unwrap();
            let out: Vec<f32> = s.read_vec(&floats, 0, n as usize).unwrap();
            assert!(out.iter().all(|&x| x == 3.0), "scale<float> did not scale");
        }
        // The double runs only gpuport's own kernels: the lowered name was asked for.
        Err(e) if on_double(dev) => {
            assert!(
                e.to_string().contains(module.lowered_name("scale<float>")) || matches!(e, Error::Vendor { .. }),
                "{e}"
            )
        }
        Err(e) => panic!("scale<float>: {e}"),
    }
    // The same compilation again: the module is handed out from the process's cache.
    let again = dev.compile(&KernelSource::new(SOURCE).named("fill.cu"), &options).unwrap();
    assert_eq!(again.lowered_name("scale<float>"), module.lowered_name("scale<float>"));
    dev.kernel(&again, "fill_u32").unwrap();
}

/// A source that does not compile is `Error::Compile` with the compiler's log.
pub fn a_compile_error_carries_the_log<D: Device>(dev: &D) {
    let broken =
        KernelSource::new("#include <gpuport/kernel.h>\nGPUPORT_KERNEL void f(int* p) { *p = undeclared_thing; }\n")
            .named("broken.cu");
    if first_compile(dev, &KernelSource::new(SOURCE), &CompileOptions::default()).is_none() {
        return;
    }
    match dev.compile(&broken, &CompileOptions::default()) {
        Err(Error::Compile { log, source_name, compiler, .. }) => {
            assert_eq!(source_name, "broken.cu");
            assert!(log.contains("undeclared_thing"), "the log names the error: {log}");
            assert!(log.contains("broken.cu"), "the log names the file: {log}");
            assert!(!compiler.is_empty());
        }
        other => panic!("expected a compile error, got {:?}", other.map(|_| "a module")),
    }
    // Options the compiler refuses, and a NUL in the source, are errors too.
    let bad = CompileOptions { extra: vec!["--no-such-option-anywhere".into()], ..Default::default() };
    assert!(dev.compile(&KernelSource::new(SOURCE), &bad).is_err());
    assert!(matches!(
        dev.compile(&KernelSource::new("a\0b"), &CompileOptions::default()),
        Err(Error::InvalidArgument { .. })
    ));
}

/// Eight threads compiling at once, three kernels each (distinct options: no cache shares
/// them), half of them with compile errors: each gets its module or its log. A compiler
/// that cannot run two compilations at once (hiprtc in ROCm 5.2 crashes) is driven one at
/// a time.
pub fn several_threads_compile_at_once<D: Device + Sync>(dev: &D) {
    if first_compile(dev, &KernelSource::new(SOURCE), &CompileOptions::default()).is_none() {
        return;
    }
    let start = std::sync::Barrier::new(8);
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    std::thread::scope(|s| {
        for t in 0..8 {
            let start = &start;
            s.spawn(move || {
                start.wait();
                for round in 0..3 {
                    let variant = format!("{nonce}_{t}_{round}");
                    let options = CompileOptions::default().define("TEST_VARIANT", variant);
                    if t % 2 == 0 {
                        let module =
                            dev.compile(&KernelSource::new(SOURCE), &options).unwrap_or_else(|e| panic!("{e}"));
                        dev.kernel(&module, "fill_u32").unwrap();
                    } else {
                        // A compile error's log is read while others compile.
                        let broken = KernelSource::new(format!("{SOURCE}\nint broken = undeclared_{t};\n"));
                        assert!(matches!(dev.compile(&broken, &options), Err(Error::Compile { .. })));
                    }
                }
            });
        }
    });
}
