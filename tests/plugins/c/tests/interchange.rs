//! DLPack between the C plugin and the ext device, which both declare `kDLExtDev`: a
//! tensor of either comes back as an array of the device that owns its memory, told apart
//! by the address (each backend's `pointer_attributes`), whichever backend was found
//! first.

use gpuport::{Array, Runtime};
use gpuport_c_plugin_test::{library, NAME};
use gpuport_dlpack::{from_dlpack, resolve_at, to_dlpack, DLDevice, ExportRequest, ImportRequest};

fn runtime() -> Runtime {
    Runtime::load_plugin(library(None)).expect("the C plugin loads");
    gpuport_conformance::discover_with_builtin_ports()
}

#[test]
fn a_shared_dlpack_device_type_resolves_to_the_owner_of_the_memory() {
    let rt = runtime();
    let values: Vec<u32> = (0..64).collect();
    for name in [format!("{NAME}:1"), "ext:1".to_owned()] {
        let device = rt.device(&name).unwrap();
        let a = Array::from_slice(&device, &values, &[8, 8]).unwrap();
        let tensor = to_dlpack(&rt, &a, &ExportRequest::default()).unwrap();
        assert_eq!(tensor.dl_tensor().device, DLDevice { device_type: 12, device_id: 1 }, "{name}");
        let back = from_dlpack(&rt, tensor, &ImportRequest::default()).unwrap();
        assert_eq!(back.device_id().to_string(), name, "the tensor came back on another device");
        assert_eq!(back.to_vec::<u32>().unwrap(), values, "{name}");
        // The address decides, not the order the backends were found in.
        let resolved = resolve_at(&rt, DLDevice { device_type: 12, device_id: 1 }, a.buffer().addr()).unwrap();
        assert_eq!(resolved.device.id().to_string(), name);
    }
}
