//! How a vendor status becomes words and errors: the "no device" reason names the status
//! once when the runtime describes it by its name alone, and an allocation refused as
//! invalid is out-of-memory only past the largest size Rust can allocate.

use gpuport_core::{BackendKind, DeviceId, Error};
use gpuport_vendor_kit::status::{check_alloc, fallback_names, no_device_detail, StatusNames, INVALID_VALUE};

/// A runtime that describes status 100 with a message, 101 by its name alone, 102 with an
/// empty message, and nothing else.
struct Described;

impl StatusNames for Described {
    const BACKEND: BackendKind = BackendKind::Plugin("described");
    fn describe(&self, status: u32) -> (String, String) {
        match status {
            100 => ("errorNoDevice".into(), "no capable device is detected".into()),
            101 => ("errorNoDevice".into(), "errorNoDevice".into()),
            102 => ("errorNoDevice".into(), String::new()),
            other => fallback_names(other, None, None, "status"),
        }
    }
}

#[test]
fn a_no_device_reason_names_the_status_once() {
    assert_eq!(
        no_device_detail(&Described, 100, "runtime 7.2"),
        "errorNoDevice: no capable device is detected; runtime 7.2"
    );
    assert_eq!(no_device_detail(&Described, 101, "runtime 5.2"), "errorNoDevice; runtime 5.2");
    assert_eq!(no_device_detail(&Described, 102, "runtime 6.4"), "errorNoDevice; runtime 6.4");
    assert_eq!(no_device_detail(&Described, 7, "runtime 6.4"), "status(7): unknown error; runtime 6.4");
}

#[test]
fn an_unnamed_status_gets_words_of_its_own() {
    assert_eq!(fallback_names(42, None, None, "CUresult"), ("CUresult(42)".to_owned(), "unknown error".to_owned()));
    assert_eq!(
        fallback_names(42, Some("CUDA_ERROR_X".into()), Some("x happened".into()), "CUresult"),
        ("CUDA_ERROR_X".to_owned(), "x happened".to_owned())
    );
}

#[test]
fn an_invalid_size_is_out_of_memory_only_past_what_rust_can_allocate() {
    let dev = DeviceId::new(BackendKind::Cuda, 0);
    let largest = isize::MAX as usize;
    assert!(matches!(check_alloc(&Described, INVALID_VALUE, "alloc", dev, largest), Err(Error::Vendor { .. })));
    assert!(matches!(
        check_alloc(&Described, INVALID_VALUE, "alloc", dev, largest + 1),
        Err(Error::OutOfMemory { bytes, .. }) if bytes == largest + 1
    ));
}
