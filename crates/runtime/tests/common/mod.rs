//! Helpers shared by the integration tests; not every test file uses every helper.
#![allow(dead_code)]

//! Shared setup: a runtime with the ext plugin registered.

use std::sync::Once;

use gpuport_runtime::{AnyDevice, Backend, Runtime};

pub fn runtime() -> Runtime {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        let ext = gpuport_ext::ExtBackend::load(&Default::default()).expect("ext loads");
        Runtime::register_plugin(ext).expect("ext registers once");
    });
    Runtime::discover_with(&Default::default())
}

pub fn devices() -> (AnyDevice, AnyDevice, AnyDevice) {
    let rt = runtime();
    (rt.device("host").unwrap(), rt.device("ext:0").unwrap(), rt.device("ext:1").unwrap())
}

pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(u32::from(seed)) as u8).collect()
}
