//! A real HIP runtime on a machine without an AMD GPU, checked for the paths gpuport takes
//! with it. CI runs this against Debian's `libamdhip64-5` (ROCm 5.2) on the build machine
//! and, through `cargo xtask rocm-sid-check`, against Debian sid's `libamdhip64-6`
//! (ROCm 6.4) and experimental's `libamdhip64-7` (HIP 7.2, with `libhiprtc7` and
//! `librccl1`) inside sid roots: `GPUPORT_REAL_HIP` names the library,
//! `GPUPORT_REAL_HIP_MAJOR` its major version.
//! `cargo test -p gpuport-rocm --test real_runtime -- --ignored`.

use std::path::PathBuf;

use gpuport_core::{Backend, Error, LoadOptions};
use gpuport_rocm::{inspect_library, RocmBackend};
use gpuport_vendor_kit::loading::open_resident;

fn library() -> PathBuf {
    PathBuf::from(std::env::var_os("GPUPORT_REAL_HIP").expect("GPUPORT_REAL_HIP names a real libamdhip64"))
}

fn major() -> u32 {
    std::env::var("GPUPORT_REAL_HIP_MAJOR")
        .expect("GPUPORT_REAL_HIP_MAJOR: 5, 6 or 7")
        .trim()
        .parse()
        .expect("a number")
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn the_runtime_resolves_and_takes_its_versions_paths() {
    let report = inspect_library(Some(&library())).expect("the runtime opens and every required symbol resolves");
    println!("{report:#?}");
    assert_eq!(report.runtime_version as u32 / 10_000_000, major(), "not the runtime version expected");
    assert_eq!(report.required, gpuport_rocm::required_symbols().len());
    // Every version gpuport loads has it: device imports are checked against their
    // allocation on ROCm too.
    assert!(report.address_range, "hipMemGetAddressRange does not resolve");
    if major() >= 6 {
        // ROCm 6.2 and later: versioned lookup, the R0600 properties layout, the 6.x
        // hipMemoryType numbering, hipLaunchHostFunc.
        assert_eq!(report.lookup, "hipGetProcAddress");
        // Without a device, ROCm 6.4's and HIP 7.2's hipGetProcAddress answer
        // hipErrorNoDevice for every name (seen in the sid roots), so here the symbols come
        // from dlsym: the versioned lookup itself (version and flags asked for) is checked
        // on the HIP double, which answers as the real lookup does, and only an AMD GPU
        // can show the real one giving them.
        assert!(
            report.not_through_lookup.is_empty() || report.lookup_refusal.as_deref() == Some("hipErrorNoDevice"),
            "{:?} did not come through hipGetProcAddress, which answered {:?}",
            report.not_through_lookup,
            report.lookup_refusal
        );
        assert_eq!(report.memory_type_numbering, 6);
        assert_eq!(report.device_properties, Some("hipGetDevicePropertiesR0600"));
        assert!(report.launch_host_func, "ROCm 6 has hipLaunchHostFunc");
        assert!(report.stream_ordered_alloc, "ROCm 6 has hipMallocAsync");
    } else {
        assert_eq!(report.lookup, "dlsym");
        assert_eq!(report.memory_type_numbering, 5);
        assert_eq!(report.device_properties, Some("hipGetDeviceProperties"));
    }
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn without_a_gpu_the_runtime_says_no_device_and_its_version() {
    let err = RocmBackend::load(&LoadOptions { library_path: Some(library()) }).err().expect("no AMD GPU here");
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, Error::NoDevice { .. }), "{text}");
    assert!(text.contains(&format!("runtime {}.", major())), "{text}");
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn the_compiler_and_rccl_are_where_this_version_puts_them() {
    // SAFETY: the HIP runtime under test; loading it runs its initialisers only. Opened as
    // gpuport opens it (resident): ROCm 6.4's runtime loaded again after an unload crashes
    // the loading thread at its exit.
    let runtime = unsafe { open_resident(library()) }.expect("the runtime opens");
    // SAFETY: only looked up, never called.
    let has_hiprtc = unsafe { runtime.get::<*const ()>(b"hiprtcCreateProgram\0") }.is_ok();
    // ROCm 5.2's runtime carries the compiler; HIP 7's does not (it is libhiprtc.so.7).
    match major() {
        5 => assert!(has_hiprtc, "ROCm 5.2's runtime exports hiprtc"),
        7.. => assert!(!has_hiprtc, "HIP 7's runtime carries no compiler"),
        _ => {}
    }
    if major() < 7 {
        return;
    }
    type VersionPair = unsafe extern "C" fn(*mut i32, *mut i32) -> u32;
    type Version = unsafe extern "C" fn(*mut i32) -> u32;
    let open = |names: &[&str]| {
        let candidates = gpuport_rocm::library_candidates(names);
        candidates
            .iter()
            // SAFETY: ROCm's own libraries, as installed beside the runtime.
            .find_map(|c| unsafe { open_resident(c) }.ok().map(|lib| (c.clone(), lib)))
            .unwrap_or_else(|| panic!("none of {candidates:?} loads"))
    };
    let (name, hiprtc) = open(gpuport_rocm::HIPRTC_NAMES);
    let (mut maj, mut min) = (0, 0);
    // SAFETY: hiprtcVersion(int*, int*) with valid out-pointers.
    let status = unsafe { hiprtc.get::<VersionPair>(b"hiprtcVersion\0").expect("hiprtcVersion")(&mut maj, &mut min) };
    // hiprtcVersion numbers the compiler, not the runtime (Debian's 7.2.4 answers 9.0):
    // the soname says which HIP release it belongs to.
    println!("{name}: hiprtcVersion {maj}.{min}");
    assert!(status == 0 && maj > 0, "{name}: hiprtcVersion answered {status} ({maj}.{min})");
    assert!(name.ends_with(&format!("libhiprtc.so.{}", major())), "{name} is not HIP {}'s compiler", major());
    let (name, rccl) = open(gpuport_rocm::RCCL_NAMES);
    let mut version = 0;
    // SAFETY: ncclGetVersion(int*) with a valid out-pointer.
    let status = unsafe { rccl.get::<Version>(b"ncclGetVersion\0").expect("ncclGetVersion")(&mut version) };
    println!("{name}: NCCL API version {version}");
    assert!(status == 0 && version >= 2_00_00, "{name} reports NCCL {version}");
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn a_runtime_of_a_major_gpuport_does_not_know_is_refused_with_the_reason() {
    // The real runtime's major is known...
    let report = inspect_library(Some(&library())).expect("the runtime opens");
    assert_eq!(gpuport_rocm::unknown_major(report.runtime_version), None);
    // ...and a later one (a future libamdhip64.so.8 reporting HIP 8) would not be.
    let why = gpuport_rocm::unknown_major(80_000_000).expect("HIP 8 is not known");
    assert!(why.contains("8.0.0") && why.contains("5–7"), "{why}");
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn this_versions_hiprtc_compiles_for_current_targets_without_a_gpu() {
    use gpuport_core::{CompileOptions, KernelSource};
    use gpuport_rocm::target::{code_object_target, Target};
    let source = KernelSource::new(include_str!("../../../tests/python/fill_and_scale.cu")).named("fill.cu");
    let options = CompileOptions::default().name_expression("scale<float>");
    // Each release's compiler knows the targets of its time: MI200 always, MI300 from
    // ROCm 6, MI350 (gfx950) and RDNA 4 from 7.
    let mut targets = vec!["gfx90a:sramecc+:xnack-", "gfx1030"];
    if major() >= 6 {
        targets.extend(["gfx942:sramecc+:xnack-", "gfx1100"]);
    }
    if major() >= 7 {
        targets.extend(["gfx950", "gfx1201"]);
    }
    for arch in targets {
        let image = gpuport_rocm::compile_for_arch(arch, &source, &options)
            .unwrap_or_else(|e| panic!("runtime {}: {arch}: {e}", major()));
        let found = code_object_target(&image).unwrap_or_else(|| panic!("{arch}: not a code object gpuport can read"));
        println!("{arch}: {} bytes, built for {found}", image.len());
        assert!(found.runs_on(&Target::parse(arch).unwrap()), "{arch}: built for {found}");
    }
    // A target its code generator does not know is refused with what it knows, never
    // attempted: ROCm 5.2's comgr aborts the process on gfx942.
    let unknown = if major() == 5 { "gfx942:sramecc+:xnack-" } else { "gfx9999" };
    match gpuport_rocm::compile_for_arch(unknown, &source, &options) {
        Err(gpuport_core::Error::Unsupported { what, .. }) => {
            assert!(what.contains("comgr") && what.contains("gfx90a"), "{unknown}: {what}")
        }
        other => panic!("runtime {}: compiling for {unknown} gave {:?}", major(), other.map(|i| i.len())),
    }
}

#[test]
#[ignore = "needs GPUPORT_REAL_HIP (set by .ci/run and cargo xtask rocm-sid-check)"]
fn asking_again_for_an_absent_device_leaves_every_thread_able_to_exit() {
    // A program that asks for ROCm on one thread, then opens it on another (a second
    // library's loader, a retry): each opens the runtime and drops it. Were the runtime
    // unloaded and loaded again, ROCm 6.4's would leave a thread-exit destructor in unmapped
    // code and the second thread would crash the process as it ends.
    let on_a_thread = |f: fn()| std::thread::spawn(f).join().expect("the thread ends normally");
    for _ in 0..3 {
        on_a_thread(|| {
            inspect_library(Some(&library())).expect("the runtime opens");
        });
        on_a_thread(|| {
            let err = RocmBackend::load(&LoadOptions { library_path: Some(library()) }).err();
            assert!(matches!(err, Some(Error::NoDevice { .. })), "{err:?}");
        });
        on_a_thread(|| {
            // SAFETY: the runtime under test; its initialisers only.
            drop(unsafe { open_resident(library()) }.expect("the runtime opens"));
        });
    }
}
