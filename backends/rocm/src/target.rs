//! AMD GPU targets: the device's target ID (`gfx90a:sramecc+:xnack-`, from `gcnArchName`)
//! and the targets a code object or offload bundle was built for, so an image without code
//! for the device is refused with both named before the runtime sees it (the runtime says
//! only `hipErrorNoBinaryForGpu`, or, for a bare code object of another target, fails later).
//!
//! A target ID is a processor and its feature settings: `sramecc` and `xnack` each on
//! (`+`), off (`-`) or, in code, "any" (not named). Code for "any" runs either way; code
//! built with a setting runs only on a device with the same one. Code objects carry the
//! target in the ELF header (`e_flags`: the processor number, and from code-object v4 two
//! bits per feature); bundle entries name it in their triple
//! (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`).

use std::ffi::c_int;
use std::fmt;

use crate::sys::Runtime;

/// One feature's setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// Code for either setting (or a processor without the feature).
    Any,
    /// `+`.
    On,
    /// `-`.
    Off,
}

/// A target ID: processor and feature settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `gfx90a`.
    pub processor: String,
    /// `sramecc±`.
    pub sramecc: Setting,
    /// `xnack±`.
    pub xnack: Setting,
}

impl Target {
    /// Parses `gfx90a`, `gfx90a:xnack-`, `gfx90a:sramecc+:xnack-`; `None` for anything
    /// that is not a gfx processor with known features.
    pub fn parse(text: &str) -> Option<Target> {
        let mut parts = text.trim().split(':');
        let processor = parts.next()?;
        if !processor.starts_with("gfx")
            || processor.len() < 4
            || !processor[3..].chars().all(|c| c.is_ascii_alphanumeric())
        {
            return None;
        }
        let mut target = Target { processor: processor.to_owned(), sramecc: Setting::Any, xnack: Setting::Any };
        for feature in parts {
            let (name, setting) = match feature.split_at_checked(feature.len().checked_sub(1)?)? {
                (name, "+") => (name, Setting::On),
                (name, "-") => (name, Setting::Off),
                _ => return None,
            };
            match name {
                "sramecc" => target.sramecc = setting,
                "xnack" => target.xnack = setting,
                _ => return None,
            }
        }
        Some(target)
    }

    /// Whether code built for `self` runs on a device of target `device`.
    pub fn runs_on(&self, device: &Target) -> bool {
        let fits = |code: Setting, dev: Setting| code == Setting::Any || code == dev;
        self.processor == device.processor && fits(self.sramecc, device.sramecc) && fits(self.xnack, device.xnack)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for (name, setting) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            match setting {
                Setting::Any => {}
                Setting::On => write!(f, ":{name}+")?,
                Setting::Off => write!(f, ":{name}-")?,
            }
        }
        Ok(())
    }
}

/// The processors of `e_flags`' `EF_AMDGPU_MACH` field that gpuport names (from the ROCm
/// headers' `amd_hsa_elf.h`): GCN 5, CDNA 1–4 (MI100 gfx908, MI200 gfx90a, MI300 gfx940–942,
/// MI350 gfx950), RDNA 1–4. Generic targets (`gfx11-generic`, …) and numbers not listed are
/// left to the runtime.
const MACH: &[(u32, &str)] = &[
    (0x02c, "gfx900"),
    (0x02d, "gfx902"),
    (0x02e, "gfx904"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x031, "gfx909"),
    (0x032, "gfx90c"),
    (0x033, "gfx1010"),
    (0x034, "gfx1011"),
    (0x035, "gfx1012"),
    (0x036, "gfx1030"),
    (0x037, "gfx1031"),
    (0x038, "gfx1032"),
    (0x039, "gfx1033"),
    (0x03d, "gfx1035"),
    (0x03e, "gfx1034"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x042, "gfx1013"),
    (0x043, "gfx1150"),
    (0x044, "gfx1103"),
    (0x045, "gfx1036"),
    (0x046, "gfx1101"),
    (0x047, "gfx1102"),
    (0x048, "gfx1200"),
    (0x04a, "gfx1151"),
    (0x04b, "gfx941"),
    (0x04c, "gfx942"),
    (0x04e, "gfx1201"),
    (0x04f, "gfx950"),
    (0x055, "gfx1152"),
    (0x058, "gfx1153"),
];

/// `EM_AMDGPU`.
const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
const OSABI_HSA: u8 = 64;

/// The target of an AMD GPU ELF code object, when its header names one gpuport knows.
pub fn code_object_target(elf: &[u8]) -> Option<Target> {
    let u16_at = |at: usize| elf.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let flags = elf.get(0x30..0x34).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))?;
    if !elf.starts_with(b"\x7fELF") || elf.get(4) != Some(&2) || u16_at(0x12)? != EM_AMDGPU || elf[7] != OSABI_HSA {
        return None;
    }
    let processor = MACH.iter().find(|(m, _)| *m == flags & 0xff).map(|(_, n)| (*n).to_owned())?;
    // EI_ABIVERSION: 1 is code-object v3 (one bit per feature: on, or off when clear);
    // 2 and later are v4+ (two bits: unsupported 0, any 1, off 2, on 3).
    let (sramecc, xnack) = match elf[8] {
        1 => {
            let bit = |mask: u32| if flags & mask != 0 { Setting::On } else { Setting::Off };
            (bit(0x200), bit(0x100))
        }
        v if v >= 2 => {
            let field = |shift: u32| match (flags >> shift) & 3 {
                2 => Setting::Off,
                3 => Setting::On,
                _ => Setting::Any,
            };
            (field(10), field(8))
        }
        _ => (Setting::Any, Setting::Any),
    };
    Some(Target { processor, sramecc, xnack })
}

/// The HIP entries' targets of a clang offload bundle (`None` when the bundle's header is
/// malformed); entries for the host or other offload kinds are left out, as are targets
/// gpuport cannot read.
pub fn bundle_targets(bundle: &[u8]) -> Option<Vec<Target>> {
    let u64_at = |at: usize| -> Option<usize> {
        let b = bundle.get(at..at.checked_add(8)?)?;
        usize::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()
    };
    let count = u64_at(24)?;
    let mut at = 32usize;
    let mut targets = Vec::new();
    for _ in 0..count.min(4096) {
        let len = u64_at(at + 16)?;
        let triple = bundle.get(at + 24..(at + 24).checked_add(len)?)?;
        at += 24 + len;
        let triple = std::str::from_utf8(triple).ok()?;
        // `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`, `hip-amdgcn-amd-amdhsa-gfx906`.
        let Some(rest) = triple.strip_prefix("hipv4-").or_else(|| triple.strip_prefix("hip-")) else { continue };
        let Some(id) = rest.strip_prefix("amdgcn-amd-amdhsa") else { continue };
        if let Some(t) = Target::parse(id.trim_start_matches('-')) {
            targets.push(t);
        }
    }
    Some(targets)
}

/// Refuses `image` (an ELF code object or an offload bundle) when it has no code for
/// `device`: a code object of another target, or a bundle none of whose entries runs on
/// it. An image whose targets gpuport cannot read (a generic target, a processor newer
/// than this table, a malformed header) is left to the runtime.
pub fn check_image(image: &[u8], device: &Target) -> Result<(), String> {
    if image.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") {
        let Some(targets) = bundle_targets(image) else { return Ok(()) };
        if targets.is_empty() || targets.iter().any(|t| t.runs_on(device)) {
            return Ok(());
        }
        let names: Vec<String> = targets.iter().map(Target::to_string).collect();
        return Err(format!("the offload bundle has code for {} but not for this device's {device}", names.join(", ")));
    }
    match code_object_target(image) {
        Some(t) if !t.runs_on(device) => {
            Err(format!("the code object is built for {t}, not for this device's {device}"))
        }
        _ => Ok(()),
    }
}

/// The device's target ID (`gfx90a:sramecc+:xnack-`), from `gcnArchName` in the device
/// properties: the ROCm 6 layout through `hipGetDevicePropertiesR0600` where the runtime
/// is 6 or newer, else the ROCm 5 layout. (The `gcnArch` attribute is no help: ROCm 5.x
/// does not answer it for newer chips and renders gfx90a as "gfx910".) `None` when neither
/// call answers.
pub(crate) fn of_device(rt: &Runtime, ordinal: u32) -> Option<Target> {
    let (bytes, offset) = crate::result::device::properties(rt, ordinal as c_int)?;
    decode_target(&bytes, offset)
}

/// `gcnArchName` at `offset` of a device-properties buffer, with its feature settings.
fn decode_target(props: &[u8], offset: usize) -> Option<Target> {
    let field = props.get(offset..offset + 256)?;
    let text = field.split(|&b| b == 0).next()?;
    Target::parse(std::str::from_utf8(text).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props_with(offset: usize, name: &str) -> Vec<u8> {
        let mut props = vec![0u8; crate::sys::DEVICE_PROP_BUFFER];
        props[offset..offset + name.len()].copy_from_slice(name.as_bytes());
        props
    }

    fn arch(props: &[u8], offset: usize) -> Option<String> {
        decode_target(props, offset).map(|t| t.to_string())
    }

    #[test]
    fn targets_decode_from_both_layouts_with_their_features() {
        let v5 = props_with(crate::sys::GCN_ARCH_NAME_OFFSET_R0000, "gfx90a:sramecc+:xnack-");
        assert_eq!(arch(&v5, crate::sys::GCN_ARCH_NAME_OFFSET_R0000).as_deref(), Some("gfx90a:sramecc+:xnack-"));
        let v6 = props_with(crate::sys::GCN_ARCH_NAME_OFFSET_R0600, "gfx942:sramecc+:xnack-");
        assert_eq!(arch(&v6, crate::sys::GCN_ARCH_NAME_OFFSET_R0600).as_deref(), Some("gfx942:sramecc+:xnack-"));
        // Read with the wrong layout, the field holds something else (here: nothing).
        assert_eq!(arch(&v6, crate::sys::GCN_ARCH_NAME_OFFSET_R0000), None);
        assert_eq!(arch(&props_with(396, "gfx1100"), 396).as_deref(), Some("gfx1100"));
        assert_eq!(arch(&[0u8; 100], 396), None, "a short buffer is not read past its end");
    }

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    #[test]
    fn target_ids_parse_and_print() {
        assert_eq!(t("gfx90a:sramecc+:xnack-").to_string(), "gfx90a:sramecc+:xnack-");
        assert_eq!(t("gfx1100").to_string(), "gfx1100");
        assert_eq!(t("gfx942:xnack+").xnack, Setting::On);
        for bad in ["", "sm_90", "gfx", "gfx90a:xnack", "gfx90a:turbo+", "gfx9 0a"] {
            assert_eq!(Target::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn code_for_any_runs_either_way_and_a_setting_must_match() {
        let dev = t("gfx90a:sramecc+:xnack-");
        assert!(t("gfx90a").runs_on(&dev));
        assert!(t("gfx90a:xnack-").runs_on(&dev));
        assert!(!t("gfx90a:xnack+").runs_on(&dev));
        assert!(!t("gfx90a:sramecc-").runs_on(&dev));
        assert!(!t("gfx942").runs_on(&dev));
    }

    fn elf(abi: u8, flags: u32) -> Vec<u8> {
        let mut e = vec![0u8; 64];
        e[..4].copy_from_slice(b"\x7fELF");
        e[4] = 2;
        e[7] = OSABI_HSA;
        e[8] = abi;
        e[0x12..0x14].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        e[0x30..0x34].copy_from_slice(&flags.to_le_bytes());
        e
    }

    #[test]
    fn current_code_object_targets_are_recognised() {
        for (mach, name) in [
            (0x3f, "gfx90a"),
            (0x4c, "gfx942"),
            (0x4f, "gfx950"),
            (0x41, "gfx1100"),
            (0x46, "gfx1101"),
            (0x47, "gfx1102"),
            (0x44, "gfx1103"),
            (0x43, "gfx1150"),
            (0x4a, "gfx1151"),
            (0x48, "gfx1200"),
            (0x4e, "gfx1201"),
        ] {
            let target = code_object_target(&elf(3, mach | 0x500)).unwrap();
            assert_eq!(target.to_string(), name, "{mach:#x}: v4+ 'any' settings print nothing");
        }
        // v4+: xnack off (2 << 8), sramecc on (3 << 10).
        assert_eq!(code_object_target(&elf(2, 0x3f | 0x200 | 0xc00)).unwrap().to_string(), "gfx90a:sramecc+:xnack-");
        // v3: one bit each.
        assert_eq!(code_object_target(&elf(1, 0x3f | 0x100)).unwrap().to_string(), "gfx90a:sramecc-:xnack+");
        // A generic target or an unknown number is left to the runtime.
        assert_eq!(code_object_target(&elf(4, 0x54)), None);
        assert_eq!(code_object_target(&elf(3, 0xfe)), None);
        assert_eq!(code_object_target(b"\x7fELF"), None, "a short header is not read past its end");
    }

    #[test]
    fn images_without_code_for_the_device_are_refused_with_both_named() {
        let dev = t("gfx90a:sramecc+:xnack-");
        assert!(check_image(&elf(2, 0x53f), &dev).is_ok());
        let why = check_image(&elf(3, 0x54c), &dev).unwrap_err();
        assert!(why.contains("gfx942") && why.contains("gfx90a:sramecc+:xnack-"), "{why}");
        let co = elf(2, 0x53f);
        let bundle = crate::offload_bundle(&[("gfx1030", &co), ("gfx942", &co)]).unwrap();
        let why = check_image(&bundle, &dev).unwrap_err();
        assert!(why.contains("gfx1030, gfx942"), "{why}");
        let bundle = crate::offload_bundle(&[("gfx1030", &co), ("gfx90a:xnack-", &co)]).unwrap();
        assert!(check_image(&bundle, &dev).is_ok());
        let bundle = crate::offload_bundle(&[("gfx90a:xnack+", &co)]).unwrap();
        assert!(check_image(&bundle, &dev).is_err());
        // Headers gpuport cannot read are the runtime's to judge.
        assert!(check_image(b"__CLANG_OFFLOAD_BUNDLE__", &dev).is_ok());
        assert!(check_image(&elf(4, 0x54), &dev).is_ok());
    }
}
