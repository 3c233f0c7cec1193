//! (Its checked calls are `result/module.rs`.) Code objects, checked before the runtime
//! reads them. Loading, kernel lookup and
//! unloading are the vendor kit's (`gpuport_vendor_kit::device`).

use gpuport_core::{BackendKind, DeviceId, Error, ModuleImage, Result};

use crate::target::{check_image, Target};

/// The bytes handed to `hipModuleLoadData`: an AMD GPU code object — an ELF file, possibly
/// in a clang offload bundle — with code for `device` (of target `target`, when known).
/// Another kind of image is `Unsupported`.
pub(crate) fn code_object<'a>(image: ModuleImage<'a>, target: Option<&Target>, device: DeviceId) -> Result<&'a [u8]> {
    match image {
        ModuleImage::HipCodeObject(bytes)
            if bytes.starts_with(b"\x7fELF") || bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") =>
        {
            match target.map(|t| check_image(bytes, t)) {
                Some(Err(why)) => Err(Error::invalid_argument(format!("{device}: {why}"))),
                _ => Ok(bytes),
            }
        }
        ModuleImage::HipCodeObject(_) => {
            Err(Error::invalid_argument("not an AMD GPU code object (ELF or offload bundle)"))
        }
        other => Err(Error::unsupported(BackendKind::Rocm, format!("loading a {}", other.kind_name()))),
    }
}
