//! A driver that runs gpuport's host function with a NULL user pointer is at fault, and
//! gpuport says so in its log (nothing runs; the process goes on).

use std::sync::Mutex;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Keeps every record logged at error level.
struct Kept(Mutex<Vec<String>>);

impl Log for Kept {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= Level::Error
    }
    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            self.0.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

static KEPT: Kept = Kept(Mutex::new(Vec::new()));

#[test]
fn a_null_user_pointer_runs_nothing_and_is_logged_as_the_drivers_fault() {
    log::set_logger(&KEPT).unwrap();
    log::set_max_level(LevelFilter::Error);
    // SAFETY: NULL is a `user` the contract allows (a faulty driver's).
    unsafe { gpuport_vendor_kit::run_host_callback(std::ptr::null_mut()) };
    let kept = KEPT.0.lock().unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].contains("NULL user pointer"), "{}", kept[0]);
}
