//! Backend kinds and device ids.

use std::fmt;

/// Which family of backend a handle belongs to.
#[derive(Debug, Clone, Copy, Eq, PartialOrd, Ord)]
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

/// Equal kinds: two plugin names are equal when their text is. Every handle of one
/// plugin carries the one name the runtime registered, so the text is compared only when
/// the two names are not that same string: a stream's check that a buffer is its
/// backend's memory (several per copy) costs no string comparison.
impl PartialEq for BackendKind {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (BackendKind::Plugin(a), BackendKind::Plugin(b)) => std::ptr::eq(*a, *b) || a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

/// Hashes what [`PartialEq`] compares: the kind, and a plugin's name's text.
impl std::hash::Hash for BackendKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        if let BackendKind::Plugin(name) = self {
            name.hash(state);
        }
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

#[cfg(test)]
mod tests {
    use super::BackendKind;
    use std::hash::{BuildHasher, RandomState};

    #[test]
    fn plugin_kinds_are_equal_by_their_names_text_wherever_it_lives() {
        let owned = String::from("myaccel");
        let elsewhere: &'static str = owned.leak();
        let (a, b) = (BackendKind::Plugin("myaccel"), BackendKind::Plugin(elsewhere));
        assert!(!std::ptr::eq(a.name(), b.name()), "the test needs two copies of the name");
        assert_eq!(a, b);
        let hasher = RandomState::new();
        assert_eq!(hasher.hash_one(a), hasher.hash_one(b), "equal kinds hash alike");
        assert_ne!(a, BackendKind::Plugin("myaccel2"));
        assert_ne!(BackendKind::Plugin("cuda"), BackendKind::Cuda);
        assert_eq!(BackendKind::Rocm, BackendKind::Rocm);
        assert_ne!(BackendKind::Host, BackendKind::Cuda);
    }
}
