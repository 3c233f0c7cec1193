//! The loader against stand-in libraries compiled here with the system's C compiler: one
//! that reports NCCL 2.14.3 and exports what that version has, one whose version is no
//! NCCL 2 code, and libraries that are not NCCL at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// Every call NCCL 2.14 has: everything but `ncclCommSplit` (2.18) and `ncclAlltoAll` (2.28).
const NCCL_2_14: &[&str] = &[
    "ncclGetErrorString",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommDestroy",
    "ncclCommCount",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclCommInitAll",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclSend",
    "ncclRecv",
    "ncclGetLastError",
    "ncclCommInitRankConfig",
    "ncclCommFinalize",
];

/// Compiles a stand-in whose `ncclGetVersion` gives `code` and which exports `calls`
/// (each returning an error status if ever called: the loader only resolves them).
fn stand_in(name: &str, code: i32, calls: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuport-nccl-stand-in-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let mut c = format!("int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}\n");
    for call in calls {
        c.push_str(&format!("int {call}(void) {{ return 5; }}\n"));
    }
    let source = dir.join(format!("{name}.c"));
    std::fs::write(&source, c).expect("writing the stand-in's source");
    let library = dir.join(format!("lib{name}.so"));
    let status = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("the C compiler (cc, or $CC) runs");
    assert!(status.success(), "compiling {}", source.display());
    library
}

fn text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn a_version_without_some_calls_lacks_those_features_alone_each_named_with_its_version() {
    let lib = text(&stand_in("nccl214", 21403, NCCL_2_14));
    let found = load(Flavour::Nccl, std::slice::from_ref(&lib)).expect("the stand-in loads");
    assert_eq!(found.version, Version::new(2, 14, 3));
    assert_eq!(found.library, lib);
    // What 2.14 has resolves, and is kept.
    let first = found.address(GET_VERSION).expect("ncclGetVersion");
    assert_eq!(found.address(GET_VERSION).expect("ncclGetVersion again"), first);
    let lacks = found.lacks();
    assert_eq!(lacks.len(), 2, "{lacks:?}");
    assert!(
        lacks[0].starts_with("split (ncclCommSplit, from NCCL 2.18.0; NCCL at ")
            && lacks[0].ends_with("is NCCL 2.14.3)"),
        "{lacks:?}"
    );
    assert!(lacks[1].starts_with("all_to_all (ncclAlltoAll, from NCCL 2.28.0;"), "{lacks:?}");
    let split = ENTRIES.iter().position(|e| e.nccl == "ncclCommSplit").expect("in the table");
    match found.address(split) {
        Err(Error::EngineUnsupported { engine: "NCCL", what }) => assert!(what.contains("2.18.0"), "{what}"),
        other => panic!("ncclCommSplit on 2.14: {other:?}"),
    }
}

#[test]
fn rccl_has_its_all_to_all_under_its_own_name() {
    let mut calls = NCCL_2_14.to_vec();
    calls.extend(["ncclCommSplit", "ncclAllToAll"]);
    let lib = text(&stand_in("rccl", 22707, &calls));
    let as_rccl = load(Flavour::Rccl, std::slice::from_ref(&lib)).expect("the stand-in loads");
    assert_eq!(as_rccl.lacks(), Vec::<String>::new());
    // Read as NCCL, the same library lacks NCCL's spelling.
    let as_nccl = load(Flavour::Nccl, std::slice::from_ref(&lib)).expect("the stand-in loads");
    let lacks = as_nccl.lacks();
    assert!(lacks.len() == 1 && lacks[0].starts_with("all_to_all (ncclAlltoAll"), "{lacks:?}");
}

#[test]
fn what_is_not_nccl_is_unavailable_with_every_attempt_named() {
    let bad_version = text(&stand_in("badversion", 5, &[]));
    let missing = std::env::temp_dir().join("gpuport-no-such-dir/libnccl.so.2");
    let tried = [text(&missing), "libc.so.6".to_owned(), bad_version.clone()];
    match load(Flavour::Nccl, &tried) {
        Err(Error::EngineUnavailable { engine: "NCCL", reason }) => {
            assert!(reason.contains(&text(&missing)), "{reason}");
            assert!(reason.contains("libc.so.6 (no ncclGetVersion: not an NCCL or RCCL library)"), "{reason}");
            assert!(reason.contains(&format!("{bad_version} (ncclGetVersion gave 5, no NCCL 2 version)")), "{reason}");
            assert!(reason.contains(NCCL_LIBRARY_ENV) && reason.contains("nvidia-nccl-cu13"), "{reason}");
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("libc loaded as NCCL"),
    }
    match load(Flavour::Rccl, &[]) {
        Err(Error::EngineUnavailable { engine: "RCCL", reason }) => {
            assert!(reason.contains(RCCL_LIBRARY_ENV), "{reason}")
        }
        other => panic!("no candidates: {:?}", other.map(|l| l.library)),
    }
}

#[test]
fn the_variable_alone_is_tried_when_set_and_the_wheel_is_found_in_the_environment() {
    let prefix = std::env::temp_dir().join(format!("gpuport-nccl-prefix-{}", std::process::id()));
    let wheel = prefix.join("lib/python3.12/site-packages/nvidia/nccl/lib");
    std::fs::create_dir_all(&wheel).expect("a fake environment");
    std::fs::write(wheel.join(NCCL_SONAME), b"").expect("a placeholder");
    let env = |set: &'static [(&'static str, &'static str)], prefix: PathBuf| {
        move |name: &str| match name {
            "VIRTUAL_ENV" => Some(prefix.clone().into_os_string()),
            _ => set.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v)),
        }
    };
    // A package folder named directly (what the Python module adds from `sys.path`).
    assert_eq!(wheel_libraries(&prefix.join("lib/python3.12/site-packages")), vec![text(&wheel.join(NCCL_SONAME))]);
    // Without the variable: the soname first, then the wheel's place in the environment.
    assert_eq!(
        candidates(Flavour::Nccl, env(&[], prefix.clone())),
        vec![NCCL_SONAME.to_owned(), text(&wheel.join(NCCL_SONAME))]
    );
    assert_eq!(candidates(Flavour::Nccl, env(&[], prefix.join("absent"))), vec![NCCL_SONAME.to_owned()]);
    // With it, that alone, for its engine only.
    let set: &'static [(&str, &str)] = &[(NCCL_LIBRARY_ENV, "/chosen/libnccl.so.2")];
    assert_eq!(candidates(Flavour::Nccl, env(set, prefix.clone())), vec!["/chosen/libnccl.so.2".to_owned()]);
    assert_eq!(candidates(Flavour::Rccl, env(set, prefix.clone()))[0], "librccl.so.1");
    let set: &'static [(&str, &str)] = &[(RCCL_LIBRARY_ENV, "/chosen/librccl.so.1")];
    assert_eq!(candidates(Flavour::Rccl, env(set, prefix.clone())), vec!["/chosen/librccl.so.1".to_owned()]);
    let _ = std::fs::remove_dir_all(&prefix);
}
