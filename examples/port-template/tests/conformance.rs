//! Step 8: the whole conformance suite against this port, with one call.

use gpuport::{Backend, Runtime};
use gpuport_conformance::{registered_fill_kernel, run_port, Port};
use gpuport_port_template::{TemplateBackend, KIND};

/// Step 7: how a user registers the port with the runtime.
fn register() -> gpuport::Result<()> {
    Runtime::register_plugin(TemplateBackend::load(&Default::default())?)
}

#[test]
fn passes_the_conformance_suite() {
    let report =
        run_port(&Port { name: KIND.name(), register: Some(register), kernel: Some(registered_fill_kernel()) });
    // Prints `conformance of KIND: N passed, 0 failed, M skipped` (no --nocapture needed);
    // on a failure the test fails with the whole report, once: every case and each reason.
    report.assert_passed();
}

#[test]
fn is_reached_through_the_facade_like_any_device() {
    let _ = register(); // the suite test may have registered it already
    let dev = Runtime::discover().device(&format!("{}:0", KIND.name())).unwrap();
    let a = gpuport::Array::from_slice(&dev, &[1u32, 2, 3], &[3]).unwrap();
    assert_eq!(a.to_vec::<u32>().unwrap(), vec![1, 2, 3]);
    assert_eq!(dev.dlpack_devices().device, gpuport::DlDeviceType::CPU);
}
