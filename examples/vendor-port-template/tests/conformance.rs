//! Step 8: the whole conformance suite against this port, with one call — on the fake
//! vendor's library, which also reports every misuse of its API it sees.

use std::path::PathBuf;
use std::sync::Once;

use gpuport::{Backend, Runtime};
use gpuport_conformance::{run_port, Port, TestKernel};
use gpuport_vendor_port_template::{loader, VendorBackend, IMAGE_FORMAT, KIND};

/// The fake vendor's library, built beside this test (a dev-dependency).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent().expect("the test's folder").join("libfakevendor.so")
}

/// Where the runtime writes what it saw the port do wrong.
fn report() -> PathBuf {
    library().with_file_name("fakevendor-report.txt")
}

/// Points the port at the library and the runtime at its report, once per process and
/// before anything loads it.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = std::fs::remove_file(report());
        // SAFETY: set once, before any thread of this test process reads the environment.
        unsafe {
            std::env::set_var(loader::LIBRARY_ENV, library());
            std::env::set_var("GPUPORT_DOUBLE_REPORT", report());
            // Objects the suite leaves to process exit are not the port's leaks.
            std::env::set_var("GPUPORT_DOUBLE_LEAK_CHECK", "0");
        }
    });
}

/// Step 7: how a user registers the port with the runtime.
fn register() -> gpuport::Result<()> {
    setup();
    Runtime::register_plugin(VendorBackend::load(&Default::default())?)
}

/// The runtime runs `fill_u32`; its module image lists the kernels it holds.
fn fill_kernel() -> TestKernel {
    TestKernel {
        image: gpuport::ModuleImage::Custom { format: IMAGE_FORMAT, bytes: b"fakevendor module\nkernel fill_u32\n" },
        name: "fill_u32",
    }
}

/// Nothing the runtime reported as misuse.
fn violations() -> String {
    std::fs::read_to_string(report()).unwrap_or_default()
}

#[test]
fn passes_the_conformance_suite_without_misusing_the_runtime() {
    let report = run_port(&Port { name: KIND.name(), register: Some(register), kernel: Some(fill_kernel()) });
    report.assert_passed();
    assert_eq!(violations(), "", "the runtime saw the port misuse its API");
}

#[test]
fn is_reached_through_the_facade_like_any_device() {
    let _ = register(); // the suite test may have registered it already
    let dev = Runtime::discover().device(&format!("{}:0", KIND.name())).unwrap();
    let a = gpuport::Array::from_slice(&dev, &[1u32, 2, 3], &[3]).unwrap();
    assert_eq!(a.to_vec::<u32>().unwrap(), vec![1, 2, 3]);
    assert_eq!(dev.dlpack_devices().device, gpuport::DlDeviceType::EXT_DEV);
}

#[test]
fn a_missing_library_is_a_reason_never_a_crash() {
    let opts = gpuport::LoadOptions { library_path: Some("/nonexistent/libfakevendor.so".into()) };
    let err = VendorBackend::load(&opts).err().expect("no library there");
    assert!(matches!(err, gpuport::Error::LibraryNotFound { .. }), "{err}");
    // A library without the entry symbol (this test's own C library) is `MissingSymbol`.
    let opts = gpuport::LoadOptions { library_path: Some("libc.so.6".into()) };
    let err = VendorBackend::load(&opts).err().expect("libc has no fvGetApi");
    assert!(matches!(err, gpuport::Error::MissingSymbol { .. }), "{err}");
}
