//! The breaches of its contract the loader checks for itself, each in a variant of the C
//! plugin built with one `BREACH_*` macro: every one is refused or reported as
//! `Error::BrokenContract` (or makes the plugin unavailable) naming the plugin, and none
//! makes gpuport touch memory it should not (the Python and AddressSanitizer runs of the
//! same variants check that too).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gpuport::{AnyDevice, Error, Runtime, StreamFlags, MAX_PLUGIN_DEVICES};
use gpuport_c_plugin_test::library;

/// Device 0 of the variant (loaded here; a variant is loaded once per process).
fn device(variant: &str) -> AnyDevice {
    Runtime::load_plugin(library(Some(variant))).unwrap_or_else(|e| panic!("cplugin-{variant} loads: {e}"));
    Runtime::discover().device(&format!("cplugin-{variant}:0")).unwrap()
}

/// The refusal of loading the variant, as text.
fn load_refused(variant: &str) -> String {
    match Runtime::load_plugin(library(Some(variant))) {
        Ok(()) => panic!("cplugin-{variant} loaded"),
        Err(e) => e.to_string(),
    }
}

fn broken(err: &Error, words: &str) {
    match err {
        Error::BrokenContract { backend, what } => {
            assert!(backend.name().starts_with("cplugin-"), "{err}");
            assert!(what.contains(words), "{err}");
        }
        other => panic!("not a broken contract: {other:#?}"),
    }
}

/// Queues a host callback counting its runs, and synchronizes.
fn counted_callback(dev: &AnyDevice) -> (Arc<AtomicUsize>, gpuport::Result<()>, gpuport::AnyStream) {
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    stream
        .host_callback(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    let synced = stream.synchronize();
    (runs, synced, stream)
}

#[test]
fn a_host_function_run_twice_runs_once_and_is_reported() {
    let dev = device("host-func-twice");
    let (runs, synced, stream) = counted_callback(&dev);
    broken(&synced.unwrap_err(), "a second time");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the second run ran the callback again");
    // Reported once: the stream goes on.
    stream.synchronize().unwrap();
}

#[test]
fn a_host_function_run_with_a_null_user_pointer_is_reported() {
    let dev = device("host-func-null-user");
    let (runs, synced, _stream) = counted_callback(&dev);
    broken(&synced.unwrap_err(), "NULL user pointer");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[test]
fn progress_counted_past_submitted_is_reported() {
    let dev = device("progress-past-submitted");
    let stream = dev.create_stream(StreamFlags::NON_BLOCKING, 0).unwrap();
    let buffer = dev.alloc(1024).unwrap();
    stream.memset(&buffer, 0, 1024, 7).unwrap();
    // The plugin's own synchronize waits for its counter to reach the operation's; the
    // query reads the counters and sees `completed` past `submitted`.
    stream.synchronize().unwrap();
    broken(&stream.query().unwrap_err(), "went backwards");
}

#[test]
fn an_address_handed_out_twice_is_refused_and_the_first_array_keeps_it() {
    let dev = device("same-address");
    let first = dev.alloc(4096).unwrap();
    let err = dev.alloc(4096).unwrap_err();
    broken(&err, "overlaps its live allocation");
    // The first allocation is untouched: it still holds what is written to it.
    let stream = dev.default_stream(gpuport::DefaultStream::Legacy).unwrap();
    stream.memset(&first, 0, 4096, 0x5a).unwrap();
    let mut back = vec![0u8; 4096];
    stream.read(&first, 0, &mut back).unwrap();
    stream.synchronize().unwrap();
    assert!(back.iter().all(|&b| b == 0x5a));
}

#[test]
fn a_misaligned_address_is_refused_and_given_back() {
    let dev = device("misaligned");
    broken(&dev.alloc(4096).unwrap_err(), "not 256-byte aligned");
    // Given back: the device's memory is all free again.
    let info = dev.info().unwrap();
    assert!(dev.alloc(info.total_memory as usize).is_err_and(|e| matches!(e, Error::BrokenContract { .. })));
}

#[test]
fn a_device_count_past_the_ceiling_makes_the_plugin_unavailable() {
    let reason = load_refused("device-count");
    assert!(reason.contains(&format!("more than the {MAX_PLUGIN_DEVICES}")), "{reason}");
}

#[test]
fn device_memory_declared_as_cpu_memory_makes_the_plugin_unavailable() {
    let reason = load_refused("device-type-cpu");
    assert!(reason.contains("kDLCPU"), "{reason}");
}

#[test]
fn a_library_path_that_is_not_a_regular_file_is_refused_before_it_is_opened() {
    let dir = std::env::temp_dir().join(format!("gpuport-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("plugin.so");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    // Opening a FIFO would block until a writer came: refused before.
    let reason = Runtime::load_plugin(&fifo).unwrap_err().to_string();
    assert!(reason.contains("not a regular file (a FIFO)"), "{reason}");
    let reason = Runtime::load_plugin(&dir).unwrap_err().to_string();
    assert!(reason.contains("not a regular file (a directory)"), "{reason}");
    std::fs::remove_dir_all(&dir).unwrap();
}
