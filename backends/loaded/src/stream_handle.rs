//! A plugin's stream as the vendor kit holds it: the plugin's handle and, where the
//! plugin publishes them (`stream_progress`, ABI minor 2), the counters a query reads
//! instead of calling `stream_query`. A query is the one stream call a program makes in a
//! loop (polling), and the only one whose answer the plugin can keep in memory; reading
//! three words there costs what the query of a port linked in costs, where a call through
//! the table costs an extra call level on every poll.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use gpuport_core::{BackendKind, Error, ProgressReading, Result};
use gpuport_plugin_abi as abi;
use gpuport_vendor_kit::RawHandle;

/// A stream of a loaded plugin: its raw handle, and where its plugin publishes its
/// progress ([`ProgressWords::none`] where it publishes none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamHandle {
    raw: abi::Stream,
    progress: ProgressWords,
}

/// The addresses of a stream's progress words, copied out of the plugin's
/// `gpuport_stream_progress` by [`checked_progress`] (the only way to make one), which
/// checked them: each non-null and aligned for its atomic type (a `publishing` the plugin
/// left null is a word of gpuport's that stays zero), or [`ProgressWords::none`].
///
/// Kept in the handle rather than the struct's address — the header keeps the struct and
/// its words in place while the stream lives, so the copy stays true — so that a query
/// loads a word's address from the handle and then the word: one dependent load fewer
/// than through the struct, which was most of what a query through the boundary cost
/// beyond the query of a port linked in. Every word is always there, so a query reads
/// three words with no test of whether each exists.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProgressWords {
    submitted: NonNull<u64>,
    completed: NonNull<u64>,
    publishing: NonNull<u32>,
}

/// The `publishing` word of a plugin that never needs one: never raised.
static NEVER_PUBLISHING: AtomicU32 = AtomicU32::new(0);
/// The words of a stream whose plugin publishes none: nothing submitted, nothing
/// completed, and always publishing — a reading that always says "ask the plugin".
static NO_COUNT: AtomicU64 = AtomicU64::new(0);
static ALWAYS_PUBLISHING: AtomicU32 = AtomicU32::new(1);

impl ProgressWords {
    /// The words of a stream whose plugin publishes none: every query calls the plugin.
    pub(crate) fn none() -> Self {
        let count = NonNull::from(&NO_COUNT).cast::<u64>();
        ProgressWords { submitted: count, completed: count, publishing: NonNull::from(&ALWAYS_PUBLISHING).cast() }
    }
}

// SAFETY: the words are the plugin's (or the statics above), only ever read here, with
// atomic loads — from any thread, as the header allows.
unsafe impl Send for ProgressWords {}
// SAFETY: as above.
unsafe impl Sync for ProgressWords {}

/// One stream, one handle: the progress words are what the plugin said of that stream.
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
        StreamHandle { raw, progress: ProgressWords::none() }
    }
}

impl StreamHandle {
    /// A handle whose queries read `progress` (none: they call the plugin).
    pub(crate) fn new(raw: abi::Stream, progress: Option<ProgressWords>) -> Self {
        StreamHandle { raw, progress: progress.unwrap_or_else(ProgressWords::none) }
    }

    /// The plugin's handle.
    #[inline]
    pub(crate) fn raw(self) -> abi::Stream {
        self.raw
    }

    /// What the plugin's counters say, without a call: always `Publishing` (ask the
    /// plugin) where it publishes none. `Err((completed, submitted))` when they break the
    /// protocol: `completed` read before `submitted` is never more than it unless a
    /// counter went backwards (or `completed` ran past `submitted`). Seen only on a done
    /// reading, where it costs one more load, and only when `completed` moved past the
    /// first `submitted` read.
    #[inline]
    pub(crate) fn read_progress(self) -> Result<ProgressReading, (u64, u64)> {
        let words = self.progress;
        // SAFETY: words `checked_progress` accepted (non-null and aligned), which the
        // plugin keeps valid and in place while the stream lives (the kit uses no handle
        // of a destroyed stream) and changes only atomically (the header's contract), or
        // the statics above.
        let (submitted, completed, publishing) = unsafe {
            (
                AtomicU64::from_ptr(words.submitted.as_ptr()),
                AtomicU64::from_ptr(words.completed.as_ptr()),
                AtomicU32::from_ptr(words.publishing.as_ptr()),
            )
        };
        // The protocol's order (`gpuport_core::read_counters`): submitted, completed, then
        // publishing.
        let first = submitted.load(Ordering::SeqCst);
        let done = completed.load(Ordering::SeqCst);
        if done < first {
            return Ok(ProgressReading::Pending);
        }
        if done != first {
            let again = submitted.load(Ordering::SeqCst);
            if done > again {
                return Err((done, again));
            }
        }
        Ok(match publishing.load(Ordering::SeqCst) {
            0 => ProgressReading::Done,
            _ => ProgressReading::Publishing,
        })
    }
}

/// The first version of `gpuport_stream_progress`: the struct size a plugin must declare.
const PROGRESS_V1: usize = std::mem::size_of::<abi::StreamProgress>();

/// Checks the progress struct a plugin handed over for a stream — its size, and each word
/// non-null (`publishing` may be) and aligned for its atomic type — and copies the words'
/// addresses out of it. `kind` and `call` (the table call whose stream it is) name it in
/// an error, formatted only then.
///
/// # Safety
/// `progress` is null or points at a readable `gpuport_stream_progress` of at least the
/// `struct_size` it declares (the plugin's promise).
pub(crate) unsafe fn checked_progress(
    progress: *const abi::StreamProgress,
    kind: BackendKind,
    call: &str,
) -> Result<ProgressWords> {
    let fault = |what: String| Error::invalid_argument(format!("{kind}: {call}: its stream_progress {what}"));
    // SAFETY: the caller's promise; the size is the first field, read before any other.
    let Some(size) = (unsafe { progress.as_ref() }).map(|p| p.struct_size) else {
        return Err(fault("gave a NULL struct".into()));
    };
    if size < PROGRESS_V1 {
        return Err(fault(format!("struct declares {size} bytes, fewer than the {PROGRESS_V1} of its first version")));
    }
    // SAFETY: at least the whole first version is readable (checked just above).
    let p = unsafe { &*progress };
    let counter = |name: &str, word: *const u64| {
        let word = NonNull::new(word.cast_mut()).ok_or_else(|| fault(format!("counter `{name}` is NULL")))?;
        let (at, align) = (word.as_ptr().addr(), std::mem::align_of::<AtomicU64>());
        if !at.is_multiple_of(align) {
            return Err(fault(format!("counter `{name}` is at {at:#x}, not {align}-byte aligned")));
        }
        Ok(word)
    };
    let (submitted, completed) = (counter("submitted", p.submitted)?, counter("completed", p.completed)?);
    let publishing = p.publishing.addr();
    if !publishing.is_multiple_of(std::mem::align_of::<AtomicU32>()) {
        return Err(fault(format!("word `publishing` is at {publishing:#x}, not 4-byte aligned")));
    }
    let publishing = NonNull::new(p.publishing.cast_mut()).unwrap_or(NonNull::from(&NEVER_PUBLISHING).cast());
    Ok(ProgressWords { submitted, completed, publishing })
}
