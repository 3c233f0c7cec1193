//! The loader against tables made in this process: a Rust backend behind the C function
//! table (the ext device, through `gpuport-plugin-export`), and that table spoiled one way at a
//! time. Runs under Miri too: the Rust side of the ABI, both directions.

use std::ffi::c_char;

use gpuport_core::{Backend, Copy2d, DefaultStream, Device, Error, Event, EventFlags, Stream, StreamFlags};
use gpuport_ext::ExtBackend;
use gpuport_plugin_abi as abi;

use super::table::Table;
use super::{backend_of, LoadedBackend};

/// The backend of a table made in this process: validated, initialised.
///
/// # Safety
/// `api` is null or a table whose strings and functions stay valid for the test.
unsafe fn backend_of_table(
    api: *const abi::PluginApi,
    name_taken: impl Fn(&str) -> bool,
) -> Result<LoadedBackend, Error> {
    // SAFETY: forwarded.
    backend_of(unsafe { Table::validate(api, name_taken) }?)
}

/// A correct table: the ext device, exported under `name`.
fn good(name: &'static str) -> abi::PluginApi {
    // SAFETY: the entry returns its static table (non-null: the ext backend loads).
    let mut api =
        unsafe { *gpuport_plugin_export::entry::<ExtBackend>(Some("extabi"), gpuport_plugin_export::no_init) };
    // One export per backend type: each test's copy gets a name of its own.
    let name = std::ffi::CString::new(name).unwrap();
    api.name = Box::leak(name.into_boxed_c_str()).as_ptr();
    api
}

/// What loading `api` says.
fn load(api: &abi::PluginApi) -> Result<LoadedBackend, Error> {
    // SAFETY: `api` lives for the test; its functions are the ext plugin's, which stays in
    // this process.
    unsafe { backend_of_table(api, |_| false) }
}

fn refused(api: &abi::PluginApi, needle: &str) {
    match load(api) {
        Ok(_) => panic!("a table that should be refused ({needle}) was loaded"),
        Err(e) => assert!(e.to_string().contains(needle), "{e}\n(expected it to say {needle:?})"),
    }
}

/// Every loaded library's handles share one type: a handle of one library given to
/// another's is refused by kind before either table is called.
#[test]
fn one_librarys_handles_never_reach_another_librarys_table() {
    let (one, other) = (load(&good("kindone")).unwrap(), load(&good("kindtwo")).unwrap());
    let (dev, foreign) = (one.open(0).unwrap(), other.open(0).unwrap());
    assert_eq!(dev.dlpack_devices(), one.dlpack_devices());
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let theirs = foreign.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let mine = dev.create_event(EventFlags::empty()).unwrap();
    let ev = foreign.create_event(EventFlags::empty()).unwrap();
    let mismatch = |r: Result<(), Error>, op: &str| match r {
        Err(Error::BackendMismatch { operation, expected, found }) => {
            assert_eq!(operation, op);
            assert_eq!(expected, "kindone");
            assert!(found.starts_with("kindtwo"), "{found}");
        }
        other => panic!("{op} across libraries: {other:?}"),
    };
    mismatch(s.record(&ev), "record");
    mismatch(s.wait(&ev), "wait");
    s.record(&mine).unwrap();
    mismatch(mine.elapsed_ms(&ev).map(drop), "elapsed_ms");
    mismatch(dev.alloc_async(64, &theirs).map(drop), "alloc_async");
    mismatch(dev.enable_peer_access(&foreign), "enable_peer_access");
    assert!(!dev.can_access_peer(&foreign).unwrap(), "another library's device is never a peer");
    // The same calls within one library go through.
    let peer = one.open(1).unwrap();
    dev.can_access_peer(&peer).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn a_rust_backend_behind_the_c_table_runs_streams_events_and_copies() {
    let backend = load(&good("extabi")).unwrap();
    assert_eq!(backend.kind().name(), "extabi");
    let devices = backend.devices().unwrap();
    assert_eq!(devices.len(), 2);
    assert!(devices.iter().enumerate().all(|(i, d)| d.id.ordinal as usize == i && !d.name.is_empty()));
    let dev = backend.open(0).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let (a, b) = (dev.alloc(4099).unwrap(), dev.alloc(4099).unwrap());
    let data: Vec<u8> = (0..4099u32).map(|i| (i * 7) as u8).collect();
    s.write(&data, &a, 0).unwrap();
    s.memset(&b, 0, 4099, 9).unwrap();
    s.copy(&a, 1, &b, 2, 4000).unwrap();
    let ev = dev.create_event(EventFlags::empty()).unwrap();
    s.record(&ev).unwrap();
    ev.synchronize().unwrap();
    assert!(ev.query().unwrap());
    let mut out = vec![0u8; 4099];
    s.read(&b, 0, &mut out).unwrap();
    assert_eq!(&out[..2], &[9, 9]);
    assert_eq!(&out[2..4002], &data[1..4001]);
    assert_eq!(&out[4002..], &[9; 97]);
    let attrs = dev.pointer_attributes(a.addr() + 5).unwrap();
    assert_eq!(attrs.device, Some(dev.id()));
    // The legacy default stream, a callback, and a device-wide synchronize.
    let legacy = dev.default_stream(DefaultStream::Legacy).unwrap();
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    legacy.host_callback(Box::new(move || flag.store(true, std::sync::atomic::Ordering::SeqCst))).unwrap();
    dev.synchronize().unwrap();
    assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
    // What the exported backend lacks is Unsupported, as the loader reports it.
    assert!(matches!(dev.default_stream(DefaultStream::PerThread), Err(Error::Unsupported { .. })));
    // A plugin's error crosses as gpuport's: a copy past the end (checked before the
    // call), and a memset of memory it does not know (checked by the plugin).
    assert!(matches!(s.copy(&a, 4000, &b, 0, 100), Err(Error::InvalidArgument { .. })));
    // A 2D copy crosses as one call of the table (`memcpy_2d_async`).
    let rows = Copy2d { src_offset: 3, src_pitch: 100, dst_offset: 10, dst_pitch: 50, width: 20, height: 3 };
    s.copy_2d(&a, &b, &rows).unwrap();
    s.read(&b, 0, &mut out).unwrap();
    for row in 0..3 {
        let (from, to) = rows.row_offsets(row);
        assert_eq!(&out[to..to + 20], &data[from..from + 20], "row {row}");
    }
    assert_eq!(&out[30..60], &data[29..59], "between the rows: the earlier copy's bytes");
}

#[test]
fn no_table_is_refused() {
    // SAFETY: a null table is what the check is for.
    let e = unsafe { backend_of_table(std::ptr::null(), |_| false) }.err().unwrap();
    assert!(e.to_string().contains("no table"), "{e}");
}

#[test]
fn another_major_version_is_refused_naming_both() {
    let mut api = good("extmajor");
    api.abi_major = abi::ABI_MAJOR + 1;
    refused(&api, &format!("ABI {}.{}; this gpuport speaks {}.", abi::ABI_MAJOR + 1, api.abi_minor, abi::ABI_MAJOR));
}

#[test]
fn a_table_shorter_than_every_version_is_refused() {
    let mut api = good("extshort");
    api.struct_size = 8;
    refused(&api, "fewer than");
}

#[test]
fn nothing_past_the_declared_size_is_read() {
    // Declared up to, not including, `launch_kernel`: the loader must see it absent (the
    // module group incomplete), though this copy of the table has it.
    let mut api = good("extcut");
    api.struct_size = std::mem::offset_of!(abi::PluginApi, launch_kernel);
    refused(&api, "all or none");
}

/// Set by [`no_2d_copy`]: a table's 2D copy past its declared size was called.
static CALLED_PAST_SIZE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A 2D copy that copies nothing, and says it was called.
unsafe extern "C" fn no_2d_copy(
    _device: *mut abi::Device,
    _dst: u64,
    _dst_pitch: u64,
    _src: u64,
    _src_pitch: u64,
    _width: u64,
    _height: u64,
    _stream: abi::Stream,
) -> abi::Status {
    CALLED_PAST_SIZE.store(true, std::sync::atomic::Ordering::SeqCst);
    std::ptr::null_mut()
}

#[test]
fn a_minor_0_table_gets_2d_copies_row_by_row() {
    // A plugin built before the 2D copy was appended declares the size without it; what
    // lies past that is never called, and each row becomes a `memcpy_async`.
    let mut api = good("extminor0");
    api.abi_minor = 0;
    api.struct_size = std::mem::offset_of!(abi::PluginApi, memcpy_2d_async);
    api.memcpy_2d_async = Some(no_2d_copy);
    let dev = load(&api).unwrap().open(0).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let (a, b) = (dev.alloc(256).unwrap(), dev.alloc(256).unwrap());
    let data: Vec<u8> = (0..=255u8).collect();
    s.write(&data, &a, 0).unwrap();
    s.memset(&b, 0, 256, 0).unwrap();
    let copy = Copy2d { src_offset: 1, src_pitch: 16, dst_offset: 0, dst_pitch: 5, width: 3, height: 10 };
    s.copy_2d(&a, &b, &copy).unwrap();
    let mut out = vec![0u8; 256];
    s.read(&b, 0, &mut out).unwrap();
    assert!(
        !CALLED_PAST_SIZE.load(std::sync::atomic::Ordering::SeqCst),
        "a function past the declared size was called"
    );
    for row in 0..10 {
        let (from, to) = (1 + row * 16, row * 5);
        assert_eq!(&out[to..to + 3], &data[from..from + 3], "row {row}");
        assert_eq!(&out[to + 3..to + 5], &[0, 0], "the gap after row {row}");
    }
}

#[test]
fn a_missing_function_is_named() {
    let mut api = good("extmissing");
    api.device_open = None;
    api.memcpy_async = None;
    refused(&api, "lacks device_open, memcpy_async");
    let mut api = good("extpair");
    api.mem_free_async = None;
    refused(&api, "both or none");
}

#[test]
fn bad_names_and_versions_are_refused() {
    let mut api = good("extnames");
    api.name = std::ptr::null();
    refused(&api, "names no backend");
    api.name = c"cuda".as_ptr();
    refused(&api, "exists already");
    api.name = c"Not A Name".as_ptr();
    refused(&api, "lower-case");
    api.name = c"extnames".as_ptr();
    api.version = std::ptr::null();
    refused(&api, "no version");
    let taken = good("exttaken");
    // SAFETY: as in `load`.
    let e = unsafe { backend_of_table(&taken, |n| n == "exttaken") }.err().unwrap();
    assert!(e.to_string().contains("exists already"), "{e}");
}

#[test]
fn unknown_dlpack_types_are_refused() {
    let mut api = good("extdl");
    api.dlpack_device = 999;
    refused(&api, "999");
    let mut api = good("extdl2");
    api.dlpack_managed = 77;
    refused(&api, "77");
}

/// A plugin whose `initialize` fails, with its own error object. Its `extern "C"`
/// functions only return constants: nothing in them can panic, so none needs
/// `catch_unwind`.
struct FailingError;
static FAILING: FailingError = FailingError;

unsafe extern "C" fn failing_initialize() -> abi::Status {
    (&raw const FAILING).cast_mut().cast()
}
unsafe extern "C" fn failing_kind(_: *const abi::Error) -> i32 {
    abi::error_kind::NO_DEVICE
}
unsafe extern "C" fn failing_message(_: *const abi::Error) -> *const c_char {
    c"the accelerator is switched off".as_ptr()
}
unsafe extern "C" fn failing_destroy(_: *mut abi::Error) {}

#[test]
fn a_failing_initialize_is_the_reason_given() {
    let mut api = good("extinit");
    api.initialize = Some(failing_initialize);
    api.error_kind = Some(failing_kind);
    api.error_message = Some(failing_message);
    api.error_destroy = Some(failing_destroy);
    match load(&api) {
        Err(Error::NoDevice { detail, .. }) => assert!(detail.contains("switched off"), "{detail}"),
        other => panic!("expected NoDevice with the plugin's words, got {:?}", other.err()),
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri runs no foreign code: nothing is loaded from a path")]
fn libraries_that_are_not_plugins_are_errors_not_crashes() {
    match LoadedBackend::load_library(std::path::Path::new("/nonexistent/libnothing.so"), |_| false) {
        Err(Error::BackendUnavailable { name, reason }) => {
            assert!(name.contains("libnothing") && reason.contains("cannot be loaded"), "{reason}")
        }
        other => panic!("expected BackendUnavailable, got {:?}", other.err()),
    }
    match LoadedBackend::load_library(std::path::Path::new("libm.so.6"), |_| false) {
        Err(Error::BackendUnavailable { reason, .. }) => assert!(reason.contains("gpuport_plugin_entry"), "{reason}"),
        other => panic!("expected BackendUnavailable, got {:?}", other.err()),
    }
}

/// A `stream_query` that counts its calls in `$count` and forwards to the exported ext
/// backend's own.
macro_rules! counting_query {
    ($name:ident, $count:ident) => {
        static $count: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        unsafe extern "C" fn $name(d: *mut abi::Device, s: abi::Stream, done: *mut bool) -> abi::Status {
            $count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let query = good("extquery").stream_query.expect("the exported table has stream_query");
            // SAFETY: forwarded as the loader called it.
            unsafe { query(d, s, done) }
        }
    };
}

/// Queries a stream while a host callback holds it and after it ran: what the answers
/// are must not depend on whether they were read or asked.
fn held_and_released_queries(api: &abi::PluginApi) {
    let dev = load(api).unwrap().open(0).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    assert!(s.query().unwrap(), "a new stream is done");
    let (release, held) = std::sync::mpsc::channel::<()>();
    s.host_callback(Box::new(move || held.recv().unwrap())).unwrap();
    assert!(!s.query().unwrap(), "a stream held by its callback is not done");
    release.send(()).unwrap();
    s.synchronize().unwrap();
    assert!(s.query().unwrap(), "a synchronized stream is done");
    let legacy = dev.default_stream(DefaultStream::Legacy).unwrap();
    assert!(legacy.query().unwrap());
}

counting_query!(query_counted_with_progress, QUERIES_WITH_PROGRESS);

#[test]
fn queries_read_the_published_counters_without_calling_the_plugin() {
    let mut api = good("extprogress");
    api.stream_query = Some(query_counted_with_progress);
    held_and_released_queries(&api);
    assert_eq!(QUERIES_WITH_PROGRESS.load(std::sync::atomic::Ordering::SeqCst), 0, "stream_query was called");
}

counting_query!(query_counted_minor_1, QUERIES_MINOR_1);

#[test]
fn a_minor_1_table_queries_by_call() {
    // Built before `stream_progress` was appended: every query is a `stream_query`.
    let mut api = good("extminor1");
    api.abi_minor = 1;
    api.struct_size = std::mem::offset_of!(abi::PluginApi, stream_progress);
    api.stream_query = Some(query_counted_minor_1);
    held_and_released_queries(&api);
    assert!(QUERIES_MINOR_1.load(std::sync::atomic::Ordering::SeqCst) >= 4, "stream_query was not called");
}

/// A progress struct in a static (its raw pointers never change).
struct StaticProgress(abi::StreamProgress);
// SAFETY: read-only, pointing at a static atomic word or at nothing.
unsafe impl Sync for StaticProgress {}

static WORD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const WORD_AT: *const u64 = (&raw const WORD).cast::<u64>();
const SIZE: usize = std::mem::size_of::<abi::StreamProgress>();

static SHORT: StaticProgress = StaticProgress(abi::StreamProgress {
    struct_size: 16,
    submitted: WORD_AT,
    completed: WORD_AT,
    publishing: std::ptr::null(),
});
static NO_SUBMITTED: StaticProgress = StaticProgress(abi::StreamProgress {
    struct_size: SIZE,
    submitted: std::ptr::null(),
    completed: WORD_AT,
    publishing: std::ptr::null(),
});
static MISALIGNED: StaticProgress = StaticProgress(abi::StreamProgress {
    struct_size: SIZE,
    submitted: WORD_AT,
    completed: WORD_AT.cast::<u8>().wrapping_add(1).cast::<u64>(),
    publishing: std::ptr::null(),
});

/// Counters that always read "everything queued has completed", with no `publishing`
/// word (the header allows a plugin that never needs one to leave it NULL).
static DONE_NO_FLAG: StaticProgress = StaticProgress(abi::StreamProgress {
    struct_size: SIZE,
    submitted: WORD_AT,
    completed: WORD_AT,
    publishing: std::ptr::null(),
});

/// A `stream_progress` handing out `$progress` (null: a NULL struct) for every stream.
macro_rules! progress_of {
    ($name:ident, $progress:expr) => {
        unsafe extern "C" fn $name(
            _d: *mut abi::Device,
            _s: abi::Stream,
            out: *mut *const abi::StreamProgress,
        ) -> abi::Status {
            // SAFETY: the loader's out-pointer.
            unsafe { out.write($progress) };
            std::ptr::null_mut()
        }
    };
}

progress_of!(null_progress, std::ptr::null());
progress_of!(short_progress, &SHORT.0);
progress_of!(no_submitted_progress, &NO_SUBMITTED.0);
progress_of!(misaligned_progress, &MISALIGNED.0);
progress_of!(done_no_flag_progress, &DONE_NO_FLAG.0);

counting_query!(query_counted_no_flag, QUERIES_NO_FLAG);

#[test]
fn counters_without_a_publishing_word_answer_without_a_call() {
    let mut api = good("extnoflag");
    api.stream_progress = Some(done_no_flag_progress);
    api.stream_query = Some(query_counted_no_flag);
    let dev = load(&api).unwrap().open(0).unwrap();
    let s = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    assert!(s.query().unwrap(), "counters that read done, and no word to say otherwise");
    assert!(dev.default_stream(DefaultStream::Legacy).unwrap().query().unwrap());
    assert_eq!(QUERIES_NO_FLAG.load(std::sync::atomic::Ordering::SeqCst), 0, "stream_query was called");
}

#[test]
fn malformed_progress_is_refused_naming_the_fault() {
    type ProgressFn =
        unsafe extern "C" fn(*mut abi::Device, abi::Stream, *mut *const abi::StreamProgress) -> abi::Status;
    let cases: [(&'static str, ProgressFn, &str); 4] = [
        ("extprognull", null_progress, "gave a NULL struct"),
        ("extprogshort", short_progress, "declares 16 bytes, fewer than the 32"),
        ("extprognosub", no_submitted_progress, "counter `submitted` is NULL"),
        ("extprogalign", misaligned_progress, "counter `completed` is at 0x"),
    ];
    for (name, progress, needle) in cases {
        let mut api = good(name);
        api.stream_progress = Some(progress);
        // The legacy stream's progress is asked for when the device opens.
        match load(&api).unwrap().open(0) {
            Ok(_) => panic!("{name}: a device whose stream progress is malformed opened"),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(needle) && text.contains("legacy_stream"), "{name}: {text}");
            }
        }
    }
}
