//! The NCCL calls gpuport resolves, each with the feature it serves and the NCCL version
//! that brought it: a library without one lacks that feature alone (named, with the version
//! that has it), never the whole engine. RCCL exports NCCL's C API under the same names,
//! with one difference: its all-to-all is `ncclAllToAll`, NCCL's (from 2.28) `ncclAlltoAll`.

use super::version::Version;

/// One call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// NCCL's name.
    pub(crate) nccl: &'static str,
    /// RCCL's name.
    pub(crate) rccl: &'static str,
    /// The first NCCL version with it.
    pub(crate) since: Version,
    /// What gpuport does with it, in the words of its API.
    pub(crate) feature: &'static str,
}

const fn entry(nccl: &'static str, since: Version, feature: &'static str) -> Entry {
    Entry { nccl, rccl: nccl, since, feature }
}

const V2_0: Version = Version::new(2, 0, 0);

/// Every call gpuport resolves.
pub(crate) const ENTRIES: [Entry; 25] = [
    entry("ncclGetVersion", Version::new(2, 3, 5), "the version"),
    entry("ncclGetErrorString", V2_0, "communicators"),
    entry("ncclGetUniqueId", V2_0, "communicators"),
    entry("ncclCommInitRank", V2_0, "communicators"),
    entry("ncclCommDestroy", V2_0, "communicators"),
    entry("ncclCommCount", V2_0, "communicators"),
    entry("ncclCommCuDevice", V2_0, "communicators"),
    entry("ncclCommUserRank", V2_0, "communicators"),
    entry("ncclCommInitAll", V2_0, "several devices in one process"),
    entry("ncclGroupStart", V2_0, "groups"),
    entry("ncclGroupEnd", V2_0, "groups"),
    entry("ncclAllReduce", V2_0, "all_reduce"),
    entry("ncclBroadcast", V2_0, "broadcast"),
    entry("ncclReduce", V2_0, "reduce"),
    entry("ncclAllGather", V2_0, "all_gather"),
    entry("ncclReduceScatter", V2_0, "reduce_scatter"),
    entry("ncclCommAbort", Version::new(2, 4, 0), "abort and asynchronous errors"),
    entry("ncclCommGetAsyncError", Version::new(2, 4, 0), "abort and asynchronous errors"),
    entry("ncclSend", Version::new(2, 7, 0), "send and recv"),
    entry("ncclRecv", Version::new(2, 7, 0), "send and recv"),
    entry("ncclGetLastError", Version::new(2, 13, 0), "error details"),
    entry("ncclCommInitRankConfig", Version::new(2, 14, 0), "non-blocking communicators"),
    entry("ncclCommFinalize", Version::new(2, 14, 0), "non-blocking communicators"),
    entry("ncclCommSplit", Version::new(2, 18, 0), "split"),
    Entry { nccl: "ncclAlltoAll", rccl: "ncclAllToAll", since: Version::new(2, 28, 0), feature: "all_to_all" },
];

/// [`ENTRIES`]' `ncclGetVersion`, read first (the one call an engine cannot lack).
pub(crate) const GET_VERSION: usize = index("ncclGetVersion");

/// The position in [`ENTRIES`] of the call NCCL names `name` (evaluated when compiling:
/// a name that is not there does not build).
pub(crate) const fn index(name: &str) -> usize {
    let mut i = 0;
    while i < ENTRIES.len() {
        if same(ENTRIES[i].nccl.as_bytes(), name.as_bytes()) {
            return i;
        }
        i += 1;
    }
    panic!("not a call gpuport resolves")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_only_all_to_all_differs_in_rccl() {
        for (i, a) in ENTRIES.iter().enumerate() {
            assert!(ENTRIES[i + 1..].iter().all(|b| b.nccl != a.nccl), "{} twice", a.nccl);
            assert_eq!(a.nccl == a.rccl, a.feature != "all_to_all", "{a:?}");
        }
        assert_eq!(ENTRIES[GET_VERSION].nccl, "ncclGetVersion");
    }
}
