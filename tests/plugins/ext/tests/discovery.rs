//! Plugins named for discovery (`GPUPORT_PLUGINS`, here through `DiscoverOptions`): the
//! loadable one is a backend like any other, the others are reported with their reason
//! under their file name, and nothing crashes.

use gpuport::{BackendStatus, DiscoverOptions, Runtime};
use gpuport_ext_plugin::{library_path, NAME};

#[test]
fn named_plugins_are_loaded_once_and_broken_ones_reported() {
    let plugins = vec![library_path(), "/nonexistent/libgone.so".into(), "libm.so.6".into(), library_path()];
    let rt = Runtime::discover_with(&DiscoverOptions { plugins: plugins.clone(), ..Default::default() });
    let loaded = rt.report_for(NAME).expect("the plugin is discovered");
    assert!(loaded.is_available(), "{loaded:?}");
    assert_eq!(rt.reports().iter().filter(|r| r.name == NAME).count(), 1, "loaded twice");
    for (file, says) in [("libgone.so", "libgone.so"), ("libm.so.6", "gpuport_plugin_entry")] {
        let report = rt.report_for(file).unwrap_or_else(|| panic!("{file} is not reported"));
        match &report.status {
            BackendStatus::Unavailable(e) => assert!(e.to_string().contains(says), "{file}: {e}"),
            other => panic!("{file} is {other:?}"),
        }
    }
    // Again: the library stays loaded, and is not loaded a second time.
    let again = Runtime::discover_with(&DiscoverOptions { plugins, ..Default::default() });
    assert!(again.report_for(NAME).is_some_and(|r| r.is_available()));
    // GPUPORT_BACKENDS-style filtering applies to plugins by their name.
    let only_host =
        Runtime::discover_with(&DiscoverOptions { backends: Some(vec!["host".into()]), plugins: vec![library_path()] });
    assert!(only_host.report_for(NAME).is_none());
}

#[test]
fn plugin_lists_split_on_colons() {
    assert_eq!(
        gpuport::parse_plugin_list(" /a/x.so::/b/y.so: "),
        vec![std::path::PathBuf::from("/a/x.so"), std::path::PathBuf::from("/b/y.so")]
    );
}
