//! The HIP double follows the ROCm version it reports: `hipMemoryType` numbering, pointer
//! attributes of unknown memory, error strings, the device-property layout — and picks a
//! code object's entry by the device's architecture — and HIP 7's changes where it reports
//! HIP 7. Run for every build
//! (`cargo test -p gpuport-hip-double [--features rocm5|rocm7] --test versions`).

use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;

use gpuport_hip_double::status::*;
use gpuport_hip_double::*;

fn ok(status: HipError) {
    assert_eq!(status, hipSuccess, "{status}");
}

#[test]
fn the_double_answers_as_the_version_it_reports() {
    // SAFETY: every call's arguments are valid pointers to locals, or values the double
    // must refuse without touching them.
    unsafe {
        let mut v: c_int = 0;
        ok(hipRuntimeGetVersion(&mut v));
        assert_eq!(v / 10_000_000, MAJOR);
        ok(hipInit(0));
        // Pointer attributes: device memory, pinned memory, and memory nobody allocated.
        let mut d: *mut c_void = null_mut();
        ok(hipMalloc(&mut d, 64));
        let mut attr = std::mem::zeroed::<hipPointerAttribute_t>();
        ok(hipPointerGetAttributes(&mut attr, d));
        assert_eq!(attr.memoryType, if ROCM5 { 1 } else { 2 }, "hipMemoryTypeDevice");
        let mut h: *mut c_void = null_mut();
        ok(hipHostMalloc(&mut h, 64, 0));
        ok(hipPointerGetAttributes(&mut attr, h));
        assert_eq!(attr.memoryType, if ROCM5 { 0 } else { 1 }, "hipMemoryTypeHost");
        let local = 0u64;
        let unknown = hipPointerGetAttributes(&mut attr, (&local as *const u64).cast());
        if ROCM5 {
            assert_eq!(unknown, hipErrorInvalidValue);
        } else {
            ok(unknown);
            assert_eq!(attr.memoryType, 0, "hipMemoryTypeUnregistered");
        }
        // Error strings: ROCm 5.2 repeats the name.
        let text = CStr::from_ptr(hipGetErrorString(hipErrorNoDevice)).to_str().unwrap();
        assert_eq!(text == "hipErrorNoDevice", ROCM5, "{text}");
        // Device properties in ROCm 5's layout, always exported.
        let mut props = [0u64; 512];
        ok(hipGetDeviceProperties(props.as_mut_ptr().cast(), 1));
        let bytes: Vec<u8> = props.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let arch = CStr::from_bytes_until_nul(&bytes[396..]).unwrap().to_str().unwrap();
        assert!(arch.starts_with("gfx942"), "{arch}");
        // A code-object bundle without the device's architecture.
        let code_object = elf_with_kernel();
        let mut bundle = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        let triple = b"hipv4-amdgcn-amd-amdhsa--gfx1030";
        bundle.extend_from_slice(&1u64.to_le_bytes());
        let offset = bundle.len() + 24 + triple.len();
        bundle.extend_from_slice(&(offset as u64).to_le_bytes());
        bundle.extend_from_slice(&(code_object.len() as u64).to_le_bytes());
        bundle.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        bundle.extend_from_slice(triple);
        bundle.extend_from_slice(&code_object);
        let mut module: Handle = null_mut();
        assert_eq!(hipModuleLoadData(&mut module, bundle.as_ptr().cast()), hipErrorNoBinaryForGpu);
        // The bare code object loads; its kernel is found, any other name is not.
        ok(hipModuleLoadData(&mut module, code_object.as_ptr().cast()));
        let mut f: Handle = null_mut();
        ok(hipModuleGetFunction(&mut f, module, c"fill_u32".as_ptr()));
        assert_eq!(hipModuleGetFunction(&mut f, module, c"other".as_ptr()), hipErrorNotFound);
        ok(hipModuleUnload(module));
        ok(hipFree(d));
        ok(hipHostFree(h));
    }
}

#[test]
fn hip_7_changes_are_met_where_hip_7_is_reported() {
    // SAFETY: as above.
    unsafe {
        ok(hipInit(0));
        // NULL answers: pointer attributes and a stream-ordered free.
        let mut attr = std::mem::zeroed::<hipPointerAttribute_t>();
        let status = hipPointerGetAttributes(&mut attr, std::ptr::null());
        let free = hipFreeAsync(null_mut(), null_mut());
        if ROCM7 {
            ok(status);
            assert_eq!(attr.memoryType, 0, "hipMemoryTypeUnregistered");
            ok(free);
        } else {
            assert_eq!((status, free), (hipErrorInvalidValue, hipErrorInvalidValue));
        }
        // The last-error rule: a failure, then a success, then the query.
        let mut count = 0;
        assert_eq!(hipSetDevice(99), hipErrorInvalidDevice);
        ok(hipGetDeviceCount(&mut count));
        assert_eq!(hipPeekAtLastError(), hipGetLastError(), "peek and get agree before the reset");
        ok(hipGetLastError()); // reset by the first read
        assert_eq!(hipSetDevice(99), hipErrorInvalidDevice);
        ok(hipGetDeviceCount(&mut count));
        assert_eq!(hipGetLastError(), if ROCM7 { hipErrorInvalidDevice } else { hipSuccess });
        // A launch configuration out of range (1024 work-items; the kernels take 256).
        let mut module: Handle = null_mut();
        ok(hipModuleLoadData(&mut module, elf_with_kernel().as_ptr().cast()));
        let mut f: Handle = null_mut();
        ok(hipModuleGetFunction(&mut f, module, c"fill_u32".as_ptr()));
        let mut arg = 0u64;
        let mut params = [(&mut arg as *mut u64).cast::<c_void>(); 3];
        let launch = hipModuleLaunchKernel(f, 1, 1, 1, 1024, 1, 1, 0, null_mut(), params.as_mut_ptr(), null_mut());
        assert_eq!(launch, if ROCM7 { hipErrorInvalidConfiguration } else { hipErrorInvalidValue });
        ok(hipModuleUnload(module));
        // hipStreamLegacy is the legacy stream on HIP 7 (before, a handle nobody made:
        // the validation layer would report it, so it is not passed here).
        if ROCM7 {
            ok(hipStreamSynchronize(STREAM_LEGACY as Handle));
        }
        if !ROCM5 {
            ok(hipStreamSynchronize(STREAM_PER_THREAD as Handle));
            // hipGetDeviceProperties asked for with version 600 or later is the R0600 variant.
            let (mut old, mut new, mut r0600) = (null_mut(), null_mut(), null_mut());
            let mut found = 0;
            ok(hipGetProcAddress(c"hipGetDeviceProperties".as_ptr(), &mut old, 502, 0, &mut found));
            ok(hipGetProcAddress(c"hipGetDeviceProperties".as_ptr(), &mut new, 700, 0, &mut found));
            ok(hipGetProcAddress(c"hipGetDevicePropertiesR0600".as_ptr(), &mut r0600, 600, 0, &mut found));
            assert_eq!(new, r0600);
            assert_ne!(old, new);
            let bad = hipGetProcAddress(c"hipGetDevicePropertiesR0600".as_ptr(), &mut r0600, 502, 0, &mut found);
            assert_eq!((bad, found), (hipErrorNotFound, 2), "VERSION_NOT_SUFFICIENT");
            let legacy_flag = hipGetProcAddress(c"hipMalloc".as_ptr(), &mut new, 700, 1, &mut found);
            assert_eq!(legacy_flag, if ROCM7 { hipSuccess } else { hipErrorInvalidValue });
        }
    }
}

/// A minimal ELF64 code object whose symbol table holds `fill_u32` (a function) and
/// `fill_u32.kd` (its kernel descriptor).
fn elf_with_kernel() -> Vec<u8> {
    let strtab = b"\0fill_u32\0fill_u32.kd\0";
    let mut sym = vec![0u8; 24 * 3];
    sym[24..28].copy_from_slice(&1u32.to_le_bytes());
    sym[28] = 0x12; // global function
    sym[48..52].copy_from_slice(&10u32.to_le_bytes());
    sym[52] = 0x11; // global object
    let (sym_off, str_off) = (64usize, 64 + sym.len());
    let shoff = (str_off + strtab.len()).div_ceil(8) * 8;
    let mut elf = vec![0u8; shoff + 3 * 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
    elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
    elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
    elf[sym_off..sym_off + sym.len()].copy_from_slice(&sym);
    elf[str_off..str_off + strtab.len()].copy_from_slice(strtab);
    let section = |elf: &mut Vec<u8>, i: usize, kind: u32, off: usize, size: usize, link: u32, entsize: u64| {
        let at = shoff + i * 64;
        elf[at + 4..at + 8].copy_from_slice(&kind.to_le_bytes());
        elf[at + 0x18..at + 0x20].copy_from_slice(&(off as u64).to_le_bytes());
        elf[at + 0x20..at + 0x28].copy_from_slice(&(size as u64).to_le_bytes());
        elf[at + 0x28..at + 0x2C].copy_from_slice(&link.to_le_bytes());
        elf[at + 0x38..at + 0x40].copy_from_slice(&entsize.to_le_bytes());
    };
    section(&mut elf, 1, 2, sym_off, sym.len(), 2, 24); // .symtab, strings in section 2
    section(&mut elf, 2, 3, str_off, strtab.len(), 0, 0); // .strtab
    elf
}
