//! The whole conformance suite against the ext device loaded as a plugin: the same port
//! the suite also runs linked in (`cargo xtask test --backend ext`), here through the C
//! ABI — the plugin's table, the loader's validation, the vendor kit driving it.

use gpuport::Runtime;
use gpuport_conformance::{registered_fill_kernel, run_port, Port};
use gpuport_ext_plugin::{library_path, NAME};

fn load() -> gpuport::Result<()> {
    Runtime::load_plugin(library_path())
}

#[test]
fn passes_the_conformance_suite_as_a_loaded_plugin() {
    // The kernel's module name; the plugin registered the kernel inside itself.
    let kernel = registered_fill_kernel();
    let report = run_port(&Port { name: NAME, register: Some(load), kernel: Some(kernel) });
    report.assert_passed();
}

#[test]
fn is_listed_by_discovery_with_its_devices() {
    load().unwrap();
    let rt = Runtime::discover();
    let report = rt.report_for(NAME).expect("the loaded plugin is discovered");
    assert!(report.is_available(), "{report:?}");
    let dev = rt.device(&format!("{NAME}:1")).unwrap();
    let a = gpuport::Array::from_slice(&dev, &[1u32, 2, 3], &[3]).unwrap();
    assert_eq!(a.to_vec::<u32>().unwrap(), vec![1, 2, 3]);
    assert_eq!(dev.dlpack_devices(), <gpuport_ext::ExtBackend as gpuport::Backend>::DLPACK);
}
