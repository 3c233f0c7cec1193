//! Compiles `examples/c-plugin/c_plugin.c` into shared libraries with the system C
//! compiler (`$CC`, else `cc`): the plugin, and each broken variant (one `BROKEN_*` macro,
//! and a backend name of its own so a process can load them all).

use std::path::PathBuf;
use std::process::Command;

/// (library suffix and backend name suffix, macro); the empty one is the correct plugin.
/// `BROKEN_*` variants fail the conformance suite; `BREACH_*` ones break a rule the loader
/// checks itself.
const VARIANTS: [(&str, &str); 15] = [
    ("", ""),
    ("noop-wait", "BROKEN_NOOP_WAIT"),
    ("query-always-done", "BROKEN_QUERY_ALWAYS_DONE"),
    ("fake-elapsed", "BROKEN_FAKE_ELAPSED"),
    ("no-implicit-sync", "BROKEN_NO_IMPLICIT_SYNC"),
    ("event-before-count", "BROKEN_EVENT_BEFORE_COUNT"),
    ("progress-wrong-counter", "BROKEN_PROGRESS_WRONG_COUNTER"),
    ("host-func-twice", "BREACH_HOST_FUNC_TWICE"),
    ("host-func-null-user", "BREACH_HOST_FUNC_NULL_USER"),
    ("progress-past-submitted", "BREACH_PROGRESS_PAST_SUBMITTED"),
    ("initialize-blocks", "BREACH_INITIALIZE_BLOCKS"),
    ("device-count", "BREACH_DEVICE_COUNT"),
    ("same-address", "BREACH_SAME_ADDRESS"),
    ("misaligned", "BREACH_MISALIGNED"),
    ("device-type-cpu", "BREACH_DEVICE_TYPE_CPU"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest.join("../../..");
    let source = root.join("examples/c-plugin/c_plugin.c");
    let include = root.join("crates/plugin-abi/include");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    for (suffix, define) in VARIANTS {
        let (file, name) = match suffix {
            "" => ("libgpuport_c_plugin.so".to_owned(), "cplugin".to_owned()),
            s => (format!("libgpuport_c_plugin-{s}.so"), format!("cplugin-{s}")),
        };
        let mut cmd = Command::new(&cc);
        cmd.args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC", "-shared", "-I"])
            .arg(&include)
            .arg(format!("-DPLUGIN_NAME=\"{name}\""));
        if !define.is_empty() {
            cmd.arg(format!("-D{define}"));
        }
        cmd.arg(&source).arg("-o").arg(out.join(&file)).arg("-lpthread");
        let status = cmd.status().unwrap_or_else(|e| panic!("the C compiler `{cc}` did not start: {e}"));
        assert!(status.success(), "compiling {file} failed: {cmd:?}");
    }
    println!("cargo:rustc-env=C_PLUGIN_DIR={}", out.display());
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed={}", include.join("gpuport_plugin.h").display());
    println!("cargo:rerun-if-env-changed=CC");
}
