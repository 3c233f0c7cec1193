//! Backend kinds and device ids.

use std::fmt;

/// Which family of backend a handle belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// The CPU, always present.
    Host,
    /// NVIDIA CUDA (driver API).
    Cuda,
    /// AMD ROCm (HIP runtime).
    Rocm,
    /// A backend registered at run time by a crate outside gpuport; the string is its name.
    Plugin(&'static str),
}

impl BackendKind {
    /// The built-in kinds, in discovery order: the one list of built-in backends (the
    /// runtime loads exactly these; everything else, the ext device included, is a
    /// plugin that names itself).
    pub const BUILTIN: [BackendKind; 3] = [BackendKind::Host, BackendKind::Cuda, BackendKind::Rocm];

    /// The name used in device strings and `GPUPORT_BACKENDS`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
            BackendKind::Rocm => "rocm",
            BackendKind::Plugin(name) => name,
        }
    }

    /// The built-in kind with this name, if any (plugin names are resolved by the runtime).
    pub fn builtin_from_name(name: &str) -> Option<BackendKind> {
        Self::BUILTIN.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device: its backend and its ordinal within that backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The backend.
    pub kind: BackendKind,
    /// Ordinal within the backend (0 for the host).
    pub ordinal: u32,
}

impl DeviceId {
    /// The host device, `host:0`.
    pub const HOST: DeviceId = DeviceId { kind: BackendKind::Host, ordinal: 0 };

    /// A device id.
    pub const fn new(kind: BackendKind, ordinal: u32) -> Self {
        DeviceId { kind, ordinal }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.ordinal)
    }
}
