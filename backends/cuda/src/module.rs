//! (Its checked calls are `result/module.rs`.) Module images (PTX, cubin, fatbin), checked
//! before the driver reads them. Loading,
//! kernel lookup and unloading are the vendor kit's (`gpuport_vendor_kit::device`).

use std::ffi::{c_void, CString};

use gpuport_core::{BackendKind, Error, ModuleImage, Result};

/// The fatbin magic (`__cudaFatMAGIC2`): a fatbin image starts with it.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// Checks a cubin or fatbin before the driver parses it: the driver reads as far as the
/// image's own headers say, with no length given, so an image must hold everything its
/// headers claim. A cubin is a 64-bit ELF file; a fatbin starts with [`FATBIN_MAGIC`] and
/// a 16-byte header giving its size. The fatbin *wrapper* (magic `0x466243B1`, what
/// `nvcc` embeds in host objects) holds an absolute pointer to the fatbin, meaningless in
/// a byte slice: refused.
fn check_image(bytes: &[u8]) -> Result<()> {
    let u16_at = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u64);
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64);
    let u64_at = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let len = bytes.len() as u64;
    let fits = |end: Option<u64>| end.is_some_and(|e| e <= len);
    if bytes.starts_with(b"\x7fELF") {
        // ELFCLASS64, little-endian; then the program and section header tables.
        if bytes.get(4..6) != Some(&[2, 1]) {
            return Err(Error::invalid_argument("a cubin must be a 64-bit little-endian ELF file"));
        }
        let table_end = |off: usize, size: usize, num: usize| {
            let (o, sz, n) = (u64_at(off)?, u16_at(size)?, u16_at(num)?);
            o.checked_add(sz.checked_mul(n)?)
        };
        if !fits(Some(64)) || !fits(table_end(0x20, 0x36, 0x38)) || !fits(table_end(0x28, 0x3A, 0x3C)) {
            return Err(Error::invalid_argument(format!("a cubin of {len} bytes whose headers reach past its end")));
        }
        return Ok(());
    }
    match u32_at(0) {
        Some(magic) if magic == u64::from(FATBIN_MAGIC) => {
            let end = u16_at(6).zip(u64_at(8)).and_then(|(header, size)| header.checked_add(size));
            if !fits(Some(16)) || !fits(end) {
                return Err(Error::invalid_argument(format!("a fatbin of {len} bytes whose header claims more")));
            }
            Ok(())
        }
        Some(0x466243B1) => Err(Error::invalid_argument(
            "a fatbin wrapper (magic 0x466243B1) holds a pointer, not the image: pass the fatbin it points to",
        )),
        _ => Err(Error::invalid_argument("not a cubin (ELF) or fatbin (magic 0xBA55ED50) image")),
    }
}

/// The image handed to `cuModuleLoadData`: PTX text (NUL-terminated here) or a checked
/// cubin/fatbin; another kind is `Unsupported`.
pub(crate) enum LoadableImage<'a> {
    Ptx(CString),
    Binary(&'a [u8]),
}

impl<'a> LoadableImage<'a> {
    pub(crate) fn new(image: ModuleImage<'a>) -> Result<Self> {
        match image {
            ModuleImage::Ptx(text) => CString::new(text)
                .map(LoadableImage::Ptx)
                .map_err(|_| Error::invalid_argument("PTX text contains a NUL byte")),
            ModuleImage::Cubin(bytes) => check_image(bytes).map(|()| LoadableImage::Binary(bytes)),
            other => Err(Error::unsupported(BackendKind::Cuda, format!("loading a {}", other.kind_name()))),
        }
    }

    /// The pointer the driver reads, valid while `self` lives.
    pub(crate) fn as_ptr(&self) -> *const c_void {
        match self {
            LoadableImage::Ptx(text) => text.as_ptr().cast(),
            LoadableImage::Binary(bytes) => bytes.as_ptr().cast(),
        }
    }
}

#[cfg(test)]
mod image_tests {
    use super::check_image;

    fn fatbin(header: u16, size: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len.max(16)];
        b[..4].copy_from_slice(&0xBA55_ED50u32.to_le_bytes());
        b[6..8].copy_from_slice(&header.to_le_bytes());
        b[8..16].copy_from_slice(&size.to_le_bytes());
        b.truncate(len);
        b
    }

    fn elf(phoff: u64, phnum: u16, shoff: u64, shnum: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&phoff.to_le_bytes());
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&phnum.to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn fatbins_must_hold_what_their_header_claims() {
        assert!(check_image(&fatbin(16, 100, 116)).is_ok());
        assert!(check_image(&fatbin(16, 101, 116)).is_err());
        assert!(check_image(&fatbin(16, u64::MAX, 116)).is_err(), "no overflow");
        assert!(check_image(&fatbin(16, 0, 8)).is_err(), "a truncated header");
    }

    #[test]
    fn only_real_images_are_accepted() {
        let mut wrapper = fatbin(16, 0, 32);
        wrapper[..4].copy_from_slice(&0x466243B1u32.to_le_bytes());
        assert!(check_image(&wrapper).unwrap_err().to_string().contains("wrapper"));
        assert!(check_image(b"garbage").is_err());
        assert!(check_image(&[]).is_err());
    }

    #[test]
    fn cubins_must_hold_their_header_tables() {
        assert!(check_image(&elf(64, 2, 200, 3, 200 + 3 * 64)).is_ok());
        assert!(check_image(&elf(64, 2, 200, 3, 200 + 3 * 64 - 1)).is_err(), "section table past the end");
        assert!(check_image(&elf(1 << 40, 1, 64, 0, 128)).is_err(), "program table past the end");
        let mut elf32 = elf(64, 0, 64, 0, 128);
        elf32[4] = 1;
        assert!(check_image(&elf32).is_err(), "a 32-bit ELF");
        assert!(check_image(&b"\x7fELF\x02\x01"[..]).is_err(), "a truncated ELF header");
    }
}
