//! Reading module images for their entry points: PTX text (`.entry NAME`), ELF files
//! (cubins and AMD GPU code objects: function symbols, and `NAME.kd` kernel descriptors),
//! CUDA fatbins (their uncompressed PTX and ELF entries) and clang offload bundles (the
//! entry for the device's architecture). The double never runs the code it reads: it only
//! needs the names, to find gpuport's test kernels in them.

use crate::Error;

/// Magic of a CUDA fatbin (`__cudaFatMAGIC2`).
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// Magic of a clang offload bundle.
pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize)
}
fn u32_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
}
fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// The `.entry` names of a PTX module.
pub fn ptx_entries(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut words = text.split(|c: char| c.is_whitespace() || c == '(').filter(|w| !w.is_empty());
    while let Some(w) = words.next() {
        if w == ".entry" {
            if let Some(name) = words.next() {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// Whether `text` looks like PTX (the directives every PTX module starts with).
pub fn is_ptx(text: &str) -> bool {
    text.contains(".version") && text.contains(".target")
}

/// The kernel names of a 64-bit little-endian ELF file: its `STT_FUNC` symbols and the
/// names of its `NAME.kd` kernel descriptors (AMD code objects).
pub fn elf_entries(b: &[u8]) -> Result<Vec<String>, Error> {
    let bad = Error::InvalidImage;
    if !b.starts_with(b"\x7fELF") || b.get(4..6) != Some(&[2, 1]) {
        return Err(bad);
    }
    let shoff = u64_at(b, 0x28).ok_or(bad)?;
    let shentsize = u16_at(b, 0x3A).ok_or(bad)?;
    let shnum = u16_at(b, 0x3C).ok_or(bad)?;
    let section = |i: usize| -> Option<(usize, usize, usize, usize, usize)> {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        // (type, offset, size, link, entsize)
        Some((
            u32_at(b, at + 4)?,
            u64_at(b, at + 0x18)?,
            u64_at(b, at + 0x20)?,
            u32_at(b, at + 0x28)?,
            u64_at(b, at + 0x38)?,
        ))
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (kind, off, size, link, entsize) = section(i).ok_or(bad)?;
        if kind != 2 || entsize < 24 {
            continue; // SHT_SYMTAB only
        }
        let (_, str_off, str_size, _, _) = section(link).ok_or(bad)?;
        let strtab = b.get(str_off..str_off.checked_add(str_size).ok_or(bad)?).ok_or(bad)?;
        let syms = b.get(off..off.checked_add(size).ok_or(bad)?).ok_or(bad)?;
        for sym in syms.chunks_exact(entsize) {
            let name_off = u32_at(sym, 0).ok_or(bad)?;
            let info = sym[4];
            let name = strtab.get(name_off..).and_then(|s| s.split(|&c| c == 0).next()).unwrap_or(&[]);
            let Ok(name) = std::str::from_utf8(name) else { continue };
            match info & 0xF {
                2 if !name.is_empty() => names.push(name.to_owned()),
                1 => {
                    if let Some(kernel) = name.strip_suffix(".kd") {
                        names.push(kernel.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// The entries of a fatbin that the double can read (uncompressed PTX and ELF).
pub fn fatbin_entries(b: &[u8]) -> Result<Vec<String>, Error> {
    let bad = Error::InvalidImage;
    if u32_at(b, 0) != Some(FATBIN_MAGIC as usize) {
        return Err(bad);
    }
    let header = u16_at(b, 6).ok_or(bad)?;
    let size = u64_at(b, 8).ok_or(bad)?;
    let end = header.checked_add(size).filter(|&e| e <= b.len()).ok_or(bad)?;
    let mut at = header;
    let mut names = Vec::new();
    // Each entry: kind (u16: 1 PTX, 2 ELF), a u16, its header size (u32), its payload
    // size (u64); flag 0x2000 at byte 0x30 marks a compressed payload.
    while at + 16 <= end {
        let kind = u16_at(b, at).ok_or(bad)?;
        let entry_header = u32_at(b, at + 4).ok_or(bad)?;
        let payload = u64_at(b, at + 8).ok_or(bad)?;
        let start = at.checked_add(entry_header).ok_or(bad)?;
        let stop = start.checked_add(payload).filter(|&s| s <= end).ok_or(bad)?;
        let compressed = u64_at(b, at + 0x30).is_some_and(|f| f & 0x2000 != 0);
        if !compressed {
            let body = &b[start..stop];
            match kind {
                1 => names.extend(ptx_entries(&String::from_utf8_lossy(body))),
                2 => names.extend(elf_entries(body)?),
                _ => {}
            }
        }
        if stop <= at {
            break;
        }
        at = stop;
    }
    Ok(names)
}

/// The code object in a clang offload bundle for `arch` (`gfx90a`): `Ok(None)` when the
/// bundle has no entry for it.
pub fn bundle_entry<'a>(b: &'a [u8], arch: &str) -> Result<Option<&'a [u8]>, Error> {
    let bad = Error::InvalidImage;
    if !b.starts_with(BUNDLE_MAGIC) {
        return Err(bad);
    }
    let count = u64_at(b, BUNDLE_MAGIC.len()).ok_or(bad)?;
    let mut at = BUNDLE_MAGIC.len() + 8;
    for _ in 0..count.min(4096) {
        let offset = u64_at(b, at).ok_or(bad)?;
        let size = u64_at(b, at + 8).ok_or(bad)?;
        let tlen = u64_at(b, at + 16).ok_or(bad)?;
        let triple = b.get(at + 24..(at + 24).checked_add(tlen).ok_or(bad)?).ok_or(bad)?;
        at += 24 + tlen;
        let triple = std::str::from_utf8(triple).map_err(|_| bad)?;
        // `hipv4-amdgcn-amd-amdhsa--gfx90a` (features may follow the arch after ':').
        let target = triple.rsplit("--").next().unwrap_or("").split(':').next().unwrap_or("");
        if triple.contains("amdgcn") && target == arch {
            return Ok(Some(b.get(offset..offset.checked_add(size).ok_or(bad)?).ok_or(bad)?));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_entries_are_found() {
        let ptx = ".version 7.0\n.target sm_52\n.visible .entry fill_u32(\n.param .u64 a\n)\n{}\n.entry other ()";
        assert!(is_ptx(ptx));
        assert_eq!(ptx_entries(ptx), vec!["fill_u32", "other"]);
    }

    #[test]
    fn truncated_images_are_refused() {
        assert_eq!(elf_entries(b"\x7fELF\x02\x01"), Err(Error::InvalidImage));
        assert_eq!(
            fatbin_entries(&[0x50, 0xED, 0x55, 0xBA, 0, 0, 16, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0]),
            Err(Error::InvalidImage)
        );
        assert_eq!(bundle_entry(b"__CLANG_OFFLOAD_BUNDLE__\x05", "gfx90a"), Err(Error::InvalidImage));
    }
}
