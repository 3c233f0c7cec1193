//! DLPack device types, as each backend declares them for its kinds of memory. The
//! interchange crates read a backend's declaration ([`crate::Backend::DLPACK`]) for every
//! backend, plugins included: no table elsewhere names a port's device type.

use std::fmt;

use crate::memory::MemoryKind;

/// A DLPack `DLDeviceType` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DlDeviceType(pub i32);

impl DlDeviceType {
    /// `kDLCPU`.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost` (pinned host memory of the CUDA runtime).
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLOpenCL`.
    pub const OPENCL: Self = Self(4);
    /// `kDLVulkan`.
    pub const VULKAN: Self = Self(7);
    /// `kDLMetal`.
    pub const METAL: Self = Self(8);
    /// `kDLVPI`.
    pub const VPI: Self = Self(9);
    /// `kDLROCM`.
    pub const ROCM: Self = Self(10);
    /// `kDLROCMHost` (pinned host memory of the ROCm runtime).
    pub const ROCM_HOST: Self = Self(11);
    /// `kDLExtDev`, reserved for extension devices.
    pub const EXT_DEV: Self = Self(12);
    /// `kDLCUDAManaged`.
    pub const CUDA_MANAGED: Self = Self(13);
    /// `kDLOneAPI`.
    pub const ONEAPI: Self = Self(14);
    /// `kDLWebGPU`.
    pub const WEBGPU: Self = Self(15);
    /// `kDLHexagon`.
    pub const HEXAGON: Self = Self(16);
    /// `kDLMAIA`.
    pub const MAIA: Self = Self(17);
    /// `kDLTrn`.
    pub const TRN: Self = Self(18);

    /// Every type of `dlpack.h` 1.x with its header name.
    pub const ALL: [(Self, &'static str); 16] = [
        (Self::CPU, "kDLCPU"),
        (Self::CUDA, "kDLCUDA"),
        (Self::CUDA_HOST, "kDLCUDAHost"),
        (Self::OPENCL, "kDLOpenCL"),
        (Self::VULKAN, "kDLVulkan"),
        (Self::METAL, "kDLMetal"),
        (Self::VPI, "kDLVPI"),
        (Self::ROCM, "kDLROCM"),
        (Self::ROCM_HOST, "kDLROCMHost"),
        (Self::EXT_DEV, "kDLExtDev"),
        (Self::CUDA_MANAGED, "kDLCUDAManaged"),
        (Self::ONEAPI, "kDLOneAPI"),
        (Self::WEBGPU, "kDLWebGPU"),
        (Self::HEXAGON, "kDLHexagon"),
        (Self::MAIA, "kDLMAIA"),
        (Self::TRN, "kDLTrn"),
    ];

    /// The header's name for the type, when it is one of `dlpack.h` 1.x.
    pub fn name(self) -> Option<&'static str> {
        Self::ALL.iter().find(|(t, _)| *t == self).map(|(_, n)| *n)
    }
}

impl fmt::Display for DlDeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "device type {}", self.0),
        }
    }
}

/// A backend's DLPack device types: one for its device memory, and, where it has them,
/// for its pinned host memory and its managed memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DlpackDevices {
    /// The type of device memory (`kDLCUDA`, `kDLROCM`, `kDLCPU` for the host, …).
    pub device: DlDeviceType,
    /// The type of pinned host memory (`kDLCUDAHost`, `kDLROCMHost`, or `kDLCPU` where the
    /// vendor has no type of its own); `None` when the backend has none.
    pub pinned_host: Option<DlDeviceType>,
    /// The type of managed memory (`kDLCUDAManaged`); `None` when the backend has none.
    pub managed: Option<DlDeviceType>,
}

impl DlpackDevices {
    /// The type that memory of `kind` from this backend exports as (`Host` is the host
    /// backend's own memory, so its device type).
    pub fn for_memory(&self, kind: MemoryKind) -> Option<DlDeviceType> {
        match kind {
            MemoryKind::Device | MemoryKind::Host => Some(self.device),
            MemoryKind::PinnedHost => self.pinned_host,
            MemoryKind::Managed => self.managed,
            MemoryKind::Unregistered => None,
        }
    }

    /// The kind of this backend's memory that device type `ty` denotes, if any.
    pub fn memory_for(&self, ty: DlDeviceType) -> Option<MemoryKind> {
        if ty == self.device {
            Some(MemoryKind::Device)
        } else if self.pinned_host == Some(ty) {
            Some(MemoryKind::PinnedHost)
        } else if self.managed == Some(ty) {
            Some(MemoryKind::Managed)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_kinds_map_both_ways() {
        let cuda = DlpackDevices {
            device: DlDeviceType::CUDA,
            pinned_host: Some(DlDeviceType::CUDA_HOST),
            managed: Some(DlDeviceType::CUDA_MANAGED),
        };
        assert_eq!(cuda.for_memory(MemoryKind::PinnedHost), Some(DlDeviceType(3)));
        assert_eq!(cuda.for_memory(MemoryKind::Managed), Some(DlDeviceType(13)));
        assert_eq!(cuda.memory_for(DlDeviceType(2)), Some(MemoryKind::Device));
        assert_eq!(cuda.memory_for(DlDeviceType::ROCM), None);
        assert_eq!(DlDeviceType(12).to_string(), "kDLExtDev (12)");
        assert_eq!(DlDeviceType(99).to_string(), "device type 99");
    }
}
