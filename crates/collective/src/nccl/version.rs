//! The engine's version, as `ncclGetVersion` reports it.

use std::fmt;

/// An NCCL API version (RCCL reports the NCCL version whose API it implements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Version {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) patch: u32,
}

impl Version {
    pub(crate) const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version { major, minor, patch }
    }

    /// The version `ncclGetVersion` encodes as `code`: `NCCL_VERSION(X, Y, Z)`, which is
    /// `X*1000 + Y*100 + Z` up to 2.8 and `X*10000 + Y*100 + Z` from 2.9, when minor
    /// versions passed 9. `None` for a code no NCCL 2 writes.
    pub(crate) fn from_code(code: i32) -> Option<Version> {
        let code = u32::try_from(code).ok()?;
        let v = if code >= 10_000 {
            Version::new(code / 10_000, code % 10_000 / 100, code % 100)
        } else {
            Version::new(code / 1000, code % 1000 / 100, code % 100)
        };
        (v.major >= 2).then_some(v)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    #[test]
    fn both_encodings_decode() {
        // NCCL 2.8.4 (the old encoding), 2.14.3, 2.32.3 (the pip wheel's), RCCL 2.27.7.
        for (code, v) in [(2804, (2, 8, 4)), (21403, (2, 14, 3)), (23203, (2, 32, 3)), (22707, (2, 27, 7))] {
            let got = Version::from_code(code).expect("a valid code");
            assert_eq!((got.major, got.minor, got.patch), v, "{code}");
        }
        assert_eq!(Version::from_code(23203).map(|v| v.to_string()).as_deref(), Some("2.32.3"));
    }

    #[test]
    fn codes_no_nccl_2_writes_are_refused() {
        for code in [-1, 0, 999, 1999] {
            assert_eq!(Version::from_code(code), None, "{code}");
        }
    }

    #[test]
    fn versions_order_by_number() {
        assert!(Version::new(2, 9, 0) > Version::new(2, 8, 4));
        assert!(Version::new(2, 28, 0) > Version::new(2, 9, 9));
    }
}
