//! `Device::make_current` makes the device's primary context current on the calling thread,
//! for a foreign library that reads it (cuBLAS, a kernel launched through another binding):
//! checked with the driver's own `cuCtxGetCurrent`, on threads that never used gpuport.
//! Where no CUDA driver loads (no GPU, no driver double), there is nothing to check.

use std::ffi::c_void;

use gpuport_core::{Backend, Device, LoadOptions};
use gpuport_cuda::{CudaBackend, DEFAULT_NAMES, LIBRARY_ENV};

type CtxGetCurrent = unsafe extern "C" fn(*mut *mut c_void) -> u32;

/// The context current on this thread, as the driver gpuport loaded answers.
fn current_context() -> *mut c_void {
    let path = std::env::var(LIBRARY_ENV).unwrap_or_else(|_| DEFAULT_NAMES[0].to_owned());
    // SAFETY: the driver gpuport already loaded (and initialised) from this path.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: `cuCtxGetCurrent`'s C signature.
    let get: libloading::Symbol<CtxGetCurrent> = unsafe { lib.get(b"cuCtxGetCurrent\0") }.unwrap();
    let mut ctx = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { get(&mut ctx) }, 0, "cuCtxGetCurrent failed");
    ctx
}

#[test]
fn make_current_makes_the_devices_context_current_on_the_calling_thread() {
    let Ok(backend) = CudaBackend::load(&LoadOptions::default()) else { return };
    let devices: Vec<_> = (0..2).map_while(|i| backend.open(i).ok()).collect();
    let contexts: Vec<usize> = devices
        .iter()
        .map(|dev| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                assert!(current_context().is_null(), "a new thread starts with no current context");
                dev.make_current().unwrap();
                current_context() as usize
            })
            .join()
            .unwrap()
        })
        .collect();
    assert!(contexts.iter().all(|&c| c != 0), "make_current left no context current: {contexts:?}");
    if let [first, second] = contexts[..] {
        assert_ne!(first, second, "two devices made current the same context");
    }
}
