//! `Device::make_current` makes the device the calling thread's current HIP device, for a
//! foreign library that reads it (rocBLAS, a kernel launched through another binding):
//! checked with the runtime's own `hipGetDevice`, on threads that never used gpuport.
//! Where no HIP runtime with a device loads (no GPU, no runtime double), there is nothing
//! to check.

use std::ffi::c_int;

use gpuport_core::{Backend, Device, LoadOptions};
use gpuport_rocm::{RocmBackend, DEFAULT_NAMES, LIBRARY_ENV};

type GetDevice = unsafe extern "C" fn(*mut c_int) -> u32;

/// This thread's current device, as the runtime gpuport loaded answers.
fn current_device() -> c_int {
    let path = std::env::var(LIBRARY_ENV).unwrap_or_else(|_| DEFAULT_NAMES[0].to_owned());
    // SAFETY: the runtime gpuport already loaded (and initialised) from this path.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: `hipGetDevice`'s C signature.
    let get: libloading::Symbol<GetDevice> = unsafe { lib.get(b"hipGetDevice\0") }.unwrap();
    let mut device = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { get(&mut device) }, 0, "hipGetDevice failed");
    device
}

#[test]
fn make_current_makes_the_device_current_on_the_calling_thread() {
    let Ok(backend) = RocmBackend::load(&LoadOptions::default()) else { return };
    // The last device first: a new thread's current device is device 0 already.
    let devices: Vec<_> = (0..2).map_while(|i| backend.open(i).ok()).collect();
    for (ordinal, dev) in devices.iter().enumerate().rev() {
        let dev = dev.clone();
        let current = std::thread::spawn(move || {
            dev.make_current().unwrap();
            current_device()
        })
        .join()
        .unwrap();
        assert_eq!(current, ordinal as c_int, "make_current of device {ordinal}");
    }
}
