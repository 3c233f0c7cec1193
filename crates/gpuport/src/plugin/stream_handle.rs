//! A plugin's stream as the vendor kit holds it: the plugin's handle and, where the
//! plugin publishes them (`stream_progress`, ABI minor 2), the counters a query reads
//! instead of calling `stream_query`. A query is the one stream call a program makes in a
//! loop (polling), and the only one whose answer the plugin can keep in memory; reading
//! three words there costs what the query of a port linked in costs, where a call through
//! the table costs an extra call level on every poll.

use std::sync::atomic::{AtomicU32, AtomicU64};

use gpuport_core::{read_counters, BackendKind, Error, ProgressReading, Result};
use gpuport_driver::vendor::RawHandle;
use gpuport_plugin_abi as abi;

/// A stream of a loaded plugin: its raw handle, and its progress struct or null.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamHandle {
    raw: abi::Stream,
    /// The plugin's `gpuport_stream_progress`, checked by [`checked_progress`]; valid
    /// while the stream is (the plugin's promise); null where it publishes none.
    progress: *const abi::StreamProgress,
}

// SAFETY: the raw handle is an integer; the progress struct is the plugin's, read-only
// here, and its words are read with atomic loads — from any thread, as the header allows.
unsafe impl Send for StreamHandle {}
// SAFETY: as above.
unsafe impl Sync for StreamHandle {}

/// One stream, one handle: the progress pointer is what the plugin said of that stream.
impl PartialEq for StreamHandle {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl RawHandle for StreamHandle {
    fn to_raw(self) -> usize {
        self.raw
    }
    /// A raw value alone: no progress (a query calls the plugin).
    fn from_raw(raw: usize) -> Self {
        StreamHandle { raw, progress: std::ptr::null() }
    }
}

impl StreamHandle {
    /// A handle with the progress struct `progress` (null: none), already checked.
    pub(crate) fn new(raw: abi::Stream, progress: *const abi::StreamProgress) -> Self {
        StreamHandle { raw, progress }
    }

    /// The plugin's handle.
    #[inline]
    pub(crate) fn raw(self) -> abi::Stream {
        self.raw
    }

    /// What the plugin's counters say, without a call: `None` where it publishes none.
    #[inline]
    pub(crate) fn read_progress(self) -> Option<ProgressReading> {
        // SAFETY: null, or a struct `checked_progress` accepted, which the plugin keeps
        // valid and in place while the stream lives (the kit uses no handle of a
        // destroyed stream).
        let p = unsafe { self.progress.as_ref() }?;
        // SAFETY: checked non-null and aligned; the plugin keeps the words valid while
        // the stream lives and changes them only atomically (the header's contract).
        let (submitted, completed) =
            unsafe { (AtomicU64::from_ptr(p.submitted.cast_mut()), AtomicU64::from_ptr(p.completed.cast_mut())) };
        // SAFETY: as above (null or checked aligned).
        let publishing = (!p.publishing.is_null()).then(|| unsafe { AtomicU32::from_ptr(p.publishing.cast_mut()) });
        Some(read_counters(submitted, completed, publishing))
    }
}

/// The first version of `gpuport_stream_progress`: the struct size a plugin must declare.
const PROGRESS_V1: usize = std::mem::size_of::<abi::StreamProgress>();

/// Checks the progress struct a plugin handed over for a stream: its size, and each word
/// non-null (`publishing` may be) and aligned for its atomic type. `kind` and `call` (the
/// table call whose stream it is) name it in an error, formatted only then.
///
/// # Safety
/// `progress` is null or points at a readable `gpuport_stream_progress` of at least the
/// `struct_size` it declares (the plugin's promise).
pub(crate) unsafe fn checked_progress(
    progress: *const abi::StreamProgress,
    kind: BackendKind,
    call: &str,
) -> Result<*const abi::StreamProgress> {
    let fault = |what: String| Err(Error::invalid_argument(format!("{kind}: {call}: its stream_progress {what}")));
    // SAFETY: the caller's promise; the size is the first field, read before any other.
    let Some(size) = (unsafe { progress.as_ref() }).map(|p| p.struct_size) else {
        return fault("gave a NULL struct".into());
    };
    if size < PROGRESS_V1 {
        return fault(format!("struct declares {size} bytes, fewer than the {PROGRESS_V1} of its first version"));
    }
    // SAFETY: at least the whole first version is readable (checked just above).
    let p = unsafe { &*progress };
    for (name, word, align) in [
        ("submitted", p.submitted as usize, std::mem::align_of::<AtomicU64>()),
        ("completed", p.completed as usize, std::mem::align_of::<AtomicU64>()),
    ] {
        if word == 0 {
            return fault(format!("counter `{name}` is NULL"));
        }
        if !word.is_multiple_of(align) {
            return fault(format!("counter `{name}` is at {word:#x}, not {align}-byte aligned"));
        }
    }
    let publishing = p.publishing as usize;
    if !publishing.is_multiple_of(std::mem::align_of::<AtomicU32>()) {
        return fault(format!("word `publishing` is at {publishing:#x}, not 4-byte aligned"));
    }
    Ok(progress)
}
