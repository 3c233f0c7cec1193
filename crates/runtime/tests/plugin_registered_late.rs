//! Discovery is a snapshot: a plugin registered after a `Runtime` was discovered is not in
//! it, and asking that runtime for the plugin's device says so and how to fix it. Its own
//! test binary, because the plugin registry is process-wide.

use gpuport_runtime::{Backend, Error, Runtime};

#[test]
fn a_plugin_registered_after_discovery_is_named_with_the_fix() {
    let early = Runtime::discover();
    Runtime::register_plugin(gpuport_ext::ExtBackend::load(&Default::default()).expect("the ext device loads"))
        .expect("ext is not registered yet in this process");
    let err = early.device("ext:0").expect_err("the early runtime does not have the plugin");
    let Error::BackendUnavailable { name, reason } = &err else { panic!("{err:#?}") };
    assert_eq!(name, "ext");
    assert!(reason.contains("registered after this Runtime was discovered"), "{reason}");
    assert!(reason.contains("discover again"), "{reason}");
    // The fix works.
    assert!(Runtime::discover().device("ext:0").is_ok());
    // A name nobody registered still lists what is known.
    let unknown = early.device("nosuch:0").expect_err("no such backend");
    assert!(unknown.to_string().contains("no such backend in this runtime (known: "), "{unknown}");
}
