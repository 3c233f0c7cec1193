//! Clang offload bundles: one image holding code objects for several GPU architectures,
//! which `hipModuleLoadData` accepts, picking the entry for the device it loads on. Built
//! here so a project can ship per-architecture code objects without the bundler tool.
//!
//! Layout: the magic `__CLANG_OFFLOAD_BUNDLE__`, the entry count (u64), then per entry its
//! offset, size and triple length (u64 each) and the triple; then the blobs, each aligned
//! to 4096 bytes. A host entry with no data comes first, as the bundler writes it.

use gpuport_core::{Error, Result};

const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const ALIGN: usize = 4096;
const HOST_TRIPLE: &str = "host-x86_64-unknown-linux-gnu";

/// Bundles `(gfx arch, code object)` pairs for code-object version 4 or later
/// (`hipv4-amdgcn-amd-amdhsa--gfxNNN`).
pub fn offload_bundle(code_objects: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    if code_objects.is_empty() {
        return Err(Error::invalid_argument("an offload bundle needs at least one code object"));
    }
    let mut entries: Vec<(String, &[u8])> = vec![(HOST_TRIPLE.to_owned(), &[])];
    for (arch, blob) in code_objects {
        if !arch.starts_with("gfx") || !blob.starts_with(b"\x7fELF") {
            return Err(Error::invalid_argument(format!("{arch}: not a gfx architecture with an ELF code object")));
        }
        entries.push((format!("hipv4-amdgcn-amd-amdhsa--{arch}"), blob));
    }
    let header_len = MAGIC.len() + 8 + entries.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
    let mut offsets = Vec::with_capacity(entries.len());
    let mut end = header_len;
    for (_, blob) in &entries {
        let start = if blob.is_empty() { end } else { end.div_ceil(ALIGN) * ALIGN };
        offsets.push(start);
        end = start + blob.len();
    }
    let mut out = Vec::with_capacity(end);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for ((triple, blob), &offset) in entries.iter().zip(&offsets) {
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(blob.len() as u64).to_le_bytes());
        out.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        out.extend_from_slice(triple.as_bytes());
    }
    for ((_, blob), &offset) in entries.iter().zip(&offsets) {
        out.resize(offset, 0);
        out.extend_from_slice(blob);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u64_at(b: &[u8], at: usize) -> usize {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
    }

    #[test]
    fn entries_can_be_read_back() {
        let a = b"\x7fELF-gfx900".as_slice();
        let b = b"\x7fELF-gfx90a-longer".as_slice();
        let bundle = offload_bundle(&[("gfx900", a), ("gfx90a", b)]).unwrap();
        assert!(bundle.starts_with(MAGIC));
        assert_eq!(u64_at(&bundle, 24), 3);
        let mut at = 32;
        let mut found = vec![];
        for _ in 0..3 {
            let (offset, size, tlen) = (u64_at(&bundle, at), u64_at(&bundle, at + 8), u64_at(&bundle, at + 16));
            let triple = std::str::from_utf8(&bundle[at + 24..at + 24 + tlen]).unwrap().to_owned();
            at += 24 + tlen;
            assert!(size == 0 || offset % ALIGN == 0, "{triple} is aligned");
            found.push((triple, bundle[offset..offset + size].to_vec()));
        }
        assert_eq!(found[0], (HOST_TRIPLE.to_owned(), vec![]));
        assert_eq!(found[1], ("hipv4-amdgcn-amd-amdhsa--gfx900".to_owned(), a.to_vec()));
        assert_eq!(found[2], ("hipv4-amdgcn-amd-amdhsa--gfx90a".to_owned(), b.to_vec()));
        assert!(offload_bundle(&[]).is_err());
        assert!(offload_bundle(&[("sm_90", a)]).is_err());
        assert!(offload_bundle(&[("gfx900", b"not elf")]).is_err());
    }
}
