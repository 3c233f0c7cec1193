//! The validation layer's output. Every misuse is one line, on stderr and appended to the
//! file named by `GPUPORT_DOUBLE_REPORT`:
//!
//! `gpuport-double[cuda] VIOLATION no-context: cuMemAlloc_v2(dptr=0x…, bytesize=64) on thread "main" (ThreadId(1)): …`
//!
//! A test harness fails a run whose report file is not empty.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::Call;

static VENDOR: OnceLock<&'static str> = OnceLock::new();
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Names the double in its reports (`cuda`, `hip`).
pub fn set_vendor(name: &'static str) {
    let _ = VENDOR.set(name);
}

/// Reports made so far in this process.
pub fn count() -> usize {
    COUNT.load(Ordering::SeqCst)
}

fn thread() -> String {
    let t = std::thread::current();
    format!("{:?} ({:?})", t.name().unwrap_or("unnamed"), t.id())
}

/// Writes one line to stderr and to the report file.
fn emit(line: &str) {
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(crate::config::REPORT_ENV).filter(|p| !p.is_empty()) {
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Reports a misuse by `call`: `kind` is a short tag (`no-context`, `hazard`, …).
pub fn violation(kind: &str, call: &Call<'_>, detail: impl AsRef<str>) {
    COUNT.fetch_add(1, Ordering::SeqCst);
    let vendor = VENDOR.get().copied().unwrap_or("double");
    emit(&format!(
        "gpuport-double[{vendor}] VIOLATION {kind}: {} on thread {}: {}",
        call.describe(),
        thread(),
        detail.as_ref()
    ));
}

/// Reports a misuse found outside any call (at exit, on a stream thread).
pub fn violation_outside_call(kind: &str, detail: impl AsRef<str>) {
    COUNT.fetch_add(1, Ordering::SeqCst);
    let vendor = VENDOR.get().copied().unwrap_or("double");
    emit(&format!("gpuport-double[{vendor}] VIOLATION {kind}: {}", detail.as_ref()));
}
