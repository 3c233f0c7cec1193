//! What the tests on the collectives double share: the devices of the double under test,
//! a communicator over them, and an error's variant by name.

use gpuport_collective::Communicator;
use gpuport_core::{BackendKind, Error};
use gpuport_runtime::{AnyDevice, Runtime};

/// The two devices of the double under test (`GPUPORT_CONFORMANCE_BACKENDS`, as
/// `cargo xtask` names it: both doubles are loaded in each run).
pub fn devices() -> Vec<AnyDevice> {
    let rt = Runtime::discover();
    let named = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_default();
    let kind = if named == "rocm" { BackendKind::Rocm } else { BackendKind::Cuda };
    let found: Vec<AnyDevice> = rt.devices().into_iter().filter(|d| d.id().kind == kind).collect();
    assert!(
        found.len() >= 2,
        "{kind} has {} devices: run under a driver double (cargo xtask test --double)",
        found.len()
    );
    found[..2].to_vec()
}

/// Both devices and one communicator over them (a rank each).
pub fn setup() -> (Vec<AnyDevice>, Vec<Communicator>) {
    let devices = devices();
    let comms = Communicator::init_all(&devices).expect("one communicator over both devices");
    (devices, comms)
}

/// The error's variant (`InvalidArgument`).
pub fn kind_of(e: &Error) -> String {
    format!("{e:#?}").split(':').next().unwrap_or_default().to_owned()
}
