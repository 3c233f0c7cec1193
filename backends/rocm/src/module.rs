//! (Its checked calls are `result/module.rs`.) Code objects, checked before the runtime
//! reads them. Loading, kernel lookup and
//! unloading are the vendor kit's (`gpuport_vendor_kit::device`).

use gpuport_core::{BackendKind, Error, ModuleImage, Result};

/// The bytes handed to `hipModuleLoadData`: an AMD GPU code object — an ELF file, possibly
/// in a clang offload bundle. Another kind of image is `Unsupported`.
pub(crate) fn code_object(image: ModuleImage<'_>) -> Result<&[u8]> {
    match image {
        ModuleImage::HipCodeObject(bytes)
            if bytes.starts_with(b"\x7fELF") || bytes.starts_with(b"__CLANG_OFFLOAD_BUNDLE__") =>
        {
            Ok(bytes)
        }
        ModuleImage::HipCodeObject(_) => {
            Err(Error::invalid_argument("not an AMD GPU code object (ELF or offload bundle)"))
        }
        other => Err(Error::unsupported(BackendKind::Rocm, format!("loading a {}", other.kind_name()))),
    }
}
