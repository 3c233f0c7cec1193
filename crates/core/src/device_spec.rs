//! Device selection strings (`host`, `cuda:1`, `ext:0`, …): parsed here, resolved to a
//! device by the runtime.

use std::str::FromStr;

use crate::error::{Error, Result};
use crate::id::{BackendKind, DeviceId};

/// A parsed device selection string: a backend name and an ordinal, not yet resolved to a
/// backend (plugins are named at run time, so only the runtime can resolve every name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Backend name, lower case.
    pub backend: String,
    /// Ordinal; `host` and a bare `cuda` mean 0.
    pub ordinal: u32,
}

impl DeviceSpec {
    /// Parses `name` or `name:N`. Names are ASCII letters, digits, `_` and `-`, starting
    /// with a letter; case is ignored; surrounding white space is not allowed.
    pub fn parse(input: &str) -> Result<Self> {
        let bad = |reason: &str| Error::InvalidDeviceString { input: input.to_owned(), reason: reason.to_owned() };
        if input.is_empty() {
            return Err(bad("empty string"));
        }
        let (name, ordinal) = match input.split_once(':') {
            None => (input, None),
            Some((name, ord)) => (name, Some(ord)),
        };
        let mut chars = name.chars();
        match chars.next() {
            Some(c) if c.is_ascii_alphabetic() => {}
            Some(_) => return Err(bad("the backend name must start with a letter")),
            None => return Err(bad("missing backend name before ':'")),
        }
        if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad("the backend name may hold only letters, digits, '_' and '-'"));
        }
        let ordinal = match ordinal {
            None => 0,
            Some("") => return Err(bad("missing device ordinal after ':'")),
            Some(ord) => {
                if !ord.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad("the device ordinal must be a non-negative decimal integer"));
                }
                ord.parse::<u32>().map_err(|_| bad("the device ordinal is too large"))?
            }
        };
        Ok(DeviceSpec { backend: name.to_ascii_lowercase(), ordinal })
    }

    /// The [`DeviceId`] when the name is a built-in backend.
    pub fn builtin_id(&self) -> Option<DeviceId> {
        BackendKind::builtin_from_name(&self.backend).map(|kind| DeviceId::new(kind, self.ordinal))
    }
}

impl FromStr for DeviceId {
    type Err = Error;

    /// Parses a device string naming a built-in backend. Plugin names need the runtime
    /// (`Runtime::device`).
    fn from_str(s: &str) -> Result<Self> {
        let spec = DeviceSpec::parse(s)?;
        spec.builtin_id().ok_or_else(|| Error::InvalidDeviceString {
            input: s.to_owned(),
            reason: format!(
                "unknown backend `{}` (built-in backends: host, cuda, rocm; plugins such as `ext` are resolved by the runtime)",
                spec.backend
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!("host".parse::<DeviceId>().unwrap(), DeviceId::HOST);
        assert_eq!("host:0".parse::<DeviceId>().unwrap(), DeviceId::HOST);
        assert_eq!("cuda:1".parse::<DeviceId>().unwrap(), DeviceId::new(BackendKind::Cuda, 1));
        assert_eq!("ROCm:0".parse::<DeviceId>().unwrap(), DeviceId::new(BackendKind::Rocm, 0));
        assert_eq!("cuda:3".parse::<DeviceId>().unwrap().to_string(), "cuda:3");
        assert_eq!(DeviceId::new(BackendKind::Plugin("ext"), 3).to_string(), "ext:3");
    }

    #[test]
    fn rejects_bad_strings_with_a_reason() {
        for bad in [
            "",
            ":0",
            "cuda:",
            "cuda:-1",
            "cuda:x",
            "cuda:1:2",
            " cuda",
            "1cuda",
            "cu da",
            "cuda:99999999999",
            "metal:0",
            "ext:0",
        ] {
            let err = bad.parse::<DeviceId>().unwrap_err();
            assert!(matches!(err, Error::InvalidDeviceString { .. }), "{bad:?} gave {err:?}");
        }
    }

    #[test]
    fn plugin_names_parse_as_specs() {
        let spec = DeviceSpec::parse("myaccel:2").unwrap();
        assert_eq!(spec.backend, "myaccel");
        assert_eq!(spec.ordinal, 2);
        assert_eq!(spec.builtin_id(), None);
    }
}
