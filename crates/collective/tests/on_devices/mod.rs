//! What the tests of NCCL and RCCL communicators share: the devices under test (a driver
//! double's, or a GPU's), a communicator over two of them, and an error's variant by name.

use gpuport_collective::Communicator;
use gpuport_core::{BackendKind, Error};
use gpuport_runtime::{AnyDevice, Runtime};

/// The devices of the backend under test: ROCm's when `GPUPORT_CONFORMANCE_BACKENDS` names
/// it (as `cargo xtask` does: both doubles are loaded in each run), else CUDA's.
pub fn devices() -> Vec<AnyDevice> {
    let rt = Runtime::discover();
    let named = std::env::var("GPUPORT_CONFORMANCE_BACKENDS").unwrap_or_default();
    let kind = if named == "rocm" { BackendKind::Rocm } else { BackendKind::Cuda };
    let found: Vec<AnyDevice> = rt.devices().into_iter().filter(|d| d.id().kind == kind).collect();
    assert!(!found.is_empty(), "no {kind} device: run under a driver double (cargo xtask test --double) or on a GPU");
    found
}

/// Each test's turn: the tests of one binary run one at a time. Their communicators share
/// the devices' default streams, where collectives of two communicators queued by two
/// threads in opposite orders on two devices would wait for each other (as on NCCL).
pub fn turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Both devices and one communicator over them (a rank each), during the test's
/// [`turn`].
#[allow(dead_code)] // the one-rank test uses the devices alone
pub fn setup() -> (std::sync::MutexGuard<'static, ()>, Vec<AnyDevice>, Vec<Communicator>) {
    let turn = turn();
    let mut devices = devices();
    assert!(devices.len() >= 2, "two devices needed, {} found: the doubles have two", devices.len());
    devices.truncate(2);
    let comms = Communicator::init_all(&devices).expect("one communicator over both devices");
    (turn, devices, comms)
}

/// The error's variant (`InvalidArgument`).
#[allow(dead_code)] // the tests across processes name no error
pub fn kind_of(e: &Error) -> String {
    format!("{e:#?}").split(':').next().unwrap_or_default().to_owned()
}
