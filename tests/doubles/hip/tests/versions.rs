//! The HIP double follows the ROCm version it reports: `hipMemoryType` numbering, pointer
//! attributes of unknown memory, error strings, the device-property layout — and picks a
//! code object's entry by the device's architecture. Run for both builds
//! (`cargo test -p gpuport-hip-double [--features rocm5] --test versions`).

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
        assert_eq!(v / 10_000_000, if ROCM5 { 5 } else { 6 });
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
