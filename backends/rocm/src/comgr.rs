//! The targets hiprtc can compile for, asked of the code-object manager (comgr) that does
//! its work: `amd_comgr_get_isa_count` / `amd_comgr_get_isa_name`. hiprtc itself has no
//! such question, and an old comgr given a target it does not know may abort the process
//! (ROCm 5.2's frees an invalid pointer for `gfx942`), so a compile for another target is
//! refused with the list instead of attempted.
//!
//! Which comgr hiprtc uses is the one it loads by name (`libamd_comgr.so.2` for ROCm 5,
//! `.so.3` for Debian's 6.4 and HIP 7): the names are read from the hiprtc library file
//! itself, and the library opened under that name is the one hiprtc gets.

use std::ffi::{c_char, CStr};

/// `amd_comgr_get_isa_count(size_t *count)`.
type IsaCountFn = unsafe extern "C" fn(*mut usize) -> u32;
/// `amd_comgr_get_isa_name(size_t index, const char **isa_name)`.
type IsaNameFn = unsafe extern "C" fn(usize, *mut *const c_char) -> u32;

/// The comgr names tried when the hiprtc file does not say (newest first).
const FALLBACK_NAMES: [&str; 2] = ["libamd_comgr.so.3", "libamd_comgr.so.2"];

/// The processors (`gfx90a`, `gfx942`, …) the comgr behind the hiprtc in `hiprtc_library`
/// generates code for, or `None` when that comgr cannot be found or asked (the compile is
/// then attempted as it is).
pub(crate) fn known_processors(hiprtc_library: &str) -> Option<Vec<String>> {
    let names = names_in(hiprtc_library).unwrap_or_else(|| FALLBACK_NAMES.iter().map(|s| s.to_string()).collect());
    names.iter().find_map(|name| processors_of(name))
}

/// The `libamd_comgr.so.N` names in the library file at `path`, in the order they appear.
fn names_in(path: &str) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
    const PREFIX: &[u8] = b"libamd_comgr.so.";
    let mut names = Vec::new();
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(PREFIX.len()).position(|w| w == PREFIX) {
        let start = at + i;
        let digits = bytes[start + PREFIX.len()..].iter().take_while(|b| b.is_ascii_digit()).count();
        at = start + PREFIX.len() + digits;
        if digits == 0 {
            continue;
        }
        let name = String::from_utf8_lossy(&bytes[start..at]).into_owned();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    (!names.is_empty()).then_some(names)
}

/// The processors comgr `name` lists.
fn processors_of(name: &str) -> Option<Vec<String>> {
    // SAFETY: comgr's initialisers only; hiprtc loads this same library to compile. It
    // stays resident, as it would once hiprtc had compiled.
    let library = unsafe { gpuport_vendor_kit::loading::open_resident(name) }.ok()?;
    // SAFETY: the two functions' C types, as comgr's header declares them.
    let (count, isa_name) = unsafe {
        (
            *library.get::<IsaCountFn>(b"amd_comgr_get_isa_count\0").ok()?,
            *library.get::<IsaNameFn>(b"amd_comgr_get_isa_name\0").ok()?,
        )
    };
    let mut n = 0usize;
    // SAFETY: a valid out-pointer.
    if unsafe { count(&mut n) } != 0 {
        return None;
    }
    let mut out = Vec::new();
    for index in 0..n {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: an index below the count, a valid out-pointer.
        if unsafe { isa_name(index, &mut text) } != 0 || text.is_null() {
            return None;
        }
        // SAFETY: comgr hands out a NUL-terminated string it keeps.
        let isa = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        if let Some(processor) = processor_of(&isa) {
            if !out.iter().any(|p| p == processor) {
                out.push(processor.to_owned());
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The processor of an ISA name (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-` → `gfx90a`).
fn processor_of(isa: &str) -> Option<&str> {
    let rest = isa.rsplit_once("--").map_or(isa, |(_, r)| r);
    let processor = rest.split(':').next()?;
    processor.starts_with("gfx").then_some(processor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isa_names_give_their_processor() {
        assert_eq!(processor_of("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"), Some("gfx90a"));
        assert_eq!(processor_of("amdgcn-amd-amdhsa--gfx942"), Some("gfx942"));
        assert_eq!(processor_of("amdgcn-amd-amdhsa--"), None);
    }

    #[test]
    fn comgr_names_are_read_from_a_library_file() {
        let dir = std::env::temp_dir().join(format!("gpuport-comgr-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("libhiprtc.so.9");
        std::fs::write(&file, b"\0junk libamd_comgr.so.\0libamd_comgr.so.3\0x libamd_comgr.so.2\0libamd_comgr.so.3")
            .unwrap();
        let names = names_in(file.to_str().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(names, Some(vec!["libamd_comgr.so.3".to_owned(), "libamd_comgr.so.2".to_owned()]));
        assert_eq!(names_in("/nonexistent/libhiprtc.so"), None);
    }
}
